"""Build .torrent metainfo from files on disk: SHA1 piece hashes on every core.

The dataset is the concatenation of its files in LFN order. Its piece range
is cut into contiguous segments; a pool of threads hashes them, each thread
reading its segment sequentially with large `readv` calls into one
preallocated buffer (no per-read allocation, no copy into Python objects).
Threads scale because both the reads and hashlib's SHA1 release the GIL on
buffers over 2 KiB. Memory stays bounded: one buffer per thread plus 20
bytes per piece, whatever the size or number of files.

For many small files the cost is open/fstat/read/close per file; those
system calls release the GIL too, so they run in parallel as well.

`hybrid=True` builds a v1+v2 torrent (BEP 52/47) with libtorrent, imported
only then so that importing `torrents` never loads it.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import tempfile
import threading
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Callable, Sequence

from torrents import bencoding, metainfo
from torrents.dataset import Dataset, DatasetFile
from torrents.errors import DatasetError

Progress = Callable[[int], None]

# One read fills this much of a thread's buffer (or one whole piece, if
# larger). Past 1 MiB, bigger reads neither save measurable system-call time
# nor keep the data in cache for the hash that follows.
READ_SIZE = 1 << 20
# More segments than threads, handed out in order: a thread that the shared
# machine slows down holds back at most one small segment, and neighbouring
# threads read neighbouring parts of the data (kind to a cold disk's readahead).
SEGMENTS_PER_THREAD = 8
# How often the calling thread reports progress while the workers hash.
PROGRESS_INTERVAL = 0.1


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
class _Layout:
    """Files with bytes, and where each starts in the concatenation."""

    paths: tuple[str, ...]
    sizes: tuple[int, ...]
    starts: tuple[int, ...]
    total: int

    @classmethod
    def of(cls, files: Sequence[tuple[str | os.PathLike, int]]) -> _Layout:
        paths, sizes, starts = [], [], []
        pos = 0
        for path, size in files:
            if size == 0:
                # No worker ever opens an empty file, so check it here.
                _check_size(os.fspath(path), 0)
                continue
            paths.append(os.fspath(path))
            sizes.append(size)
            starts.append(pos)
            pos += size
        return cls(tuple(paths), tuple(sizes), tuple(starts), pos)


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

    def fill(self, view: memoryview) -> None:
        """Fill `view` completely; the caller never asks past the end of the data."""
        got = 0
        want = len(view)
        while got < want:
            if self.fd is None:
                self._open()
            path = self.layout.paths[self.index]
            left = self.layout.sizes[self.index] - self.offset
            try:
                n = os.readv(self.fd, [view[got:got + min(left, want - got)]])
            except OSError as exc:
                raise DatasetError(path, f"cannot read ({exc.strerror})") from None
            if n == 0:
                raise DatasetError(path, "file shrank while hashing")
            got += n
            self.offset += n
            if self.offset == self.layout.sizes[self.index]:
                self.close()
                self.index += 1
                self.offset = 0

    def _open(self) -> None:
        path = self.layout.paths[self.index]
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise DatasetError(path, f"cannot read ({exc.strerror})") from None
        self.fd = fd
        # fstat on the open descriptor: the size we check is the one we read.
        _check_size(path, self.layout.sizes[self.index], fd)
        if self.offset:
            os.lseek(fd, self.offset, os.SEEK_SET)
        if self.layout.sizes[self.index] - self.offset > READ_SIZE and hasattr(os, "posix_fadvise"):
            # A cold file read end to end: ask for aggressive readahead.
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _hash_segment(layout: _Layout, piece_length: int, first: int, end: int, done: list[int], slot: int,
                  cancel: threading.Event) -> bytes:
    """SHA1 digests of pieces [first, end); adds bytes hashed to done[slot] as it goes."""
    start = first * piece_length
    stop = min(end * piece_length, layout.total)
    # A whole number of pieces per read when pieces are small, a whole number
    # of reads per piece when they are large (both powers of two), so that
    # each read is hashed in as few slices as possible.
    chunk = piece_length * (READ_SIZE // piece_length) if piece_length <= READ_SIZE else READ_SIZE
    view = memoryview(bytearray(chunk))
    out = bytearray()
    h = hashlib.sha1()
    filled = 0
    cursor = _Cursor(layout, start)
    try:
        pos = start
        while pos < stop:
            if cancel.is_set():
                return b""
            n = min(chunk, stop - pos)
            cursor.fill(view[:n])
            off = 0
            while off < n:
                take = min(piece_length - filled, n - off)
                h.update(view[off:off + take])
                filled += take
                off += take
                if filled == piece_length:
                    out += h.digest()
                    h = hashlib.sha1()
                    filled = 0
            pos += n
            done[slot] += n  # only this thread writes this slot
    finally:
        cursor.close()
    if filled:
        out += h.digest()
    return bytes(out)


def hash_pieces(files: Sequence[tuple[str | os.PathLike, int]], piece_length: int, *, threads: int = 0,
                progress: Progress | None = None) -> bytes:
    """SHA1 of each piece of the concatenation of `files` (path, expected size), in order.

    Runs on `threads` threads (0: every core). `progress(n)` is called in the
    calling thread with the number of bytes hashed since the last call; the
    calls add up to the total size. A file that is missing or whose size
    differs from the expected one raises DatasetError naming it.
    """
    layout = _Layout.of(files)
    if layout.total == 0:
        return b""
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
        futures: list[Future[bytes]] = [
            pool.submit(_hash_segment, layout, piece_length, first, end, done, k, cancel)
            for k, (first, end) in enumerate(segments)
        ]
        try:
            pending: set[Future[bytes]] = set(futures)
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
    return b"".join(f.result() for f in futures)


def build_torrent(name: str, entries: Sequence[tuple[str, str | os.PathLike]], *, announce: str | None = None,
                  private: bool = True, piece_length: int | None = None, threads: int = 0,
                  progress: Progress | None = None, url_list: Sequence[str] = (),
                  hybrid: bool = False) -> tuple[bytes, metainfo.Metainfo]:
    """Hash `entries` (LFN, path) in LFN order → (.torrent bytes, parsed Metainfo).

    v1 by default, deterministic: the same files give the same info-hash on
    any host. `hybrid=True` makes a v1+v2 torrent with libtorrent (its own
    hashing thread; `threads` does not apply); its v1 info-hash differs from
    the plain v1 one because v2 pads every file to a piece boundary.
    """
    ordered = sorted(entries, key=lambda e: e[0])
    sized = []
    for lfn, path in ordered:
        try:
            sized.append((lfn, path, os.stat(path).st_size))
        except OSError as exc:
            raise DatasetError(path, f"cannot read ({exc.strerror})") from None
    # The dataset model refuses unsafe or clashing names before any hashing.
    dataset = Dataset(name, tuple(DatasetFile(lfn, size) for lfn, _, size in sized))
    if dataset.total_size == 0:
        raise DatasetError(name, "dataset has no data (every file is empty)")
    plen = piece_length or metainfo.piece_length_for(dataset.total_size)
    if hybrid:
        data = _hybrid_torrent(name, sized, plen, private, progress, announce, url_list)
        return data, metainfo.parse(data, subject=name)
    pieces = hash_pieces([(p, s) for _, p, s in sized], plen, threads=threads, progress=progress)
    info = metainfo.info_dict(name, [(lfn, s) for lfn, _, s in sized], plen, pieces, private)
    data = metainfo.dump(info, announce, url_list)
    # Described from what was just built rather than re-parsed: on 20,000
    # files metainfo.parse costs as much as hashing them (0.3 s); finding
    # the info dict's bytes in the file costs a tenth of that.
    span = bencoding.dict_value_span(data, b"info")
    assert span is not None  # dump always writes an info dict
    info_bytes = data[span[0]:span[1]]
    meta = metainfo.Metainfo(
        name=name,
        files=tuple(metainfo.FileEntry(tuple(lfn.split("/")), s) for lfn, _, s in sized),
        piece_length=plen,
        pieces=pieces,
        private=private,
        info_hash=metainfo.info_hash(info_bytes),
        info_bytes=info_bytes,
        announce=announce or None,
        url_list=tuple(url_list),
    )
    return data, meta


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
