"""Symlink farms on disk: <state>/farm/<dataset>/<LFN> → the chosen PFN.

A link the dataset itself carries (BEP 47) is in the farm as that link,
relative, pointing at the farm's own entry for its target.

A farm is built aside (`.<dataset>.new`) and moved into place by rename,
so libtorrent never sees a half-built directory. An unchanged farm is left
alone: rebuilding it under a running seed would only churn the disk.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from pathlib import Path
from typing import Callable, Iterable

from torrents.paths import RealPaths

from btserver.layout import DatasetLayout, Target

log = logging.getLogger("btswarm.server.farm")


def probe(path: str, realpath: Callable[[str], str] = os.path.realpath) -> Target | None:
    """The real file system behind layout's Probe."""
    try:
        real = realpath(path)
        st = os.stat(real)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode) or not os.access(real, os.R_OK):
        return None
    return Target(real, st.st_size)


def prober() -> Callable[[str], Target | None]:
    """`probe` for one scan, each directory resolved once (torrents.paths.RealPaths)."""
    realpath = RealPaths()
    return lambda path: probe(path, realpath)


def farm_path(farm_root: str | os.PathLike, name: str) -> Path:
    return Path(farm_root) / name


def current_links(path: Path) -> dict[str, str]:
    """LFN → link target of an existing farm (anything else in it counts as a difference)."""
    out: dict[str, str] = {}
    top = os.fspath(path)
    for dirpath, dirnames, filenames in os.walk(top):
        # a link to a directory (one the dataset carries) is listed with the directories, never followed
        here = "" if dirpath == top else dirpath[len(top) + 1:] + "/"  # (relpath per file: a third of the walk)
        for fn in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, fn)
            lfn = (here + fn).replace(os.sep, "/")
            try:
                out[lfn] = os.readlink(full)
            except OSError:
                out[lfn] = ""  # a regular file where a link belongs: forces a rebuild
    return out


def apply(layout: DatasetLayout, farm_root: str | os.PathLike) -> tuple[Path, bool]:
    """Make the farm for `layout` → (its directory, whether anything changed)."""
    root = Path(farm_root)
    root.mkdir(parents=True, exist_ok=True)
    final = farm_path(root, layout.name)
    wanted = {link.lfn: link.text for link in layout.links}
    if final.is_dir() and not final.is_symlink() and current_links(final) == wanted:
        return final, False
    new = root / f".{layout.name}.new"
    old = root / f".{layout.name}.old"
    for leftover in (new, old):
        _remove(leftover)
    new.mkdir()
    made: set[Path] = set()
    for link in layout.links:
        dest = new / link.lfn
        parent = dest.parent
        if parent not in made:
            parent.mkdir(parents=True, exist_ok=True)
            made.add(parent)
        os.symlink(link.text, dest)
    # Two renames: a directory cannot be atomically replaced by another
    # non-empty one with os.rename; the gap is microseconds and only a
    # changed dataset (a new info-hash, hence a new seed) ever crosses it.
    if final.exists() or final.is_symlink():
        os.rename(final, old)
    os.rename(new, final)
    _remove(old)
    log.info("farm %s: %d links", layout.name, len(layout.links))
    return final, True


def remove_stale(farm_root: str | os.PathLike, keep: Iterable[str]) -> list[str]:
    """Remove farms (and leftovers of interrupted builds) not named in `keep`."""
    root = Path(farm_root)
    if not root.is_dir():
        return []
    wanted = set(keep)
    removed = []
    for entry in sorted(root.iterdir()):
        if entry.name in wanted:
            continue
        _remove(entry)
        removed.append(entry.name)
        log.info("farm %s: removed (no longer a dataset here)", entry.name)
    return removed


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        # The farm holds only links: rmtree removes the links, never their targets.
        shutil.rmtree(path)
