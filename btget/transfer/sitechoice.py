"""The sites the user chose: preferred (`--prefer-site`) and left out (`--exclude-site`). Pure.

Names are the sites' names, as `bt-get --search` and the summary show
them; the tracker's /api/sites says which peer endpoints each runs. A site
left out is never connected, its web seeds never used: a name that names no
site the tracker knows, or a choice that cannot be enforced because the
tracker did not say where the sites are, is an error before anything is
fetched, not a silent connection to the site the user meant to avoid. A
preferred site is tried first; the others wait while it sends
(btget/worker/steering.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from torrents.errors import UsageError
from torrents.hostport import host_of

from btget.transfer import webseeds


@dataclass(frozen=True)
class SiteChoice:
    prefer: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.prefer or self.exclude)


def addresses(choice: SiteChoice, sites: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The peer addresses of the preferred sites and of those left out, from `sites` (endpoint 'ip:port' →
    site name, the tracker's /api/sites). UsageError for a name no site has, a site both preferred and
    left out, or a choice made when the tracker named no site."""
    both = sorted(set(choice.prefer) & set(choice.exclude))
    if both:
        raise UsageError("--prefer-site/--exclude-site", f"{', '.join(both)}: both preferred and left out")
    if not choice:
        return (), ()
    known = sorted(set(sites.values()))
    if not known:
        raise UsageError(_flag(choice), "the tracker named no site (it did not answer, or the torrent has no "
                                        "tracker of the federation): the sites chosen cannot be told apart")
    unknown = [n for n in (*choice.prefer, *choice.exclude) if n not in known]
    if unknown:
        raise UsageError(_flag(choice), f"no site is named {', '.join(unknown)} (the sites: {', '.join(known)})")
    return (_of(choice.prefer, sites), _of(choice.exclude, sites))


def said(choice: SiteChoice) -> str:
    """The choice as the run's start says it."""
    parts = ([f"{', '.join(choice.prefer)} first (--prefer-site)"] if choice.prefer else []) + \
        ([f"{', '.join(choice.exclude)} left out (--exclude-site)"] if choice.exclude else [])
    return "sites: " + "; ".join(parts)


def web_sources(sources: Sequence[webseeds.Source], choice: SiteChoice) -> tuple[webseeds.Source, ...]:
    """The web seeds but those of the sites left out (the preferred ones first)."""
    kept = [s for s in sources if s.site not in choice.exclude]
    return tuple(sorted(kept, key=lambda s: s.site not in choice.prefer))


def _of(names: Sequence[str], sites: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(sorted({host_of(ep) for ep, name in sites.items() if name in names}))


def _flag(choice: SiteChoice) -> str:
    return "--exclude-site" if choice.exclude else "--prefer-site"
