"""The site's datasets, read from its roots and manifests.

Every subdirectory of a root is a dataset whose files are the LFNs; each
manifest adds the datasets it lists, with candidate PFNs in order of
preference. A problem with one file or one manifest is reported and the
scan goes on: one broken replica must not hide the site's other datasets.
Which PFN is used (and whether it is allowed) is decided by layout.py.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from torrents.dataset import Dataset, DirectoryScan, Problem, read_manifest, scan_directory, validate_name
from torrents.errors import BtswarmError, DatasetError

log = logging.getLogger("btswarm.server.catalog")


@dataclass(frozen=True)
class Catalog:
    datasets: tuple[Dataset, ...]
    problems: tuple[Problem, ...]
    excluded: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)  # dataset → (LFN, why)
    # Rucio containers: container DID → the DIDs of the datasets it holds, nested containers flattened
    containers: dict[str, tuple[str, ...]] = field(default_factory=dict)


def scan(roots: Iterable[str], manifests: Iterable[str] = (), extra: Iterable[Dataset] = (), *,
         exclude: Sequence[str] = (), allowed_roots: Sequence[str] | None = None,
         require_whole: bool = False, shares: Iterable[tuple[str, str]] = ()) -> Catalog:
    """Read every dataset of the roots and manifests, plus `extra` (read elsewhere: Rucio) and the
    shares ((name, directory): a T3's datasets fetched whole, btserver/sharelist.py); never raises for
    one bad file."""
    found: dict[str, Dataset] = {}
    problems: list[Problem] = []
    excluded: dict[str, tuple[tuple[str, str], ...]] = {}

    def add(ds: Dataset) -> None:
        if ds.name in found:
            problems.append(Problem(ds.name, f"{ds.source}: {ds.name}",
                                    f"dataset already defined by {found[ds.name].source}; ignored"))
            return
        found[ds.name] = ds

    for root in roots:
        for scanned in _scan_root(Path(root), problems, exclude, allowed_roots, require_whole):
            if scanned.excluded:
                excluded[scanned.dataset.name if scanned.dataset else Path(root).name] = scanned.excluded
            problems.extend(scanned.problems)
            if scanned.dataset is not None:
                add(scanned.dataset)
    for name, directory in shares:
        # Whole or not at all: a share lacking a file would be another info-hash than the one fetched.
        scanned = scan_directory(directory, name, exclude=exclude, allowed_roots=allowed_roots, require_whole=True)
        if scanned.excluded:
            excluded[name] = scanned.excluded
        problems.extend(scanned.problems)
        if scanned.dataset is not None:
            add(scanned.dataset)
    for manifest in manifests:
        try:
            datasets = read_manifest(manifest)
        except BtswarmError as exc:
            problems.append(Problem("", exc.subject, exc.problem))
            continue
        for ds in datasets:
            add(ds)
    for ds in extra:
        add(ds)
    for p in problems:
        log.warning("%s", p)
    return Catalog(tuple(found[n] for n in sorted(found)), tuple(problems), excluded)


def _scan_root(root: Path, problems: list[Problem], exclude: Sequence[str], allowed_roots: Sequence[str] | None,
               require_whole: bool) -> Iterable[DirectoryScan]:
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as exc:
        problems.append(Problem("", str(root), f"cannot read root ({exc.strerror})"))
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue  # a dataset's name never starts with '.' (its own files may)
        if entry.is_symlink():
            # A dataset directory that is a link could point anywhere; the
            # storage roots are the only places a site agreed to serve.
            problems.append(Problem(entry.name, entry.path, "dataset directory is a symlink; refused"))
            continue
        if not entry.is_dir(follow_symlinks=False):
            continue
        try:
            validate_name(entry.name)
        except DatasetError as exc:
            problems.append(Problem("", entry.path, exc.problem))
            continue
        # Refused files are problems of their own and the rest is served (unless require_whole):
        # a dataset that lacks them is a partial replica, and the repository says so.
        yield scan_directory(entry.path, exclude=exclude, allowed_roots=allowed_roots, require_whole=require_whole)
