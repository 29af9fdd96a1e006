"""Who may change what the repository serves: the rules, as pure functions (docs/repository.md).

btrepo.identity decides what a dataset *is* among the versions stored; this
module decides which publications may be stored at all. A site's kind is
the federation's operators' word (`[repo] site_kinds`), never the site's:

- a T3 (a secret handed out to share what its users fetched) may only add
  itself as a holder of the version served: the same info-hash. Anything
  else — a dataset nobody published, another info-hash, a declared new
  version — is refused, so it never becomes a version, a rival, or a vote
  (identity counts only T2 holders). A stolen T3 secret can at worst offer
  the served version's pieces, which every client checks against the
  served .torrent anyway.
- a T2 (a storage site) may publish any dataset, and rivals that
  identity weighs; but a *new version*, the one change that replaces what
  everyone fetches, only of a dataset whose served version it holds or has
  held (its *keepers*), or as one of `[repo] curators` — except a version
  that only adds files to the served one (same bytes for every served file),
  which takes nothing away; and never over a version the catalog's checksums
  confirm, unless the new one is confirmed by the catalog too (the catalog,
  not a site, then says the dataset changed).

`refusal_*` return the reason a publication is refused (HTTP 403), or None.
Each change of the served version is recorded with who, when and why
(`Change`, listed by the API and the dataset page).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection

from torrents.sitekinds import T3

from btrepo.identity import DecidedBy, VersionFacts


def refusal_by_kind(site: str, kind: str, *, info_hash: str, served: str | None, declared: bool) -> str | None:
    """Why a publication of `info_hash` by `site` is refused for its kind, before any comparison
    (`served`: the info-hash the repository serves for the dataset, None for a dataset never published)."""
    if kind != T3:
        return None
    if served is None:
        return (f"{site} is a T3: it may only add itself as a holder of a version the repository serves, "
                "and no storage site has published this dataset")
    if declared:
        return (f"{site} is a T3: it may not declare a new version (only a storage site holding the dataset may); "
                f"it may only add itself as a holder of the served version {served}")
    if info_hash != served:
        return (f"{site} is a T3: it may only add itself as a holder of the served version {served}, not publish "
                f"{info_hash} (other bytes or files, or the same built with other settings)")
    return None


def refusal_of_new_version(site: str, *, served: VersionFacts, confirmed: bool, keepers: Collection[str],
                           curators: Collection[str], adds_only: bool = False) -> str | None:
    """Why `site` (a T2) may not replace the `served` version with a new one (`confirmed`: every file of
    the new one checked against the catalog; `adds_only`: undeclared, it holds every served file with the
    same bytes, and more)."""
    # Files added to the served ones take nothing away and change no byte that anyone fetches, so any T2
    # may: else a site whose copy lacks a file, publishing first, would keep the whole copies out.
    if site not in keepers and site not in curators and not adds_only:
        who = ", ".join(sorted(keepers)) or "none"
        return (f"{site} may not publish a new version: it has never held the served version {served.info_hash} "
                f"(the sites that may: {who}; or a site in [repo] curators)")
    if served.catalog_confirmed and not confirmed:
        return (f"{site} may not publish a new version: the served version {served.info_hash} is "
                f"confirmed by the catalog's checksums, and a new version must be too (every file with the "
                f"catalog's adler32)")
    return None


# Who changed what is served, when it was not a site's publication.
OPERATOR = "operator"
REPOSITORY = "bt-repo"

_DECIDED = {DecidedBy.ONLY: "no rival contests it", DecidedBy.OPERATOR: "the operator chose it",
            DecidedBy.CATALOG: "the catalog's checksums confirm it", DecidedBy.MAJORITY: "most storage sites hold it",
            DecidedBy.FIRST_PUBLISHED: "published first, disputed"}


@dataclass(frozen=True)
class Change:
    """One change of the served version, as the audit list shows it."""

    at: str  # ISO 8601 UTC
    info_hash: str | None  # served from then on
    previous: str | None
    who: str  # the publishing site, OPERATOR or REPOSITORY
    why: str
    decided_by: DecidedBy

    def to_json(self) -> dict:
        return {"at": self.at, "info_hash": self.info_hash, "previous": self.previous, "who": self.who,
                "why": self.why, "decided_by": self.decided_by.value, "served_because": _DECIDED[self.decided_by]}


def publication_why(result: str, relation_why: str, new_version: bool) -> str:
    """Why a publication (its `result`, catalog.Outcome's value) changed the served version."""
    if result == "created":
        return "first publication"
    if new_version:
        return f"new version: {relation_why}"
    return f"publication ({result.replace('_', ' ')})"
