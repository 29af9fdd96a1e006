"""Pieces on disk that a saved resume state does not claim, found again on a rerun.

A worker saves its resume state every 1% of its share and every 0.5 s, each
save one fsync; a kill -9 loses what arrived after the last save that reached
the disk. Under load the saves lag the pieces: a kill at 77% of 24 MiB on
loopback left 9 pieces (2.3 MiB) out of the state, all fetched again by the
rerun. Their bytes are on disk all the same (the page cache outlives the
process), so a rerun looks for them before libtorrent starts: a piece the state
does not claim, whose every byte lies in allocated blocks of files this worker
wants (libtorrent's files are sparse: no block where no piece was written), is
read and hashed, and claimed only when its SHA1 is the torrent's. Pieces that
touch a file the worker does not want are left alone (their bytes are in the
part file). At most `budget` bytes are read, so a file system without holes
costs a bounded read, not the whole dataset.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
from typing import Any, Collection, Mapping

log = logging.getLogger("btswarm.get.recover")

Extents = list[tuple[int, int]]  # allocated [start, end) byte ranges of a file


def data_extents(path: str) -> Extents:
    """The allocated byte ranges of `path` (SEEK_DATA / SEEK_HOLE); [] if it does not exist."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return []
    try:
        end = os.fstat(fd).st_size
        out: Extents = []
        pos = 0
        while pos < end:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # only a hole is left
                    break
                return [(0, end)]  # no SEEK_DATA here: every byte may be data, the hash decides
            stop = os.lseek(fd, start, os.SEEK_HOLE)
            out.append((start, stop))
            pos = stop
        return out
    finally:
        os.close(fd)


def covered(extents: Extents, offset: int, size: int) -> bool:
    """Whether [offset, offset + size) lies inside one allocated range."""
    return any(start <= offset and offset + size <= stop for start, stop in extents)


def find(ti: Any, save_path: str, names: Mapping[int, str], have: list[bool], wanted: Collection[int],
         budget: int) -> list[int]:
    """The pieces `have` lacks that are whole and correct on disk, reading at most `budget` bytes.

    `ti` is the torrent's libtorrent torrent_info, `names` its renamed files (index → path under
    `save_path`), `wanted` the file indices this worker fetches.
    """
    files = ti.layout()
    pad = files.flag_pad_file
    extents: dict[int, Extents] = {}

    def path(index: int) -> str:
        return os.path.join(save_path, names.get(index) or files.file_path(index))

    def on_disk(index: int, offset: int, size: int) -> bool:
        if files.file_flags(index) & pad:
            return True
        if index not in wanted:
            return False
        if index not in extents:
            extents[index] = data_extents(path(index))
        return covered(extents[index], offset, size)

    found: list[int] = []
    spent = 0
    for piece in range(ti.num_pieces()):
        if piece < len(have) and have[piece]:
            continue
        size = ti.piece_size(piece)
        slices = ti.map_block(piece, 0, size)
        if not all(on_disk(s.file_index, s.offset, s.size) for s in slices):
            continue
        expected = ti.hash_for_piece(piece)
        if len(expected) != 20 or spent + size > budget:
            break
        spent += size
        sha1 = hashlib.sha1()
        try:
            for s in slices:
                if files.file_flags(s.file_index) & pad:
                    sha1.update(bytes(s.size))
                    continue
                with open(path(s.file_index), "rb") as f:
                    f.seek(s.offset)
                    sha1.update(f.read(s.size))
        except OSError:
            continue
        if sha1.digest() == expected:
            found.append(piece)
    if found:
        log.info("%d pieces on disk that the saved state missed (%d bytes read)", len(found), spent)
    return found


def claim(atp: Any, pieces: list[int], num_pieces: int) -> None:
    """Mark `pieces` as had in add_torrent_params `atp` (and no longer partly downloaded)."""
    have = list(atp.have_pieces) + [False] * max(0, num_pieces - len(atp.have_pieces))
    for piece in pieces:
        have[piece] = True
    atp.have_pieces = have
    unfinished = dict(atp.unfinished_pieces)
    for piece in pieces:
        unfinished.pop(piece, None)
    atp.unfinished_pieces = unfinished
