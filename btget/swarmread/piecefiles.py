"""The dataset's files as `bt-get --serve` reads them: a piece hashed as it is on disk, a byte range read.

One descriptor per file, opened at its first read and kept until `close`; the bytes of a pad file are
zeros and never read. Blocking: the server calls these in a thread.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from torrents.errors import BtswarmError
from torrents.metainfo import Metainfo

from btget.swarmread.streaming import PieceMap


class PieceFiles:
    def __init__(self, meta: Metainfo, root: Path, pieces: PieceMap) -> None:
        self.meta, self.root, self.map = meta, root, pieces
        self._fds: dict[int, int] = {}

    def sha1(self, piece: int) -> bytes | None:
        """The piece's SHA1 as it is on disk; None while a file is missing or short."""
        h = hashlib.sha1()
        try:
            for seg in self.map.segments(piece):
                if self.meta.files[seg.file].pad:
                    h.update(bytes(seg.length))
                    continue
                data = os.pread(self._fd(seg.file), seg.length, seg.offset)
                if len(data) != seg.length:
                    return None
                h.update(data)
        except FileNotFoundError:
            return None
        return h.digest()

    def read(self, file: int, start: int, end: int) -> bytes:
        """Bytes [start, end) of a file, from disk."""
        if self.meta.files[file].pad:
            return bytes(end - start)
        data = os.pread(self._fd(file), end - start, start)
        if len(data) != end - start:
            raise BtswarmError(self.meta.files[file].lfn, f"short read at {start} ({len(data)} of {end - start} bytes)")
        return data

    def _fd(self, file: int) -> int:
        fd = self._fds.get(file)
        if fd is None:
            fd = os.open(self.root.joinpath(*self.meta.files[file].path), os.O_RDONLY)
            self._fds[file] = fd
        return fd

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
