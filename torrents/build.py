"""Build .torrent metainfo from files on disk: SHA1 piece hashes on every core.

The dataset is the concatenation of its files in LFN order. Its piece range
is cut into contiguous segments; a pool of threads hashes them, each thread
reading its segment sequentially with `preadv` calls into one preallocated
buffer (no per-read allocation, no copy into Python objects). Threads scale
because both the reads and hashlib's SHA1 release the GIL on buffers over
2 KiB. Memory stays bounded: one buffer per thread plus 20 bytes per piece,
whatever the size or number of files.

With SHA1 in hardware (SHA-NI), copying the bytes out of the page cache
costs a fifth of what hashing them does, so every pass over a read's bytes
must find them in the core's cache: see READ_SIZE. For many small files the
cost is open/read/close and the Python around them, per file: one read per
file (its size checked by that read), and what does not depend on the
pieces (name checks, the file list's encoding) done while the workers hash.

The same pass sums each file's content (`FileSum`): an xxh3-128 over its
1 MiB blocks, which costs a few percent of SHA1 and identifies a replica
file by file (two sites' copies of one LFN agree or not, whatever else the
datasets hold), and, when asked, the adler32 the grid catalogs list, to be
checked against them. A file that one segment reads whole is summed by its
worker; blocks are file-relative, so a block that a segment boundary cuts
is kept as bytes by both segments and summed when they meet.

`hybrid=True` builds a v1+v2 torrent (BEP 52/47) with libtorrent, imported
only then so that importing `torrents` never loads it.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import os
import tempfile
import threading
import zlib
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import xxhash

from torrents import bencoding, metainfo
from torrents.dataset import DatasetFile, check_listing, link_target, plain_link_text, validate_lfn, validate_name
from torrents.errors import DatasetError

Progress = Callable[[int], None]

# One read fills this much of a thread's buffer (or one whole piece, if
# larger). Small enough that the buffer, the page-cache pages copied into it
# and the hashes' reads of it stay in one core's L2 (1.25 MiB on the machine
# of docs/benchmarks.md); 1 MiB reads spill, and cost the hashes' reads more
# than the fewer system calls save.
READ_SIZE = 256 * 1024
# More segments than threads, handed out in order: a thread that the shared
# machine slows down holds back at most one small segment, and neighbouring
# threads read neighbouring parts of the data (kind to a cold disk's readahead).
SEGMENTS_PER_THREAD = 8
# How often the calling thread reports progress while the workers hash.
PROGRESS_INTERVAL = 0.1
# The file-relative block of a content sum.
SUM_BLOCK = 1024 * 1024
_ADLER_BASE = 65521
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_FADVISE = hasattr(os, "posix_fadvise")


def default_threads() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def plan_segments(num_pieces: int, count: int) -> list[tuple[int, int]]:
    """Cut pieces [0, num_pieces) into at most `count` contiguous, near-equal [first, end) ranges."""
    count = max(1, min(count, num_pieces))
    base, extra = divmod(num_pieces, count)
    out = []
    first = 0
    for k in range(count):
        end = first + base + (1 if k < extra else 0)
        out.append((first, end))
        first = end
    return out


@dataclass(frozen=True)
class FileSum:
    """What one file held while it was hashed: its size, xxh3 content sum and adler32 (hex)."""

    size: int
    xxh3: str
    adler32: str | None = None


def adler32_combine(first: int, second: int, second_length: int) -> int:
    """adler32 of A+B from adler32(A), adler32(B) and len(B) (zlib's adler32_combine)."""
    rem = second_length % _ADLER_BASE
    sum1 = first & 0xFFFF
    sum2 = (rem * sum1) % _ADLER_BASE
    sum1 += (second & 0xFFFF) + _ADLER_BASE - 1
    sum2 += ((first >> 16) & 0xFFFF) + ((second >> 16) & 0xFFFF) + _ADLER_BASE - rem
    sum1 %= _ADLER_BASE
    sum2 %= _ADLER_BASE
    return sum1 | (sum2 << 16)


def content_sum(block_digests: Sequence[bytes]) -> str:
    """The xxh3 content sum of a file from the xxh3-128 digests of its blocks, in order."""
    return xxhash.xxh3_128(b"".join(block_digests)).hexdigest()


@dataclass(frozen=True)
class _Layout:
    """Files with bytes, and where each starts in the concatenation."""

    paths: tuple[str, ...]
    sizes: tuple[int, ...]
    starts: tuple[int, ...]
    total: int
    inputs: tuple[int, ...]  # each file's position in the caller's list (empty files are left out)

    @classmethod
    def of(cls, files: Sequence[tuple[str | os.PathLike, int]]) -> _Layout:
        paths, sizes, starts, inputs = [], [], [], []
        pos = 0
        for i, (path, size) in enumerate(files):
            if size == 0:
                # No worker ever opens an empty file, so check it here.
                _check_size(os.fspath(path), 0)
                continue
            paths.append(os.fspath(path))
            sizes.append(size)
            starts.append(pos)
            inputs.append(i)
            pos += size
        return cls(tuple(paths), tuple(sizes), tuple(starts), pos, tuple(inputs))


@dataclass
class _Sums:
    """One segment's share of the content sums. A file wholly in the segment is summed here,
    in the worker thread (`finished`); of a file the segment shares with a neighbour it keeps
    the blocks in order, each either a digest (the block lay wholly in the segment) or the
    bytes the segment saw of it, and the adler32 of the file's bytes in the segment."""

    start: int  # the segment's global byte range
    stop: int
    adler: bool
    finished: dict[int, FileSum] = field(default_factory=dict)
    blocks: dict[int, list[tuple[int, bytes | bytearray, bool]]] = field(default_factory=dict)  # (offset, data, whole)
    adler32: dict[int, tuple[int, int]] = field(default_factory=dict)  # file → (adler32, length)
    _open: tuple[int, int, object] | None = None  # (file, block, hasher) being streamed

    def feed(self, layout: _Layout, index: int, offset: int, data: memoryview) -> None:
        """`data` is file `index`'s bytes from `offset` on, as read in this segment."""
        size = layout.sizes[index]
        n = len(data)
        if n == size and n <= SUM_BLOCK:  # a small file in one read, the common case of many files
            self.finished[index] = FileSum(size, xxhash.xxh3_128_hexdigest(xxhash.xxh3_128_digest(data)),
                                           f"{zlib.adler32(data) & 0xFFFFFFFF:08x}" if self.adler else None)
            return
        if self.adler:
            value, length = self.adler32.get(index, (1, 0))
            self.adler32[index] = (zlib.adler32(data, value), length + n)
        base = layout.starts[index]
        blocks = self.blocks.get(index)
        if blocks is None:
            blocks = self.blocks[index] = []
        pos = 0
        while pos < n:
            here = offset + pos
            block_start = here - here % SUM_BLOCK
            block_end = min(block_start + SUM_BLOCK, size)
            take = min(n - pos, block_end - here)
            if here == block_start and take == block_end - block_start:
                blocks.append((block_start, xxhash.xxh3_128_digest(data[pos:pos + take]), True))
            elif base + block_start >= self.start and base + block_end <= self.stop:
                # Wholly in this segment, split between reads: streamed across them.
                if here == block_start:
                    self._open = (index, block_start, xxhash.xxh3_128())
                hasher = self._open[2]  # type: ignore[index]
                hasher.update(data[pos:pos + take])  # type: ignore[attr-defined]
                if here + take == block_end:
                    blocks.append((block_start, hasher.digest(), True))  # type: ignore[attr-defined]
                    self._open = None
            elif blocks and not blocks[-1][2] and blocks[-1][0] == block_start:
                blocks[-1][1].extend(data[pos:pos + take])  # type: ignore[union-attr]
            else:  # cut by the segment's edge: its bytes wait for the neighbour's
                blocks.append((block_start, bytearray(data[pos:pos + take]), False))
            pos += take
        if offset + n == size and base >= self.start:  # the whole file was read here: sum it now
            del self.blocks[index]
            adler = f"{self.adler32.pop(index)[0] & 0xFFFFFFFF:08x}" if self.adler else None
            self.finished[index] = FileSum(size, content_sum([d for _, d, _ in blocks]), adler)  # type: ignore[misc]


def _merge_sums(layout: _Layout, parts: Sequence[_Sums], count: int, adler: bool) -> tuple[FileSum, ...]:
    """Per input file (empty ones too), the sums the segments computed, joined in order."""
    empty = FileSum(0, content_sum([]), "00000001" if adler else None)
    out: list[FileSum] = [empty] * count
    inputs = layout.inputs
    digests: dict[int, list[bytes]] = {}
    pending: dict[int, bytearray] = {}  # a cut block's bytes, gathered from consecutive segments
    adlers: dict[int, int] = {}
    for part in parts:  # in order: a file's blocks arrive in order
        for k, summed in part.finished.items():
            out[inputs[k]] = summed
        for k, blocks in part.blocks.items():
            mine = digests.setdefault(k, [])
            for _, data, whole in blocks:
                if whole:
                    mine.append(data)  # type: ignore[arg-type]
                    continue
                buf = pending.setdefault(k, bytearray())
                buf += data
                # whole once its pieces add up to a block, or reach the file's end
                if len(buf) == SUM_BLOCK or len(mine) * SUM_BLOCK + len(buf) == layout.sizes[k]:
                    mine.append(xxhash.xxh3_128_digest(buf))
                    del pending[k]
        for k, (value, length) in part.adler32.items():
            adlers[k] = adler32_combine(adlers[k], value, length) if k in adlers else value
    for k, blocks in digests.items():  # the files that segments share
        out[inputs[k]] = FileSum(layout.sizes[k], content_sum(blocks),
                                 f"{adlers[k] & 0xFFFFFFFF:08x}" if adler else None)
    return tuple(out)


def _check_size(path: str, expected: int, fd: int | None = None) -> None:
    try:
        actual = os.fstat(fd).st_size if fd is not None else os.stat(path).st_size
    except OSError as exc:
        raise DatasetError(path, f"cannot read ({exc.strerror})") from None
    if actual != expected:
        raise DatasetError(path, f"size changed: expected {expected}, found {actual}")


class _Cursor:
    """Reads the concatenation of a layout's files sequentially from a byte offset."""

    def __init__(self, layout: _Layout, pos: int) -> None:
        self.layout = layout
        self.index = bisect.bisect_right(layout.starts, pos) - 1
        self.offset = pos - layout.starts[self.index]  # within the current file
        self.fd: int | None = None
        # The read that reaches a file's end asks for one byte more, here: a file that grew
        # fills it, one that shrank comes short. This checks each size where an fstat per
        # file would cost a fifth of the system calls of a small file.
        self.spare = memoryview(bytearray(1))

    def fill(self, view: memoryview, sums: _Sums) -> None:
        """Fill `view` completely, feeding `sums` each file's bytes; the caller never asks past the end."""
        got = 0
        want = len(view)
        layout, spare = self.layout, self.spare
        sizes = layout.sizes
        # Locals, not attributes, in the loop: with files of a few KB it runs once per file.
        index, offset, fd = self.index, self.offset, self.fd
        try:
            while got < want:
                left = sizes[index] - offset
                if fd is None:
                    try:
                        fd = self.fd = os.open(layout.paths[index], _OPEN_FLAGS)
                    except OSError as exc:
                        raise DatasetError(layout.paths[index], f"cannot read ({exc.strerror})") from None
                    if left > READ_SIZE and _FADVISE:
                        # A cold file read end to end: ask for aggressive readahead.
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
                take = min(left, want - got)
                part = view[got:got + take]
                try:
                    n = os.preadv(fd, [part, spare] if take == left else [part], offset)
                except OSError as exc:
                    raise DatasetError(layout.paths[index], f"cannot read ({exc.strerror})") from None
                if n == 0 or n > take:
                    self._changed(index)
                sums.feed(layout, index, offset, part if n == take else part[:n])
                got += n
                if n == left:
                    self.fd = None
                    os.close(fd)
                    fd = None
                    index += 1
                    offset = 0
                else:
                    offset += n
        finally:
            self.index, self.offset = index, offset

    def _changed(self, index: int) -> None:
        """A read found file `index` longer or shorter than listed: say by how much."""
        path = self.layout.paths[index]
        _check_size(path, self.layout.sizes[index], self.fd)
        raise DatasetError(path, "size changed while hashing")

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _hash_segment(layout: _Layout, piece_length: int, first: int, end: int, done: list[int], slot: int,
                  cancel: threading.Event, adler: bool) -> tuple[bytes, _Sums]:
    """SHA1 digests of pieces [first, end) and the segment's content sums; adds bytes hashed to
    done[slot] as it goes."""
    start = first * piece_length
    stop = min(end * piece_length, layout.total)
    sums = _Sums(start, stop, adler)
    # A whole number of pieces per read when pieces are small, a whole number
    # of reads per piece when they are large (both powers of two), so that
    # each read is hashed in as few slices as possible.
    chunk = piece_length * (READ_SIZE // piece_length) if piece_length <= READ_SIZE else READ_SIZE
    view = memoryview(bytearray(chunk))
    out = bytearray()
    sha1 = hashlib.sha1
    h = sha1()
    filled = 0
    cursor = _Cursor(layout, start)
    try:
        pos = start
        while pos < stop:
            if cancel.is_set():
                return b"", sums
            n = min(chunk, stop - pos)
            cursor.fill(view[:n], sums)
            if filled == 0 and n == piece_length:  # one read, one piece
                out += sha1(view[:n]).digest()
            else:
                off = 0
                while off < n:
                    take = min(piece_length - filled, n - off)
                    h.update(view[off:off + take])
                    filled += take
                    off += take
                    if filled == piece_length:
                        out += h.digest()
                        h = sha1()
                        filled = 0
            pos += n
            done[slot] += n  # only this thread writes this slot
    finally:
        cursor.close()
    if filled:
        out += h.digest()
    return bytes(out), sums


def hash_pieces(files: Sequence[tuple[str | os.PathLike, int]], piece_length: int, *, threads: int = 0,
                progress: Progress | None = None) -> bytes:
    """SHA1 of each piece of the concatenation of `files` (path, expected size), in order."""
    return hash_files(files, piece_length, threads=threads, progress=progress)[0]


def hash_files(files: Sequence[tuple[str | os.PathLike, int]], piece_length: int, *, threads: int = 0,
               progress: Progress | None = None, adler32: bool = False,
               meanwhile: Callable[[], None] | None = None) -> tuple[bytes, tuple[FileSum, ...]]:
    """SHA1 of each piece of the concatenation of `files` (path, expected size), in order, and
    each file's content sums (adler32 too when asked).

    Runs on `threads` threads (0: every core). `progress(n)` is called in the
    calling thread with the number of bytes hashed since the last call; the
    calls add up to the total size. A file that is missing or whose size
    differs from the expected one raises DatasetError naming it.
    `meanwhile()` runs in the calling thread once the workers have started;
    what it raises stops them and is raised, before any error of theirs.
    """
    layout = _Layout.of(files)
    if layout.total == 0:
        if meanwhile:
            meanwhile()
        return b"", _merge_sums(layout, [], len(files), adler32)
    workers = threads if threads > 0 else default_threads()
    segments = plan_segments(metainfo.piece_count(layout.total, piece_length), workers * SEGMENTS_PER_THREAD)
    done = [0] * len(segments)
    reported = 0
    cancel = threading.Event()

    def report() -> None:
        nonlocal reported
        now = sum(done)
        if progress and now > reported:
            progress(now - reported)
        reported = now

    with ThreadPoolExecutor(max_workers=min(workers, len(segments)), thread_name_prefix="hash") as pool:
        futures: list[Future[tuple[bytes, _Sums]]] = [
            pool.submit(_hash_segment, layout, piece_length, first, end, done, k, cancel, adler32)
            for k, (first, end) in enumerate(segments)
        ]
        try:
            if meanwhile:
                meanwhile()
            pending: set[Future[tuple[bytes, _Sums]]] = set(futures)
            while pending:
                _, pending = wait(pending, timeout=PROGRESS_INTERVAL, return_when=FIRST_EXCEPTION)
                failed = [f for f in futures if f.done() and not f.cancelled() and f.exception() is not None]
                if failed:
                    raise failed[0].exception()  # type: ignore[misc]
                report()
        finally:
            # On an error (or Ctrl-C) the other segments stop at their next read.
            cancel.set()
            for f in futures:
                f.cancel()
    results = [f.result() for f in futures]
    return b"".join(r[0] for r in results), _merge_sums(layout, [r[1] for r in results], len(files), adler32)


@dataclass(frozen=True)
class Built:
    """A .torrent just made, what it says, and what each file held while it was hashed."""

    torrent: bytes
    meta: metainfo.Metainfo
    sums: dict[str, FileSum]  # LFN → sums


def build_torrent(name: str, entries: Sequence[tuple[str, str | os.PathLike]], *, announce: str | None = None,
                  private: bool = True, piece_length: int | None = None, threads: int = 0,
                  progress: Progress | None = None, url_list: Sequence[str] = (),
                  hybrid: bool = False) -> tuple[bytes, metainfo.Metainfo]:
    """Hash `entries` (LFN, path) in LFN order → (.torrent bytes, parsed Metainfo); see build_dataset."""
    built = build_dataset(name, entries, announce=announce, private=private, piece_length=piece_length,
                          threads=threads, progress=progress, url_list=url_list, hybrid=hybrid)
    return built.torrent, built.meta


def build_dataset(name: str, entries: Sequence[tuple[str, str | os.PathLike]], *, announce: str | None = None,
                  private: bool = True, piece_length: int | None = None, threads: int = 0,
                  progress: Progress | None = None, url_list: Sequence[str] = (),
                  hybrid: bool = False, adler32: bool = False, links: Mapping[str, str] | None = None) -> Built:
    """Hash `entries` (LFN, path) in LFN order → the .torrent, its Metainfo and each file's sums.

    v1 by default, deterministic: the same files give the same info-hash on
    any host. `hybrid=True` makes a v1+v2 torrent with libtorrent (its own
    hashing thread; `threads` does not apply; the sums take a pass of their
    own); its v1 info-hash differs from the plain v1 one because v2 pads
    every file to a piece boundary. `adler32=True` sums adler32 too. `links`
    (LFN → the link's text, relative to its own directory, leading inside the dataset) are
    carried as BEP 47 symlinks, and a text other than the plain path as written.
    """
    links, texts = _link_targets(name, links or {})
    sized = _sized(entries)
    total = sum(s for _, _, s in sized)

    check_names = functools.partial(_check_names, name, sized, links, texts)
    if total == 0 or (hybrid and links):
        check_names()  # a bad name is the first thing said, as when there is data to hash
        if total == 0:
            raise DatasetError(name, "dataset has no data (every file is empty)")
        raise DatasetError(name, "no hybrid torrent for a dataset with links; build v1 only")
    plen = piece_length or metainfo.piece_length_for(total)
    files = [(p, s) for _, p, s in sized]
    if hybrid:
        pieces, sums = hash_files(files, plen, threads=threads, progress=progress, adler32=adler32,
                                  meanwhile=check_names)
        by_lfn = {lfn: sums[i] for i, (lfn, _, _) in enumerate(sized)}
        data = _hybrid_torrent(name, sized, plen, private, progress, announce, url_list)
        return Built(data, metainfo.parse(data, subject=name), by_lfn)
    described: list = []

    def describe() -> None:
        # What does not depend on the pieces is done while the workers hash: on many small
        # files it is as much work as the part of hashing that holds the GIL.
        check_names()
        described[:] = _described(name, sized, plen, 20 * metainfo.piece_count(total, plen), private, links, texts)

    pieces, sums = hash_files(files, plen, threads=threads, progress=progress, adler32=adler32, meanwhile=describe)
    by_lfn = {lfn: sums[i] for i, (lfn, _, _) in enumerate(sized)}
    head, tail, file_list = described
    # Encoded directly and described from what was just built rather than re-parsed:
    # on many small files metainfo.parse costs as much as hashing them.
    info_bytes = head + pieces + tail
    data = metainfo.dump_encoded(info_bytes, announce, url_list)
    meta = metainfo.Metainfo(
        name=name,
        files=file_list,
        piece_length=plen,
        pieces=pieces,
        private=private,
        info_hash=metainfo.info_hash(info_bytes),
        info_bytes=info_bytes,
        announce=announce or None,
        url_list=tuple(url_list),
    )
    return Built(data, meta, by_lfn)


def _sized(entries: Sequence[tuple[str, str | os.PathLike]]) -> list[tuple[str, str, int]]:
    """(LFN, path, size) of each entry, in LFN order; DatasetError for a file that cannot be read."""
    sized = []
    for lfn, path in sorted(entries, key=lambda e: e[0]):
        try:
            path = os.fspath(path)  # once: a Path would be converted at each use
            sized.append((lfn, path, os.stat(path).st_size))
        except OSError as exc:
            raise DatasetError(path, f"cannot read ({exc.strerror})") from None
    return sized


def _check_names(name: str, sized: list[tuple[str, str, int]], links: Mapping[str, str],
                 texts: Mapping[str, str]) -> None:
    """The dataset model's checks, in its order, without a DatasetFile per plain file (a stat's size needs no
    check): unsafe or clashing names are refused."""
    for lfn, _, _ in sized:
        validate_lfn(lfn)
    linked = [DatasetFile(lfn, 0, symlink=target, link_text=texts.get(lfn)) for lfn, target in links.items()]
    validate_name(name)
    check_listing(name, sorted([lfn for lfn, _, _ in sized] + [f.lfn for f in linked]) if linked
                  else [lfn for lfn, _, _ in sized])


def _described(name: str, sized: list[tuple[str, str, int]], plen: int, pieces_size: int, private: bool,
               links: Mapping[str, str], texts: Mapping[str, str]) -> list:
    """The info dict's encoding before and after its pieces, and its file list (the links among the files)."""
    head, tail = metainfo.encode_info_around(name, [(lfn, s) for lfn, _, s in sized], plen, pieces_size, private,
                                             links, texts)
    if not links:  # `sized` is in LFN order already
        return [head, tail, metainfo.FileList([lfn for lfn, _, _ in sized], [s for _, _, s in sized])]
    rows = sorted([(lfn, s, None) for lfn, _, s in sized] + [(lfn, 0, t) for lfn, t in links.items()])
    return [head, tail, metainfo.FileList(
        [r[0] for r in rows], [r[1] for r in rows],
        {i: metainfo.FileEntry(tuple(r[0].split("/")), 0, symlink=tuple(r[2].split("/")),
                               link_text=texts.get(r[0]))
         for i, r in enumerate(rows) if r[2] is not None})]


def _link_targets(name: str, links: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Links as (LFN → target inside the dataset, LFN → text where it is not the plain one)."""
    targets: dict[str, str] = {}
    texts: dict[str, str] = {}
    for lfn, text in links.items():
        target = link_target(lfn, text)
        if target is None:
            raise DatasetError(f"{name}/{lfn}", f"link to {text!r} leaves the dataset")
        targets[lfn] = target
        if text != plain_link_text(lfn, target):
            texts[lfn] = text
    return targets, texts


def hybrid_order_clash(lfns: Sequence[str]) -> tuple[str, str] | None:
    """Two LFNs that v1 and v2 order differently, or None.

    libtorrent (2.1) lists v1 files sorted by whole path, while a v2 file
    tree sorts siblings by name, so "a-b" comes before "a/x" in v1 and after
    it in v2 ('-' < '/'). BEP 52 wants one order, and libtorrent's own loader
    rejects such a hybrid as "v1 and v2 file metadata does not match".
    """
    by_path = sorted(lfns)
    by_tree = sorted(lfns, key=lambda lfn: lfn.split("/"))
    for a, b in zip(by_path, by_tree):
        if a != b:
            return (a, b)
    return None


def _hybrid_torrent(name: str, sized: Sequence[tuple[str, str | os.PathLike, int]], piece_length: int,
                    private: bool, progress: Progress | None, announce: str | None,
                    url_list: Sequence[str]) -> bytes:
    import libtorrent as lt  # only here: importing torrents must not load libtorrent

    clash = hybrid_order_clash([lfn for lfn, _, _ in sized])
    if clash:
        raise DatasetError(name, f"no hybrid torrent: {clash[0]!r} and {clash[1]!r} sort differently in v1 and v2 "
                                 "(libtorrent would write a torrent it cannot load); build v1 only")
    total = sum(s for _, _, s in sized)
    with tempfile.TemporaryDirectory(prefix="btswarm-hybrid-") as root:
        # libtorrent reads <root>/<name>/<LFN>; the entries' paths may lie
        # anywhere (a symlink farm, several pools), so link them into place.
        for lfn, path, _ in sized:
            link = os.path.join(root, name, *lfn.split("/"))
            os.makedirs(os.path.dirname(link), exist_ok=True)
            os.symlink(os.path.abspath(path), link)
        files = [lt.create_file_entry(f"{name}/{lfn}", size) for lfn, _, size in sized]
        ct = lt.create_torrent(files, piece_length)  # default flags: hybrid v1+v2
        ct.set_priv(private)
        try:
            if progress:
                def on_piece(index: int) -> None:
                    progress(max(0, min(piece_length, total - index * piece_length)))
                lt.set_piece_hashes(ct, root, on_piece)
            else:
                lt.set_piece_hashes(ct, root)
        except (RuntimeError, OSError) as exc:
            raise DatasetError(name, f"cannot hash for a hybrid torrent ({exc})") from None
        generated = bencoding.decode(lt.bencode(ct.generate()), subject=name)
    # Keep only what defines the torrent (no creation date or creator), and
    # put announce and web seeds outside the info dict as for v1.
    top: dict = {b"info": generated[b"info"], b"piece layers": generated.get(b"piece layers", {})}
    if announce:
        top[b"announce"] = announce.encode()
    if url_list:
        top[b"url-list"] = [u.encode() for u in url_list]
    return bencoding.encode(top)
