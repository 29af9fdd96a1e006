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
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from torrents.dataset import Dataset, DatasetFile, read_manifest, validate_lfn, validate_name
from torrents.errors import BtswarmError, DatasetError

log = logging.getLogger("btswarm.server.catalog")


@dataclass(frozen=True)
class Problem:
    """Something the scan refused or could not read; `dataset` is '' when it is not known."""

    dataset: str
    subject: str
    problem: str

    def __str__(self) -> str:
        return f"{self.subject}: {self.problem}"


@dataclass(frozen=True)
class Catalog:
    datasets: tuple[Dataset, ...]
    problems: tuple[Problem, ...]

    def names(self) -> list[str]:
        return [d.name for d in self.datasets]


def scan(roots: Iterable[str], manifests: Iterable[str] = (), extra: Iterable[Dataset] = ()) -> Catalog:
    """Read every dataset of the roots and manifests, plus `extra` (read elsewhere: Rucio);
    never raises for one bad file."""
    found: dict[str, Dataset] = {}
    problems: list[Problem] = []

    def add(ds: Dataset) -> None:
        if ds.name in found:
            problems.append(Problem(ds.name, f"{ds.source}: {ds.name}",
                                    f"dataset already defined by {found[ds.name].source}; ignored"))
            return
        found[ds.name] = ds

    for root in roots:
        for ds in _scan_root(Path(root), problems):
            add(ds)
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
    return Catalog(tuple(found[n] for n in sorted(found)), tuple(problems))


def _scan_root(root: Path, problems: list[Problem]) -> Iterable[Dataset]:
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as exc:
        problems.append(Problem("", str(root), f"cannot read root ({exc.strerror})"))
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
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
        ds = directory_dataset(Path(entry.path), problems)
        if ds is not None:
            yield ds


def directory_dataset(path: Path, problems: list[Problem]) -> Dataset | None:
    """A directory as a dataset, reporting (not raising) files that cannot be used.

    Unlike torrents.dataset.from_directory, which raises at the first
    unreadable file, this records every problem so the operator sees them
    all in one scan. A dataset with a refused file is not served at all:
    a partial copy would get a different info-hash from complete replicas.
    """
    name = path.name
    files: list[DatasetFile] = []
    bad = False
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        here = Path(dirpath)
        keep = []
        for d in sorted(dirnames):
            if d.startswith("."):
                continue
            if (here / d).is_symlink():
                problems.append(Problem(name, str(here / d), "directory symlink inside a dataset; refused"))
                bad = True
                continue
            keep.append(d)
        dirnames[:] = keep
        for fn in sorted(filenames):
            if fn.startswith("."):
                continue
            full = here / fn
            lfn = full.relative_to(path).as_posix()
            try:
                validate_lfn(lfn)
                st = full.stat()
            except DatasetError as exc:
                problems.append(Problem(name, str(full), exc.problem))
                bad = True
                continue
            except OSError as exc:
                problems.append(Problem(name, str(full), f"cannot read ({exc.strerror})"))
                bad = True
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            files.append(DatasetFile(lfn, st.st_size, None, (str(full),)))
    if bad:
        problems.append(Problem(name, str(path), "dataset has refused files; not served"))
        return None
    if not files:
        problems.append(Problem(name, str(path), "dataset has no files"))
        return None
    return Dataset(name, tuple(files), source=str(path))

