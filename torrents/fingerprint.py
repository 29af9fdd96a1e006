"""Fast change detection: xxhash over each file's LFN, size, mtime, ctime, inode and target.

Stored beside each .torrent; an unchanged fingerprint means the dataset's
.torrent is still valid and nothing is rehashed. mtime alone is not enough:
a replica repaired with `rsync -a` or `cp -p` keeps its size and mtime, and
must still be hashed again. Writing a file changes its ctime and a fresh
copy gets a new inode; neither can be set back by the copying tool.
"""

from __future__ import annotations

import os
from typing import Iterable, Mapping

import xxhash

from torrents.paths import RealPaths


def fingerprint(entries: Iterable[tuple[str, str | os.PathLike]], extra: str = "",
                links: Mapping[str, str] | None = None) -> str:
    """Fingerprint of (LFN, path) pairs, the path resolved and stat'ed, and of a dataset's links
    (LFN → target LFN, as they are: no bytes of their own).

    `extra` folds in build parameters (piece length, private flag, format)
    so that a change of build options also counts as a change.
    """
    realpath = RealPaths()  # each directory resolved once, not each file's every component
    h = xxhash.xxh3_128()
    h.update(extra.encode() + b"\0\n")  # a separator: extra "ab" + LFN "c" must differ from "a" + "bc"
    for lfn, target in sorted((links or {}).items()):
        h.update(b"\0".join([b"link", lfn.encode(), target.encode()]) + b"\n")
    for lfn, path in sorted(entries, key=lambda e: e[0]):
        target = realpath(path)
        st = os.stat(target)
        h.update(b"\0".join([lfn.encode(), str(st.st_size).encode(), str(st.st_mtime_ns).encode(),
                             str(st.st_ctime_ns).encode(), str(st.st_ino).encode(), target.encode()]))
        h.update(b"\n")
    return h.hexdigest()
