"""Make a dataset's .torrent: v1 by default, hybrid v1+v2 on request.

Both go through the shared builder (torrents.build: LFN order,
deterministic; v1 hashed in parallel, hybrid by libtorrent, which alone
computes the v2 merkle trees here). The same pass sums every file (xxh3,
and adler32 when the catalog has checksums to check them against).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Mapping, Sequence

from torrents import bencoding, build, metainfo


@dataclass(frozen=True)
class BuildParams:
    announce: str | None
    private: bool = True
    piece_length: int | None = None  # None: the size rule of torrents.metainfo
    hybrid: bool = False
    threads: int = 0
    adler32: bool = False  # sum adler32 too (the catalog lists checksums for this dataset)
    announce_list: tuple[str, ...] = ()  # every tracker, one BEP 12 tier; outside info: no rehash

    def key(self) -> str:
        """What, besides the files, decides the build (folded into the fingerprint)."""
        fmt = "hybrid" if self.hybrid else "v1"
        return (f"{fmt}|piece_length={self.piece_length or 'auto'}|private={int(self.private)}"
                f"|sums=xxh3{'+adler32' if self.adler32 else ''}")


def make(name: str, entries: Sequence[tuple[str, str | os.PathLike]], params: BuildParams,
         links: Mapping[str, str] | None = None) -> build.Built:
    """Hash (LFN, path) entries (and carry `links`, LFN → target LFN) → the .torrent, its Metainfo
    and the files' sums. Blocking: run it off the event loop."""
    built = build.build_dataset(name, entries, announce=params.announce, private=params.private,
                                piece_length=params.piece_length, threads=params.threads, hybrid=params.hybrid,
                                adler32=params.adler32, links=links)
    if not params.announce_list:
        return built
    torrent, meta = with_trackers(built.torrent, built.meta, params)
    return dataclasses.replace(built, torrent=torrent, meta=meta)


def trackers_match(meta: metainfo.Metainfo, params: BuildParams) -> bool:
    """Whether a torrent already names the trackers `params` asks for."""
    tiers = (params.announce_list,) if params.announce_list else ()
    return meta.announce == params.announce and meta.announce_list == tiers


def with_trackers(data: bytes, meta: metainfo.Metainfo, params: BuildParams) -> tuple[bytes, metainfo.Metainfo]:
    """The same torrent announcing to `params`' trackers: `announce`, and `announce-list` as one tier
    (BEP 12: clients fail over within a tier). Both lie outside the info dict: same info-hash."""
    top = bencoding.decode(data)
    top.pop(b"announce", None)
    top.pop(b"announce-list", None)
    if params.announce:
        top[b"announce"] = params.announce.encode()
    if params.announce_list:
        top[b"announce-list"] = [[u.encode() for u in params.announce_list]]
    tiers = (params.announce_list,) if params.announce_list else ()
    return bencoding.encode(top), dataclasses.replace(meta, announce=params.announce, announce_list=tiers)
