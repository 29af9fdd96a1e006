"""Make a dataset's .torrent: v1 by default, hybrid v1+v2 on request.

v1 goes through the shared builder (torrents.build: parallel SHA1, LFN
order, deterministic). Hybrid (BEP 52/47) needs SHA256 merkle trees, which
only libtorrent computes here, so that path uses lt.create_torrent over a
directory laid out as <files_root>/<LFN> (a farm); libtorrent orders the
files canonically itself, so the info-hash is still a function of the
files alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from torrents import bencoding, build, metainfo


@dataclass(frozen=True)
class BuildParams:
    announce: str | None
    private: bool = True
    piece_length: int | None = None  # None: the size rule of torrents.metainfo
    hybrid: bool = False
    threads: int = 0

    def key(self) -> str:
        """What, besides the files, decides the info dict (folded into the fingerprint)."""
        fmt = "hybrid" if self.hybrid else "v1"
        return f"{fmt}|piece_length={self.piece_length or 'auto'}|private={int(self.private)}"


def make(name: str, entries: Sequence[tuple[str, str | os.PathLike]], params: BuildParams,
         files_root: str | os.PathLike | None = None) -> tuple[bytes, metainfo.Metainfo]:
    """Hash (LFN, path) entries → (.torrent bytes, Metainfo). Blocking: run it off the event loop.

    `files_root` is where <LFN> paths live; needed for hybrid only.
    """
    if not params.hybrid:
        return build.build_torrent(name, entries, announce=params.announce, private=params.private,
                                   piece_length=params.piece_length, threads=params.threads)
    if files_root is None:
        raise ValueError("hybrid torrents need files_root")
    return _hybrid(name, entries, params, Path(files_root))


def _hybrid(name: str, entries: Sequence[tuple[str, str | os.PathLike]], params: BuildParams,
            files_root: Path) -> tuple[bytes, metainfo.Metainfo]:
    import libtorrent as lt  # only this path needs it

    sized = sorted((lfn, os.stat(path).st_size) for lfn, path in entries)
    total = sum(size for _, size in sized)
    plen = params.piece_length or metainfo.piece_length_for(total)
    fs = lt.file_storage()
    for lfn, size in sized:
        fs.add_file(f"{name}/{lfn}", size)
    ct = lt.create_torrent(fs, plen)
    ct.set_priv(params.private)
    if params.announce:
        ct.add_tracker(params.announce)
    # set_piece_hashes looks for <parent>/<name>/<LFN>: point it at a
    # directory whose entry `name` is files_root.
    parent = files_root.parent
    if files_root.name != name:
        raise ValueError(f"{files_root}: hybrid build needs the directory to be named {name!r}")
    lt.set_piece_hashes(ct, str(parent))
    top = bencoding.decode(lt.bencode(ct.generate()))
    # Creation date and creator sit outside the info dict; dropping them
    # makes the whole file, not only the info-hash, reproducible.
    top.pop(b"creation date", None)
    top.pop(b"created by", None)
    data = bencoding.encode(top)
    return data, metainfo.parse(data, subject=name)
