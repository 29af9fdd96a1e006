"""The plan of a dataset's symlink farm: for each LFN, the PFN it points to.

Pure: the file system is reached only through the `probe` function the
caller passes (farm.probe in the daemon, a dict in tests). Rule: the first
candidate PFN (in the order given: local pool replica before namespace
path) that is readable, has the listed size and whose real path lies inside
the allowed roots wins. A candidate escaping the roots is refused and
reported even when a later one is used: it means a manifest or a link at
the site points where the site never agreed to serve from.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from torrents.dataset import Dataset, Problem, plain_link_text



@dataclass(frozen=True)
class Target:
    """What the file system says about a candidate PFN."""

    realpath: str
    size: int


# Returns None when the path does not exist, is not a regular file or is not readable.
Probe = Callable[[str], Target | None]


@dataclass(frozen=True)
class Link:
    lfn: str
    target: str  # the resolved real path that was checked; for a symlink of the dataset, its target LFN
    size: int
    symlink: bool = False  # a link the dataset carries (BEP 47), to `target` inside the dataset
    link_text: str | None = None  # such a link's text as the site wrote it, where not the plain one

    @property
    def text(self) -> str:
        """What the farm's link holds: the real path, or the dataset's link relative to its directory."""
        if not self.symlink:
            return self.target
        return self.link_text or plain_link_text(self.lfn, self.target)


@dataclass(frozen=True)
class DatasetLayout:
    dataset: Dataset
    links: tuple[Link, ...]  # empty unless every file has a usable replica
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return bool(self.links)

    @property
    def name(self) -> str:
        return self.dataset.name


def inside(path: str, roots: Iterable[str]) -> bool:
    """True when the normalised absolute `path` is one of `roots` or below one."""
    path = posixpath.normpath(path)
    for root in roots:
        root = posixpath.normpath(root)
        if path == root or path.startswith(root.rstrip("/") + "/"):
            return True
    return False


def plan_dataset(ds: Dataset, allowed_roots: Sequence[str] | None, probe: Probe) -> DatasetLayout:
    """Choose a PFN for every file of `ds`; `allowed_roots` None means anywhere (make-torrent)."""
    links: list[Link] = []
    problems: list[Problem] = []
    missing = 0
    for f in ds.files:
        where = f"{ds.name}/{f.lfn}"
        if f.symlink is not None:
            links.append(Link(f.lfn, f.symlink, 0, symlink=True, link_text=f.link_text))
            continue
        reasons: list[str] = []
        chosen: Link | None = None
        for pfn in f.pfns:
            target = probe(pfn)
            if target is None:
                reasons.append(f"{pfn}: not a readable file")
                continue
            if allowed_roots is not None and not inside(target.realpath, allowed_roots):
                problems.append(Problem(ds.name, where, f"{pfn} resolves to {target.realpath}, outside the "
                                                        "storage roots; refused"))
                reasons.append(f"{pfn}: outside the storage roots")
                continue
            if target.size != f.size:
                reasons.append(f"{pfn}: size {target.size}, expected {f.size}")
                continue
            chosen = Link(f.lfn, target.realpath, f.size)
            break
        if chosen is None:
            missing += 1
            detail = "; ".join(reasons) if reasons else "no PFN listed"
            problems.append(Problem(ds.name, where, f"no usable replica ({detail})"))
        else:
            links.append(chosen)
    if missing:
        problems.append(Problem(ds.name, ds.name, f"{missing} of {len(ds.files)} files have no usable "
                                                  "replica; not served"))
        return DatasetLayout(ds, (), tuple(problems))
    return DatasetLayout(ds, tuple(links), tuple(problems))


def plan(datasets: Iterable[Dataset], allowed_roots: Sequence[str] | None, probe: Probe) -> list[DatasetLayout]:
    return [plan_dataset(ds, allowed_roots, probe) for ds in datasets]
