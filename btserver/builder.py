"""Make a dataset's .torrent: v1 by default, hybrid v1+v2 on request.

Both go through the shared builder (torrents.build: LFN order,
deterministic; v1 hashed in parallel, hybrid by libtorrent, which alone
computes the v2 merkle trees here).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

from torrents import build, metainfo


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


def make(name: str, entries: Sequence[tuple[str, str | os.PathLike]], params: BuildParams) -> tuple[bytes, metainfo.Metainfo]:
    """Hash (LFN, path) entries → (.torrent bytes, Metainfo). Blocking: run it off the event loop."""
    return build.build_torrent(name, entries, announce=params.announce, private=params.private,
                               piece_length=params.piece_length, threads=params.threads, hybrid=params.hybrid)
