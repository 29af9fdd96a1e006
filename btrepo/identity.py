"""What a dataset is when sites disagree: the rules, as pure functions (docs/repository.md).

Every site builds its .torrent from its own bytes, so two replicas that
differ get two info-hashes under one name. Which of them *is* the dataset
is decided here, never by who published last:

- `classify` (at a version's first publication) says how it relates to the
  version being served: a new version (the catalog's checksums changed,
  files were added, the site that alone held the dataset changed it, or a
  site declared it), a partial replica (a subset of the files, same
  content), or a conflict (other bytes for the same files).
- `decide` (after every change) chooses the version to serve among the
  newest generation's rivals: an operator's choice, else the one the
  catalog's checksums confirm, else the one most storage sites (T2) hold
  (a T3 holds, never votes: btrepo/rights.py), else the
  first published — and then the choice is *disputed*: nothing separates
  the rivals, and bt-get refuses rather than deliver bytes that may be the
  bad ones. It also says where each site stands against the choice.

A version "contradicts the catalog" when, for a file whose catalog
checksum is known, its bytes differ from those of a version whose site
checked them against the catalog: it is never served.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence


class Relation(enum.Enum):
    """How a version related to the served one when it was first published (stored)."""

    CREATED = "created"  # the first version of the dataset
    NEW_VERSION = "new_version"  # replaces the served version: starts a new generation
    PARTIAL = "partial"  # a subset of the served version's files, same content
    CONFLICT = "conflict"  # other bytes (or other files) for the same dataset: a rival

    @property
    def heads_generation(self) -> bool:
        return self in (Relation.CREATED, Relation.NEW_VERSION)


class SiteState(enum.Enum):
    """Where a site's replica stands against the served version."""

    CURRENT = "current"
    PARTIAL = "partial"  # lacks files of the served version; the ones it has agree
    CONFLICT = "conflict"  # holds other bytes for files of the served version
    CONTRADICTS_CATALOG = "contradicts_catalog"  # its bytes differ from catalog-checked ones
    OUTDATED = "outdated"  # holds an earlier version of the dataset


class DecidedBy(enum.Enum):
    ONLY = "only"  # no rival
    OPERATOR = "operator"
    CATALOG = "catalog"
    MAJORITY = "majority"
    FIRST_PUBLISHED = "first_published"  # a tie nothing else breaks: disputed


@dataclass(frozen=True)
class FileFacts:
    size: int
    adler32: str | None = None  # the catalog's, as the publishing site checked it
    xxh3: str | None = None  # the replica's content, as its site hashed it


@dataclass(frozen=True)
class VersionFacts:
    info_hash: str
    order: int  # publication order: smaller is earlier
    files: Mapping[str, FileFacts]
    holders: frozenset[str] = frozenset()  # sites holding this version now
    relation: Relation = Relation.CREATED
    base: str | None = None  # the served version it was compared with
    piece_length: int = 0
    t3: frozenset[str] = frozenset()  # those of `holders` that are T3s: they hold it, they never vote

    @property
    def voters(self) -> frozenset[str]:
        """The storage sites (T2) holding it: only they count in a majority (btrepo/rights.py)."""
        return self.holders - self.t3

    @property
    def catalog_confirmed(self) -> bool:
        """Its site checked every file against a catalog checksum (and published, so they matched)."""
        return bool(self.files) and all(f.adler32 is not None for f in self.files.values())


@dataclass(frozen=True)
class Difference:
    """`theirs` against `ours`, file by file."""

    differing: tuple[str, ...] = ()  # in both, other size or other bytes
    missing: tuple[str, ...] = ()  # in ours only
    extra: tuple[str, ...] = ()  # in theirs only
    catalog_changed: tuple[str, ...] = ()  # in both, with other catalog checksums

    @property
    def same_files(self) -> bool:
        return not (self.differing or self.missing or self.extra)

    @property
    def adds_only(self) -> bool:
        """`theirs` is `ours` plus files: every file of ours, the same bytes."""
        return not self.differing and not self.missing and bool(self.extra)


def compare(ours: Mapping[str, FileFacts], theirs: Mapping[str, FileFacts]) -> Difference:
    """How `theirs` differs from `ours`. Contents unknown on either side (no xxh3) count as equal."""
    differing, changed = [], []
    for lfn in sorted(ours.keys() & theirs.keys()):
        a, b = ours[lfn], theirs[lfn]
        if a.adler32 is not None and b.adler32 is not None and a.adler32 != b.adler32:
            changed.append(lfn)
            differing.append(lfn)
        elif a.size != b.size or (a.xxh3 is not None and b.xxh3 is not None and a.xxh3 != b.xxh3):
            differing.append(lfn)
    return Difference(tuple(differing), tuple(sorted(ours.keys() - theirs.keys())),
                      tuple(sorted(theirs.keys() - ours.keys())), tuple(changed))


