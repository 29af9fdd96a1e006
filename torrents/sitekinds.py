"""What kind of site each site is, as the federation's operators configure it. Pure.

A site never says what it is: the tracker and the repository hold, beside
each site's secret (`site_secrets`), its kind (`site_kinds`), and so its
rights (docs/deploy-site.md, "What each role may do"):

- `T2`, a storage site (the default for every site in `site_secrets`):
  publishes the datasets it holds and seeds them;
- `T3`, a Tier-3 handed a secret to share what its users fetched
  (`bt-get --share`): may only add itself as a holder of a version the
  repository already serves.

A heartbeat or a publication still carries the sender's own `kind`
(`[server] kind`), so that a site configured as one kind and running as the
other is told at once; a claim that differs from the configuration is
refused (HTTP 403) with `claim_problem`'s sentence.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from torrents.errors import ConfigError

T2 = "T2"
T3 = "T3"
SITE_KINDS = (T2, T3)


def check_kinds(key: str, kinds: Mapping[str, str]) -> None:
    """Every value of a `site_kinds` table a known kind."""
    for site, kind in kinds.items():
        if kind not in SITE_KINDS:
            raise ConfigError(key, f"{site}: kind must be one of {', '.join(SITE_KINDS)}, got {str(kind)[:20]!r}")


def check_sites(key: str, sites: Iterable[str], secrets: Mapping[str, str]) -> None:
    """Every site named in `key` has a secret: a typo would leave a T3 a T2. Checked once every key is
    read (the loader checks keys one by one), by the service's `run`."""
    for site in sites:
        if site not in secrets:
            raise ConfigError(key, f"{site}: no secret for it in site_secrets (a misspelt site name?)")


def kind_of(site: str, kinds: Mapping[str, str]) -> str:
    """The configured kind of `site`: its entry in `site_kinds`, else T2."""
    return kinds.get(site, T2)


def claim_problem(site: str, claimed: object, configured: str, key: str) -> str | None:
    """Why a site's claimed kind is refused (None when it is the configured one, or not claimed)."""
    if claimed is None or claimed == configured:
        return None
    shown = str(claimed)[:20]
    return (f"claims to be a {shown} site but {key} makes it a {configured}: set [server] kind = "
            f"\"{configured}\" at {site}, or ask the federation's operators to change {key}")
