"""What `bt-get --serve` decides, apart from libtorrent and HTTP (pure).

- `parse_range`: an HTTP Range header → byte ranges of one file, or why it is bad (416).
- `PieceMap`: where each file sits in the torrent's byte stream: which pieces a
  byte range of a file needs, and which file segments make up a piece.
- `ReadAhead`: a reader that keeps asking for what follows its last request is
  streaming; it gets as much read ahead as it has read in a row (up to a
  maximum), none while it seeks.
- `Demand`: which reader waits for which piece and how urgently; the deadline
  each piece should carry; what to cancel when a reader goes away.

Byte ranges are half-open [start, end) throughout; HTTP's inclusive ends are
converted at the edge (`parse_range`, `content_range`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from torrents.metainfo import Metainfo

MAX_RANGES = 1000  # ranges in one request; more is a 416, not an amplification of one request into many


class RangeNotSatisfiable(ValueError):
    """The Range header asks for nothing this file has (HTTP 416)."""


def parse_range(header: str | None, size: int) -> list[tuple[int, int]] | None:
    """`bytes=0-99, 200-, -50` → [(0, 100), (200, size), (size-50, size)]; None: no Range (whole file).

    Follows RFC 9110: a range starting past the end is dropped, an end past
    the end is clipped, a suffix range takes the last N bytes. A header whose
    ranges are all unsatisfiable, or that does not parse, is an error.
    Overlapping ranges are served as asked (uproot never sends them).
    """
    if header is None:
        return None
    unit, sep, spec = header.strip().partition("=")
    if not sep or unit.strip().lower() != "bytes":
        raise RangeNotSatisfiable(f"not a byte range: {header!r}")
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts:
        raise RangeNotSatisfiable(f"no range in {header!r}")
    if len(parts) > MAX_RANGES:
        raise RangeNotSatisfiable(f"{len(parts)} ranges in one request (at most {MAX_RANGES})")
    out = []
    for part in parts:
        first, dash, last = part.partition("-")
        first, last = first.strip(), last.strip()
        if not dash or (first and not first.isdigit()) or (last and not last.isdigit()) or not (first or last):
            raise RangeNotSatisfiable(f"bad range {part!r}")
        if not first:  # suffix: the last N bytes
            n = int(last)
            if n == 0:
                continue
            out.append((max(0, size - n), size))
            continue
        start = int(first)
        end = size if not last else min(size, int(last) + 1)
        if last and int(last) < start:
            raise RangeNotSatisfiable(f"bad range {part!r} (end before start)")
        if start >= size:
            continue
        out.append((start, end))
    if not out:
        raise RangeNotSatisfiable(f"{header!r} is outside the file ({size} bytes)")
    return out


def content_range(start: int, end: int, size: int) -> str:
    return f"bytes {start}-{end - 1}/{size}"


@dataclass(frozen=True)
class Segment:
    """`length` bytes of file `file` at `offset` (file index in the torrent, offset within the file)."""
    file: int
    offset: int
    length: int


class PieceMap:
    """The torrent's files laid end to end and cut into pieces."""

    def __init__(self, sizes: Sequence[int], piece_length: int) -> None:
        if piece_length <= 0:
            raise ValueError("piece length must be positive")
        self.sizes = list(sizes)
        self.piece_length = piece_length
        self.offsets = [0]
        for s in self.sizes:
            self.offsets.append(self.offsets[-1] + s)
        self.total = self.offsets[-1]
        self.num_pieces = (self.total + piece_length - 1) // piece_length

    @classmethod
    def of(cls, meta: Metainfo) -> "PieceMap":
        return cls([f.length for f in meta.files], meta.piece_length)

    def piece_size(self, piece: int) -> int:
        return min(self.piece_length, self.total - piece * self.piece_length)

    def pieces(self, file: int, start: int, end: int) -> range:
        """Pieces holding bytes [start, end) of `file`, in order (empty for an empty range)."""
        if end <= start:
            return range(0)
        base = self.offsets[file]
        return range((base + start) // self.piece_length, (base + end - 1) // self.piece_length + 1)

    def piece_range_in_file(self, piece: int, file: int) -> tuple[int, int]:
        """The part of `file` that `piece` holds, as [start, end) within the file (may be empty)."""
        lo = max(piece * self.piece_length, self.offsets[file])
        hi = min((piece + 1) * self.piece_length, self.offsets[file + 1])
        return lo - self.offsets[file], max(lo, hi) - self.offsets[file]

    def covered(self, file: int, have: Sequence[bool]) -> int:
        """Bytes of `file` that the pieces marked in `have` (one flag per piece) hold."""
        spans = (self.piece_range_in_file(p, file) for p in self.pieces(file, 0, self.sizes[file]) if have[p])
        return sum(hi - lo for lo, hi in spans)

    def segments(self, piece: int) -> list[Segment]:
        """The file segments a piece is made of, in order (zero-length files skipped)."""
        lo = piece * self.piece_length
        hi = lo + self.piece_size(piece)
        out = []
        i = bisect.bisect_right(self.offsets, lo) - 1
        while lo < hi and i < len(self.sizes):
            take = min(hi, self.offsets[i + 1]) - lo
            if take > 0:
                out.append(Segment(i, lo - self.offsets[i], take))
                lo += take
            i += 1
        return out


@dataclass
class _Stream:
    end: int  # where the last request ended
    run: int  # bytes read one after the other so far


class ReadAhead:
    """Per file, whether its reader streams, and how far ahead to fetch for it.

    A request that starts where an earlier one of the same file ended (or
    at most `slack` bytes after it: a reader skipping a little) continues
    that stream. A stream gets as much read-ahead as it has read so far, up
    to `max_window`: it doubles with every request of the same size, like
    the kernel's readahead, while a reader making a few small reads near
    each other (uproot reading a file's header, keys and streamers) gets
    next to nothing. A request elsewhere starts a new stream (a seek: no
    read-ahead, so random readers such as uproot reading one branch fetch
    only what they ask for). A few streams per file are remembered, so
    readers interleaving sequential walks of one file keep theirs.
    """

    def __init__(self, max_window: int, slack: int = 0, streams_per_file: int = 4) -> None:
        self.max_window = max_window
        self.slack = slack
        self.streams_per_file = streams_per_file
        self._streams: dict[int, list[_Stream]] = {}

    def on_request(self, file: int, start: int, end: int, size: int) -> tuple[int, int]:
        """Record a request for [start, end) of `file`; the byte range to read ahead (empty when none)."""
        streams = self._streams.setdefault(file, [])
        for s in streams:
            if s.end <= start <= s.end + self.slack:
                s.end, s.run = end, s.run + (end - start)
                streams.remove(s)
                streams.append(s)  # most recently used last
                return end, min(size, end + min(self.max_window, s.run))
        streams.append(_Stream(end, end - start))
        del streams[:-self.streams_per_file]
        return end, end


@dataclass
class _Want:
    readers: dict[int, int] = field(default_factory=dict)  # reader → deadline (ms) it asked for


class Demand:
    """Which pieces readers wait for, and the deadline each piece carries (the most urgent asked).

    `want` returns the (piece, deadline) pairs libtorrent must be told about
    (new pieces, or ones that became more urgent); `release` returns the
    pieces nobody waits for any more, whose deadlines libtorrent must drop,
    and the pieces whose deadline is now later (set again with that one).
    """

    def __init__(self) -> None:
        self._wants: dict[int, _Want] = {}
        self._reader_pieces: dict[int, set[int]] = {}

    def want(self, reader: int, pieces: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
        changed = []
        mine = self._reader_pieces.setdefault(reader, set())
        for piece, deadline in pieces:
            w = self._wants.setdefault(piece, _Want())
            before = min(w.readers.values()) if w.readers else None
            w.readers[reader] = min(deadline, w.readers.get(reader, deadline))
            mine.add(piece)
            after = min(w.readers.values())
            if before is None or after < before:
                changed.append((piece, after))
        return changed

    def release(self, reader: int, pieces: Iterable[int] | None = None) -> tuple[list[int], list[tuple[int, int]]]:
        """Reader `reader` no longer waits for `pieces` (all of its pieces when None) → (cancel, relaxed)."""
        mine = self._reader_pieces.get(reader, set())
        chosen = set(mine) if pieces is None else set(pieces) & mine
        cancel, relaxed = [], []
        for piece in sorted(chosen):
            mine.discard(piece)
            w = self._wants.get(piece)
            if w is None or reader not in w.readers:
                continue
            before = min(w.readers.values())
            del w.readers[reader]
            if not w.readers:
                del self._wants[piece]
                cancel.append(piece)
            elif min(w.readers.values()) > before:
                relaxed.append((piece, min(w.readers.values())))
        if not mine:
            self._reader_pieces.pop(reader, None)
        return cancel, relaxed

    def arrived(self, piece: int) -> None:
        """A piece passed its hash check: nobody needs to wait for it any more."""
        w = self._wants.pop(piece, None)
        if w is not None:
            for reader in w.readers:
                self._reader_pieces.get(reader, set()).discard(piece)

    def wanted(self) -> dict[int, int]:
        """piece → deadline, every piece someone waits for."""
        return {p: min(w.readers.values()) for p, w in self._wants.items()}


def deadlines(pieces: Sequence[int], base_ms: int, step_ms: int) -> list[tuple[int, int]]:
    """Deadlines in reading order: the first piece at `base_ms`, each next one `step_ms` later."""
    return [(p, base_ms + i * step_ms) for i, p in enumerate(pieces)]