@dataclass(frozen=True)
class Classified:
    relation: Relation
    base: str | None
    why: str


def classify(files: Mapping[str, FileFacts], site: str, served: VersionFacts | None, *,
             declared: bool = False) -> Classified:
    """How a version never seen before, published by `site`, relates to the `served` one."""
    if served is None:
        return Classified(Relation.CREATED, None, "first version")
    base = served.info_hash
    if declared:
        return Classified(Relation.NEW_VERSION, base, f"declared a new version by {site}")
    diff = compare(served.files, files)
    if diff.catalog_changed:
        return Classified(Relation.NEW_VERSION, base, f"the catalog's checksums changed ({_few(diff.catalog_changed)})")
    if diff.adds_only:
        return Classified(Relation.NEW_VERSION, base, f"files added ({_few(diff.extra)})")
    if not diff.differing and not diff.extra and diff.missing:
        return Classified(Relation.PARTIAL, base, f"lacks {_few(diff.missing)}")
    if served.voters == {site}:
        return Classified(Relation.NEW_VERSION, base, f"changed by {site}, the only site holding it")
    if diff.same_files:
        return Classified(Relation.CONFLICT, base, "the same bytes built with other parameters "
                                                   f"(piece length {served.piece_length} elsewhere)")
    return Classified(Relation.CONFLICT, base, _describe(diff))


@dataclass(frozen=True)
class SiteView:
    site: str
    info_hash: str
    state: SiteState
    difference: Difference = field(default_factory=Difference)

    def to_json(self) -> dict:
        d = self.difference
        return {"site": self.site, "info_hash": self.info_hash, "state": self.state.value,
                "differing": list(d.differing), "missing": list(d.missing), "extra": list(d.extra)}


@dataclass(frozen=True)
class Decision:
    current: str | None  # the info-hash served by name
    decided_by: DecidedBy
    disputed: bool  # rivals nothing separates: the name alone must not be served
    rivals: tuple[str, ...]  # the candidates that were weighed (current first)
    sites: tuple[SiteView, ...]  # every holding site, against the current version
    contradicted: tuple[str, ...] = ()  # versions never to be served
    held: bool = True  # some site holds the current version whole

    @property
    def servable(self) -> bool:
        """Whether `bt-get NAME` may fetch the current version by name."""
        return self.current is not None and self.held and not self.disputed

    @property
    def conflict(self) -> bool:
        """Some site holds a replica that disagrees with the served version (a partial one is not)."""
        return any(v.state in (SiteState.CONFLICT, SiteState.CONTRADICTS_CATALOG) for v in self.sites)

    def summary(self, name: str) -> str:
        """One sentence for a user or an operator: what is served and who disagrees."""
        bad = [v for v in self.sites if v.state is not SiteState.CURRENT]
        parts = [f"{v.site} {_state_text(v)}" for v in bad]
        if self.disputed:
            return (f"{name}: replicas disagree and nothing decides between them (no catalog checksums, "
                    f"no majority): {'; '.join(parts)}")
        if not self.held:
            return f"{name}: no site holds the whole dataset: {'; '.join(parts) or 'no site holds it'}"
        return f"{name}: " + "; ".join(parts) if parts else f"{name}: every site agrees"

    def to_json(self) -> dict:
        return {"current": self.current, "decided_by": self.decided_by.value, "disputed": self.disputed,
                "held": self.held, "servable": self.servable, "conflict": self.conflict,
                "rivals": list(self.rivals), "contradicted": list(self.contradicted),
                "sites": [v.to_json() for v in self.sites]}

    @classmethod
    def from_json(cls, doc: Mapping) -> "Decision":
        views = tuple(SiteView(v["site"], v["info_hash"], SiteState(v["state"]),
                               Difference(tuple(v["differing"]), tuple(v["missing"]), tuple(v["extra"])))
                      for v in doc.get("sites", ()))
        return cls(doc.get("current"), DecidedBy(doc.get("decided_by", "only")), bool(doc.get("disputed")),
                   tuple(doc.get("rivals", ())), views, tuple(doc.get("contradicted", ())),
                   bool(doc.get("held", True)))


def generations(versions: Sequence[VersionFacts]) -> list[list[VersionFacts]]:
    """Versions grouped by generation (a head and what was compared with it), oldest first."""
    by_hash = {v.info_hash: v for v in versions}
    gen_of: dict[str, int] = {}
    groups: list[list[VersionFacts]] = []
    for v in sorted(versions, key=lambda v: v.order):
        if v.relation.heads_generation or v.base not in gen_of:
            gen_of[v.info_hash] = len(groups)
            groups.append([v])
        else:
            gen_of[v.info_hash] = gen_of[v.base]  # type: ignore[index]
            groups[gen_of[v.info_hash]].append(v)
    assert len(gen_of) == len(by_hash)
    return groups


