"""Build .torrent metainfo from files on disk: SHA1 piece hashes.

Reference implementation (single thread); see hash_pieces for the contract.
"""

from __future__ import annotations

import hashlib
import os
from typing import Callable, Sequence

from torrents import metainfo
from torrents.errors import DatasetError

Progress = Callable[[int], None]


def hash_pieces(files: Sequence[tuple[str | os.PathLike, int]], piece_length: int, *, threads: int = 0,
                progress: Progress | None = None) -> bytes:
    """SHA1 of each piece of the concatenation of `files` (path, expected size), in order.

    `progress(n)` is called with the number of bytes hashed since the last call.
    A file whose size differs from the expected one raises DatasetError.
    """
    out = bytearray()
    h = hashlib.sha1()
    filled = 0
    for path, size in files:
        try:
            actual = os.stat(path).st_size
        except OSError as exc:
            raise DatasetError(path, f"cannot read ({exc.strerror})") from None
        if actual != size:
            raise DatasetError(path, f"size changed: expected {size}, found {actual}")
        with open(path, "rb") as f:
            left = size
            while left:
                want = min(piece_length - filled, left)
                chunk = f.read(want)
                if not chunk:
                    raise DatasetError(path, "file shrank while hashing")
                h.update(chunk)
                filled += len(chunk)
                left -= len(chunk)
                if progress:
                    progress(len(chunk))
                if filled == piece_length:
                    out += h.digest()
                    h = hashlib.sha1()
                    filled = 0
    if filled:
        out += h.digest()
    return bytes(out)


def build_torrent(name: str, entries: Sequence[tuple[str, str | os.PathLike]], *, announce: str | None = None,
                  private: bool = True, piece_length: int | None = None, threads: int = 0,
                  progress: Progress | None = None, url_list: Sequence[str] = ()) -> tuple[bytes, metainfo.Metainfo]:
    """Hash `entries` (LFN, path) in LFN order → (.torrent bytes, parsed Metainfo)."""
    ordered = sorted(entries, key=lambda e: e[0])
    sized = []
    for lfn, path in ordered:
        try:
            sized.append((lfn, path, os.stat(path).st_size))
        except OSError as exc:
            raise DatasetError(path, f"cannot read ({exc.strerror})") from None
    total = sum(s for _, _, s in sized)
    plen = piece_length or metainfo.piece_length_for(total)
    pieces = hash_pieces([(p, s) for _, p, s in sized], plen, threads=threads, progress=progress)
    info = metainfo.info_dict(name, [(lfn, s) for lfn, _, s in sized], plen, pieces, private)
    data = metainfo.dump(info, announce, url_list)
    return data, metainfo.parse(data, subject=name)
