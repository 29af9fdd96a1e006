"""What a site's seeder knows, under one lock: the datasets it can seed, the seeds it runs, the replicas it
refused, and what they sent.

The seeder's callers (executor threads), its alert pump and the storage probes (btserver/seedwatch.py) all
read and change it; the lock is re-entrant, so a method here may be called with it held.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from torrents.errors import NotFound
from torrents.servicekit import ltsession

from btserver.metrics import Metrics
from btserver.stuck import StuckWatch

log = logging.getLogger("btswarm.server.seeder")

READY_TIMEOUT = 5.0


@dataclass(frozen=True)
class Seedable:
    info_hash: str
    name: str
    torrent_path: Path  # the precomputed .torrent, read when a seed starts
    save_path: str  # the directory holding <name>/<LFN> (the farm root)
    own_names: dict[int, str] = field(default_factory=dict)  # metainfo.own_names: case twins' own names

    def torrent_info(self) -> object:
        """The dataset's torrent_info, read from its precomputed .torrent."""
        try:
            info = ltsession.torrent_info(self.torrent_path.read_bytes())
        except (OSError, RuntimeError) as exc:
            raise NotFound(self.info_hash, f"{self.name}: cannot read its torrent {self.torrent_path} ({exc})") \
                from None
        if str(info.info_hashes().v1) != self.info_hash:
            # Rebuilt since it was registered (a rescan registers the new version).
            raise NotFound(self.info_hash, f"{self.name}: its torrent is another version now")
        return info


@dataclass
class Seed:
    info_hash: str
    name: str
    handle: object
    started: float  # wall clock
    started_at: float  # monotonic
    last_active: float  # monotonic
    peers: int = 0  # connected peers that are not seeds: those that may want something of it
    uploaded: int = 0
    upload_rate: int = 0
    slots: int = 0  # peers unchoked at once (btserver/uploadslots.py); 0: no limit
    interested: int = 0  # peers that wanted pieces at the last look (seedwatch.fit_slots)
    parts: int = 0  # the distinct parts they wanted (the whole dataset is one)
    save_path: str = ""  # its replica's farm root, and the torrent's files: a probe reads one of them
    files: object = field(default=None, repr=False)
    watch: StuckWatch = field(default_factory=lambda: StuckWatch(0.0), repr=False)
    # Set once libtorrent has checked the files: until then it turns peers away.
    ready: threading.Event = field(default_factory=threading.Event, repr=False)

    def as_dict(self, now: float) -> dict:
        wall = time.time()
        return {"info_hash": self.info_hash, "name": self.name, "peers": self.peers,
                "upload_rate": self.upload_rate, "uploaded": self.uploaded, "upload_slots": self.slots,
                "interested": self.interested, "parts_wanted": self.parts,
                "started": round(self.started, 3),
                "last_active": round(wall - (now - self.last_active), 3)}

    def when_ready(self) -> Seed:
        """Wait (bounded) until the torrent accepts peers.

        Even in seed mode libtorrent first checks that the files exist (10,000
        stats for a 10,000-file dataset, ~0.2 s) and drops connections until
        then; a client handed this seed at once would connect, be dropped and
        retry a second later. Answering when ready costs that time once, here.
        """
        if not self.ready.wait(READY_TIMEOUT):
            log.warning("seed %s (%s): files not checked after %.0f s; answering anyway", self.info_hash,
                        self.name, READY_TIMEOUT)
        return self


@dataclass
class Counters:
    hash_failures: int = 0
    read_errors: int = 0
    # info-hash → payload bytes sent since the session started: a seed's own count ends with the seed,
    # and the heartbeat must not lose what a stopped seed sent.
    uploaded: dict[str, int] = field(default_factory=dict)

    @property
    def uploaded_total(self) -> int:
        return sum(self.uploaded.values())


class SeedBook:
    def __init__(self, clock: Callable[[], float] = time.monotonic, metrics: Metrics | None = None) -> None:
        self.lock = threading.RLock()
        self.entries: dict[str, Seedable] = {}
        self.seeds: dict[str, Seed] = {}
        self.damaged: dict[str, str] = {}  # info-hash → why it is not seeded (a replica failed its hash check)
        self.counters = Counters()
        self.clock = clock
        self.metrics = metrics

    def seed_of(self, handle: object) -> Seed | None:
        """The running seed of a torrent handle (an alert's), None once it stopped."""
        with self.lock:
            return self.seeds.get(str(handle.info_hashes().v1))  # type: ignore[attr-defined]

    def running(self) -> list[Seed]:
        with self.lock:
            return list(self.seeds.values())

    def count_upload(self, seed: Seed, total: int) -> None:
        """libtorrent's payload total of the seed's torrent (0 at the seed's start) into the site's counters."""
        delta = total - seed.uploaded
        seed.uploaded = total
        if delta > 0:
            self.counters.uploaded[seed.info_hash] = self.counters.uploaded.get(seed.info_hash, 0) + delta
            if self.metrics:
                self.metrics.uploaded.labels(dataset=seed.name).inc(delta)

    def gauge(self) -> None:
        if self.metrics:
            self.metrics.seeds_active.set(len(self.seeds))
            self.metrics.stuck_seeds.set(sum(1 for s in self.seeds.values() if s.watch.stuck))

    # -- what the control API and the heartbeat read ------------------------
    def uploaded(self) -> dict[str, int]:
        """Payload bytes sent per info-hash since the session started, stopped seeds' included."""
        with self.lock:
            return dict(self.counters.uploaded)

    def snapshot(self) -> list[dict]:
        with self.lock:
            now = self.clock()
            return [s.as_dict(now) for s in sorted(self.seeds.values(), key=lambda s: s.info_hash)]

    def stuck(self) -> list[dict]:
        """Seeds whose storage hangs (btserver/stuck.py): info-hash, name, since (wall clock, the stall's start)."""
        with self.lock:
            now, wall = self.clock(), time.time()
            return [{"info_hash": s.info_hash, "name": s.name, "since": round(wall - (now - s.watch.since), 3)}
                    for s in sorted(self.seeds.values(), key=lambda s: s.info_hash) if s.watch.since is not None]

    def stuck_hashes(self) -> list[str]:
        with self.lock:
            return sorted(ih for ih, s in self.seeds.items() if s.watch.stuck)
