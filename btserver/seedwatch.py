"""The running seeds' peers, looked at from the seeder's pump: the parts they want (each its own upload
slots, btserver/uploadslots.py) and whether they wait on a storage that hangs (btserver/stuck.py), with a
read of the replica past the page cache when nobody waits any more.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import random
import threading
from typing import Callable

import libtorrent as lt

from torrents import peerid

from btserver import uploadslots
from btserver.seedbook import Seed, SeedBook
from btserver.stuck import PeerWait, waiting

log = logging.getLogger("btswarm.server.seeder")

PROBE_BLOCK = 4096


def fit_slots(book: SeedBook, base: int) -> None:
    """Give each part the seeds' interested peers want its own upload slots (btserver/uploadslots.py)."""
    with book.lock:
        seeds = [s for s in book.seeds.values() if s.peers and s.ready.is_set()]
    for seed in seeds:
        try:
            parts = [peerid.part_of(p.pid.to_bytes()) for p in seed.handle.get_peer_info()
                     if p.flags & lt.peer_info.remote_interested]
            want = uploadslots.slots(base, parts, seed.slots)
            seed.interested, seed.parts = len(parts), len(set(parts))
            if want != seed.slots:
                seed.handle.set_max_uploads(want)
                log.info("seed %s (%s): %d upload slots (%d parts wanted by %d peers)", seed.info_hash,
                         seed.name, want, seed.parts, seed.interested)
                seed.slots = want
        except RuntimeError:  # removed meanwhile: its handle is gone
            continue


class StuckSeeds:
    """Each seed's StuckWatch fed with samples of its peers, and probes of its storage when it asks for one."""

    def __init__(self, book: SeedBook, stuck_after: float, on_change: Callable[[], None]) -> None:
        self.book = book
        self.stuck_after = stuck_after  # 0: never stuck
        self.on_change = on_change

    def sample(self) -> None:
        """One sample of each seed for its StuckWatch; a stalled seed nobody waits on any more reads a block itself."""
        if self.stuck_after <= 0:
            return
        for seed in self.book.running():
            watch, owed = seed.watch, 0
            try:
                if seed.peers and not watch.moving(seed.uploaded):
                    # Only a seed with peers and no upload since the last sample costs a look at its peers.
                    owed = waiting([_peer_wait(p) for p in seed.handle.get_peer_info()])
            except RuntimeError:  # removed meanwhile: its handle is gone
                continue
            with self.book.lock:  # a probe's answer updates the watch from its own thread
                changed = watch.step(self.book.clock(), seed.uploaded, owed)
                probe = watch.wants_probe()
                if probe:
                    watch.probe_started()
            if changed:
                self._changed(seed)
            if probe:
                threading.Thread(target=self._probe, args=(seed,), name="btserver-probe", daemon=True).start()

    def _probe(self, seed: Seed) -> None:
        """Read a block of the seed's replica (its own thread: it blocks for as long as the storage hangs)."""
        fs: lt.file_storage = seed.files  # type: ignore[assignment]
        # The largest of a few files drawn at random: a block of it is likely not read yet.
        picks = random.sample(range(fs.num_files()), min(8, fs.num_files()))
        i = max(picks, key=fs.file_size)
        try:
            read_past_cache(os.path.join(seed.save_path, fs.file_path(i)), fs.file_size(i))
            ok = True
        except OSError as exc:
            ok = False
            log.info("seed %s (%s): probe read failed (%s)", seed.info_hash, seed.name, exc)
        with self.book.lock:
            changed = seed.watch.probe_done(self.book.clock(), ok)
        if changed:
            self._changed(seed)

    def _changed(self, seed: Seed) -> None:
        if seed.watch.stuck:
            log.warning("seed %s (%s): stuck: peers wait for blocks and nothing was uploaded for %.0f s (the "
                        "storage does not answer?); the tracker is told not to hand it out", seed.info_hash,
                        seed.name, self.book.clock() - (seed.watch.since or 0.0))
        else:
            log.info("seed %s (%s): reads answer again, no longer stuck", seed.info_hash, seed.name)
        with self.book.lock:
            self.book.gauge()
        self.on_change()


def read_past_cache(path: str, size: int) -> None:
    """One aligned block of `path`, read with O_DIRECT: from the storage itself, not from the page cache (which
    answers for a storage that hangs). Buffered where O_DIRECT is refused (tmpfs). OSError if it cannot be read."""
    if size <= 0:
        return
    offset = random.randrange(max(1, size // PROBE_BLOCK)) * PROBE_BLOCK
    buf = mmap.mmap(-1, PROBE_BLOCK)  # page-aligned, as O_DIRECT wants
    try:
        for flags in (os.O_RDONLY | os.O_DIRECT, os.O_RDONLY):
            try:
                fd = os.open(path, flags)
            except OSError as exc:
                if exc.errno == errno.EINVAL and flags != os.O_RDONLY:
                    continue
                raise
            try:
                os.preadv(fd, [buf], offset)
                return
            except OSError as exc:
                if exc.errno != errno.EINVAL or flags == os.O_RDONLY:
                    raise
            finally:
                os.close(fd)
    finally:
        buf.close()


def _peer_wait(p: object) -> PeerWait:
    flags = p.flags  # type: ignore[attr-defined]
    return PeerWait(interested=bool(flags & lt.peer_info.remote_interested), choked=bool(flags & lt.peer_info.choked),
                    queued=p.upload_queue_length, pending_disk=p.pending_disk_bytes)  # type: ignore[attr-defined]