def contradicted(versions: Iterable[VersionFacts]) -> set[str]:
    """Versions whose bytes differ from catalog-checked bytes of the same generation, on a file the
    catalog lists."""
    versions = list(versions)
    checked = [v for v in versions if v.catalog_confirmed]
    out = set()
    for v in versions:
        if v.catalog_confirmed:
            continue
        for c in checked:
            common = v.files.keys() & c.files.keys()
            if any(c.files[lfn].adler32 is not None and v.files[lfn].xxh3 is not None
                   and c.files[lfn].xxh3 is not None
                   and (v.files[lfn].xxh3 != c.files[lfn].xxh3 or v.files[lfn].size != c.files[lfn].size)
                   for lfn in common):
                out.add(v.info_hash)
                break
    return out


def decide(versions: Sequence[VersionFacts], pinned: str | None = None) -> Decision:
    """The version to serve, how it was chosen, and where every site stands."""
    if not versions:
        return Decision(None, DecidedBy.ONLY, False, (), ())
    groups = generations(versions)
    pinned_group = next((g for g in groups if any(v.info_hash == pinned for v in g)), None)
    if pinned_group is not None and pinned not in contradicted(pinned_group):
        group = pinned_group
    else:
        # The newest generation that some site still holds (a reverted dataset goes back to
        # the one its sites hold), else the newest.
        live = [g for g in groups if any(v.voters for v in g)]
        group = (live or groups)[-1]
        pinned = None
    bad = contradicted(group)
    candidates = [v for v in group if v.relation is not Relation.PARTIAL and v.info_hash not in bad]
    if not candidates:  # only partial or contradicted replicas: the least bad, never served as good
        candidates = [v for v in group if v.info_hash not in bad] or group
    if pinned is not None:
        current, how, disputed = next(v for v in group if v.info_hash == pinned), DecidedBy.OPERATOR, False
    else:
        current, how, disputed = _weigh(candidates)
        if how is DecidedBy.ONLY and bad:
            how = DecidedBy.CATALOG  # its rivals were ruled out by the catalog's checksums
    views = []
    for v in sorted(versions, key=lambda v: v.order):
        for site in sorted(v.holders):
            views.append(_view(site, v, current, group, bad))
    rivals = [current.info_hash] + [v.info_hash for v in candidates if v is not current]
    return Decision(current.info_hash, how, disputed, tuple(rivals), tuple(sorted(views, key=lambda s: s.site)),
                    tuple(sorted(bad)), held=bool(current.holders))


def _weigh(candidates: list[VersionFacts]) -> tuple[VersionFacts, DecidedBy, bool]:
    first = min(candidates, key=lambda v: v.order)
    if len(candidates) == 1:
        return first, DecidedBy.ONLY, False
    confirmed = [v for v in candidates if v.catalog_confirmed]
    if len(confirmed) == 1:
        return confirmed[0], DecidedBy.CATALOG, False
    pool = confirmed or candidates
    votes = sorted(pool, key=lambda v: (-len(v.voters), v.order))
    if len(votes[0].voters) > len(votes[1].voters):
        return votes[0], DecidedBy.MAJORITY, False
    tied = [v for v in pool if len(v.voters) == len(votes[0].voters)]
    return min(tied, key=lambda v: v.order), DecidedBy.FIRST_PUBLISHED, True


def _view(site: str, held: VersionFacts, current: VersionFacts, group: list[VersionFacts], bad: set[str]) -> SiteView:
    if held.info_hash == current.info_hash:
        return SiteView(site, held.info_hash, SiteState.CURRENT)
    diff = compare(current.files, held.files)
    if held.info_hash in bad:
        return SiteView(site, held.info_hash, SiteState.CONTRADICTS_CATALOG, diff)
    in_generation = any(v.info_hash == held.info_hash for v in group)
    if not diff.differing and not diff.extra and diff.missing:
        return SiteView(site, held.info_hash, SiteState.PARTIAL, diff)
    if not in_generation:
        return SiteView(site, held.info_hash, SiteState.OUTDATED, diff)
    return SiteView(site, held.info_hash, SiteState.CONFLICT, diff)


def _few(names: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _describe(diff: Difference) -> str:
    parts = []
    if diff.differing:
        parts.append(f"{len(diff.differing)} files hold other bytes ({_few(diff.differing)})")
    if diff.missing:
        parts.append(f"lacks {_few(diff.missing)}")
    if diff.extra:
        parts.append(f"has files the dataset does not ({_few(diff.extra)})")
    return "; ".join(parts) or "other bytes"


def _state_text(view: SiteView) -> str:
    d = view.difference
    if view.state is SiteState.PARTIAL:
        return f"holds a partial replica (lacks {_few(d.missing)})"
    if view.state is SiteState.CONTRADICTS_CATALOG:
        return f"holds bytes the catalog's checksums contradict ({_few(d.differing)})"
    if view.state is SiteState.OUTDATED:
        return "holds an earlier version"
    return f"holds a conflicting replica: {_describe(d)}"
