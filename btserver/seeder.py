"""The site's libtorrent session: seeds started on demand, stopped when idle.

One session per daemon. Datasets are registered by where their
precomputed torrent is; a start reads and parses it (from the buffer, which
is quick: docs/benchmarks.md "cost") and only a running seed holds it, so
the site's memory grows with its active seeds, not with the datasets it
knows (a parsed torrent costs ~150 bytes a file). Seeds are added in seed
mode: no start-up recheck, each piece is verified the first time it is
sent. A pump thread reads alerts (peers, bytes uploaded, hash failures),
stops seeds that have been idle for `idle_ttl`, and watches for seeds whose
storage hangs (btserver/stuck.py: peers owed blocks, nothing uploaded for
`stuck_after`), which the heartbeat then names.

Every public method blocks (libtorrent round-trips): call from a thread
or an executor, never on the event loop.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import libtorrent as lt

from torrents import peerid
from torrents.errors import BtswarmError, NotFound
from torrents.hostport import format_hostport
from torrents.servicekit import ltsession

from btserver import policy, uploadslots
from btserver.stuck import PeerWait, StuckWatch, waiting
from btserver.metrics import Metrics

log = logging.getLogger("btswarm.server.seeder")

LISTEN_TIMEOUT = 10.0
READY_TIMEOUT = 5.0
UPDATE_EVERY = 0.5
SLOTS_EVERY = 0.25  # s between looks at what a seed's peers want (btserver/uploadslots.py)
RENEW_CHECK_EVERY = 60.0  # s between looks at whether the site's peer certificate is due for renewal


class AtCapacity(BtswarmError):
    """Every seed slot is taken by a busy seed."""

    def __init__(self, capacity: int) -> None:
        super().__init__("seeds", f"at capacity ({capacity} busy seeds)")
        self.capacity = capacity


class SessionError(BtswarmError):
    """The libtorrent session could not listen or failed."""


@dataclass(frozen=True)
class Seedable:
    info_hash: str
    name: str
    torrent_path: Path  # the precomputed .torrent, read when a seed starts
    save_path: str  # the directory holding <name>/<LFN> (the farm root)
    own_names: dict[int, str] = field(default_factory=dict)  # metainfo.own_names: case twins' own names


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
    interested: int = 0  # peers that wanted pieces at the last look (_fit_slots)
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


class Seeder:
    def __init__(self, listen_ip: str, port: int = 0, *, idle_ttl: float = 600.0, max_seeds: int = 50,
                 upload_rate_limit: int = 0, upload_slots: int = 1, start_grace: float = 5.0,
                 stuck_after: float = 10.0, metrics: Metrics | None = None,
                 on_change: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.monotonic, peer_certs: ltsession.PeerCerts | None = None,
                 ssl_port: int = 0, restricted: Callable[[str], bool] = lambda name: False) -> None:
        self.listen_ip = listen_ip
        self.port = port
        self.idle_ttl = idle_ttl
        self.max_seeds = max_seeds
        self.upload_rate_limit = upload_rate_limit
        self.upload_slots = upload_slots
        self.start_grace = min(start_grace, idle_ttl)
        self.stuck_after = stuck_after  # 0: never stuck
        self.metrics = metrics
        self.on_change = on_change or (lambda: None)
        self.clock = clock
        self.counters = Counters()
        self._ses: lt.session | None = None
        self._lock = threading.RLock()
        self._entries: dict[str, Seedable] = {}
        self.damaged: dict[str, str] = {}  # info-hash → why it is not seeded (a replica failed its hash check)
        self._seeds: dict[str, Seed] = {}
        self._stop = threading.Event()
        self._pump: threading.Thread | None = None
        self._listen_port = 0
        self.advertised = ""  # the address peers are told when listening on a wildcard (btserver/config.py)
        # Restricted datasets (torrents.access) are seeded as SSL torrents of the federation's peer CA, with the
        # site's certificate, on an SSL socket beside the plain one (`ssl_port`, 0: a free one).
        self.peer_certs = peer_certs
        self.ssl_port = ssl_port
        self.restricted = restricted
        self._ssl_listen_port = 0
        self._next_renewal = 0.0

    # -- life cycle ---------------------------------------------------------
    def open(self) -> None:
        """Create the session and wait (bounded) until it listens."""
        pack = ltsession.settings(self.listen_ip, self.port, seeding=True,
                                  upload_rate_limit=self.upload_rate_limit, stop_tracker_timeout=1,
                                  ssl_port=self.ssl_port if self.peer_certs else None)
        self._ses = lt.session(pack)
        if self.upload_rate_limit or self.upload_slots:
            ltsession.limit_everyone(self._ses)  # the site's limits hold for every peer
        deadline = time.monotonic() + LISTEN_TIMEOUT
        while (not self._ses.is_listening() or not self._ses.listen_port()
               or (self.peer_certs is not None and not self._ses.ssl_listen_port())):
            if time.monotonic() > deadline:
                raise SessionError(f"{self.listen_ip}:{self.port}", "libtorrent session did not start listening")
            self._ses.wait_for_alert(50)
            for a in self._ses.pop_alerts():
                if isinstance(a, lt.listen_failed_alert):
                    raise SessionError(f"{self.listen_ip}:{self.port}", f"cannot listen ({a.message()})")
        self._listen_port = self._ses.listen_port()
        self._ssl_listen_port = self._ses.ssl_listen_port() if self.peer_certs else 0
        if self.ssl_port and self.peer_certs and self._ssl_listen_port != self.ssl_port:
            self._ses = None
            raise SessionError(f"{self.listen_ip}:{self.ssl_port}", f"SSL port is taken (libtorrent fell back to "
                                                                    f"{self._ssl_listen_port})")
        if self.port and self._listen_port != self.port:
            # libtorrent quietly falls back to another port when the one asked
            # for is taken; a configured port is what the firewall opens.
            self._ses = None
            raise SessionError(f"{self.listen_ip}:{self.port}", f"port is taken (libtorrent fell back to "
                                                                f"{self._listen_port})")
        self._alerts = self._alert_table()
        self._pump = threading.Thread(target=self._run_pump, name="btserver-alerts", daemon=True)
        self._pump.start()
        log.info("peer wire listening on %s%s", self.endpoint,
                 f", SSL (restricted datasets) on {self.ssl_endpoint}" if self.ssl_endpoint else "")

    def close(self) -> None:
        self._stop.set()
        if self._pump is not None:
            self._pump.join(5)
        with self._lock:
            for ih in list(self._seeds):
                self._remove(ih, "shutdown")
        self._ses = None  # the session's destructor waits (bounded) for tracker 'stopped' events

    @property
    def endpoint(self) -> str:
        """Where peers reach the seeds: the listen address, or for a wildcard the one `advertised`."""
        return format_hostport(self.advertised or self.listen_ip, self._listen_port)

    @property
    def ssl_endpoint(self) -> str:
        """Where members reach the restricted datasets' seeds; "" without a peer certificate."""
        if not self._ssl_listen_port:
            return ""
        return format_hostport(self.advertised or self.listen_ip, self._ssl_listen_port)

    def endpoint_of(self, info_hash: str) -> str:
        """Where peers reach this dataset's seed: the SSL socket for a restricted one."""
        with self._lock:
            entry = self._entries.get(info_hash)
        return self.ssl_endpoint if entry is not None and self.restricted(entry.name) else self.endpoint

    def restricted_names(self) -> dict[str, str]:
        """info-hash → name of each restricted dataset this site can seed (said in heartbeats)."""
        with self._lock:
            return {ih: e.name for ih, e in self._entries.items() if self.restricted(e.name)}

    # -- datasets -----------------------------------------------------------
    def register(self, seedable: Seedable) -> None:
        """Make a dataset seedable (nothing is read or parsed until a seed starts)."""
        with self._lock:
            self._entries[seedable.info_hash] = seedable
            self.damaged.pop(seedable.info_hash, None)

    def unregister(self, info_hash: str) -> None:
        with self._lock:
            self._entries.pop(info_hash, None)
            if info_hash in self._seeds:
                self._remove(info_hash, "dataset changed")

    def seedable(self) -> list[str]:
        with self._lock:
            return sorted(self._entries)

    def problems(self) -> list[str]:
        """Why replicas are not seeded (damaged ones), read under the lock."""
        with self._lock:
            return sorted(self.damaged.values())

    # -- seeds --------------------------------------------------------------
    def start(self, info_hash: str) -> Seed:
        """Seed `info_hash` (already seeding: just refresh it). NotFound, AtCapacity."""
        assert self._ses is not None, "Seeder.open() first"
        with self._lock:
            seed = self._seeds.get(info_hash)
            if seed is not None:
                seed.last_active = self.clock()
                return self._when_ready(seed)
            entry = self._entries.get(info_hash)
            if entry is None:
                raise NotFound(info_hash, "no such dataset at this site")
        info = self._parse(entry)  # outside the lock: status and other starts go on meanwhile
        with self._lock:
            now = self.clock()
            seed = self._seeds.get(info_hash)
            if seed is not None:  # started by another request meanwhile
                seed.last_active = now
                return self._when_ready(seed)
            if info_hash not in self._entries:
                raise NotFound(info_hash, "no such dataset at this site (gone while starting)")
            if len(self._seeds) >= self.max_seeds:
                victim = policy.eviction_victim(self._seeds.values(), now, self.start_grace)
                if victim is None:
                    raise AtCapacity(self.max_seeds)
                self._remove(victim, "evicted for a new seed (least recently active)")
            atp = ltsession.torrent_params(info, entry.save_path, entry.own_names)
            if self.restricted(entry.name):
                if self.peer_certs is None:
                    raise NotFound(info_hash, f"{entry.name}: a restricted dataset, and this site has no peer "
                                              "certificate ([server] peer_cert, peer_key, peer_ca)")
                # The same torrent, its root certificate given now: the info-hash stays the public one.
                self.peer_certs.add(atp)
            # Not auto-managed and not paused: the queue must never hold a seed back.
            # Upload mode: a site never downloads, so a replica that fails its
            # check is never "repaired" by writing peers' bytes into storage.
            # No file check at start: the scan has just seen every file, a seed
            # mode check stats each one again (0.2 s for 10,000 files) and counts
            # the dataset's links as files of the wrong size; a file that went
            # missing since is a read error on its first piece (see _on_file_error).
            atp.flags = (lt.torrent_flags.seed_mode | lt.torrent_flags.update_subscribe | lt.torrent_flags.upload_mode
                         | lt.torrent_flags.no_verify_files)
            if self.upload_slots:
                # Spare the site: it serves `upload_slots` peers of a swarm at a
                # time (at full speed), the other T3s take the pieces from them.
                # The figures (egress by client count, the alternatives tried)
                # are in docs/benchmarks.md, "egress". set_max_uploads refuses
                # fewer than 2; this field does not. Peers that want different
                # parts get more (_fit_slots).
                atp.max_uploads = self.upload_slots
            handle = self._ses.add_torrent(atp)
            seed = Seed(info_hash, entry.name, handle, time.time(), now, now, slots=self.upload_slots,
                        save_path=entry.save_path, files=info.layout(), watch=StuckWatch(self.stuck_after))
            self._seeds[info_hash] = seed
            self._gauge()
        self.on_change()
        self._when_ready(seed)
        log.info("seed %s (%s): started in %.3f s", info_hash, seed.name, self.clock() - now)
        return seed

    def _parse(self, entry: Seedable) -> object:
        """The dataset's torrent_info, read from its precomputed .torrent."""
        try:
            info = ltsession.torrent_info(entry.torrent_path.read_bytes())
        except (OSError, RuntimeError) as exc:
            raise NotFound(entry.info_hash, f"{entry.name}: cannot read its torrent {entry.torrent_path} ({exc})") \
                from None
        if str(info.info_hashes().v1) != entry.info_hash:
            # Rebuilt since it was registered (a rescan registers the new version).
            raise NotFound(entry.info_hash, f"{entry.name}: its torrent is another version now")
        return info

    def _when_ready(self, seed: Seed) -> Seed:
        """Wait (bounded) until the torrent accepts peers.

        Even in seed mode libtorrent first checks that the files exist (10,000
        stats for a 10,000-file dataset, ~0.2 s) and drops connections until
        then; a client handed this seed at once would connect, be dropped and
        retry a second later. Answering when ready costs that time once, here.
        """
        if not seed.ready.wait(READY_TIMEOUT):
            log.warning("seed %s (%s): files not checked after %.0f s; answering anyway", seed.info_hash,
                        seed.name, READY_TIMEOUT)
        return seed

    def stop(self, info_hash: str) -> None:
        with self._lock:
            if info_hash not in self._seeds:
                raise NotFound(info_hash, "not seeding")
            self._remove(info_hash, "stopped on request")
        self.on_change()

    def seeding(self) -> list[str]:
        with self._lock:
            return sorted(self._seeds)

    def uploaded(self) -> dict[str, int]:
        """Payload bytes sent per info-hash since the session started, stopped seeds' included."""
        with self._lock:
            return dict(self.counters.uploaded)

    def snapshot(self) -> list[dict]:
        with self._lock:
            now = self.clock()
            return [s.as_dict(now) for s in sorted(self._seeds.values(), key=lambda s: s.info_hash)]

    def stuck(self) -> list[dict]:
        """Seeds whose storage hangs (btserver/stuck.py): info-hash, name, since (wall clock, the stall's start)."""
        with self._lock:
            now, wall = self.clock(), time.time()
            return [{"info_hash": s.info_hash, "name": s.name, "since": round(wall - (now - s.watch.since), 3)}
                    for s in sorted(self._seeds.values(), key=lambda s: s.info_hash) if s.watch.since is not None]

    def stuck_hashes(self) -> list[str]:
        with self._lock:
            return sorted(ih for ih, s in self._seeds.items() if s.watch.stuck)

    def _remove(self, info_hash: str, why: str) -> None:
        seed = self._seeds.pop(info_hash)
        if self._ses is not None:
            try:  # what it sent since the last state update (up to UPDATE_EVERY ago) counts too
                self._count_upload(seed, seed.handle.status().total_payload_upload)
            except RuntimeError:  # its handle is gone already
                pass
            self._ses.remove_torrent(seed.handle)
        if self.peer_certs is not None:
            self.peer_certs.forget(info_hash)
        self._gauge()
        log.info("seed %s (%s): %s", info_hash, seed.name, why)

    def _gauge(self) -> None:
        if self.metrics:
            self.metrics.seeds_active.set(len(self._seeds))
            self.metrics.stuck_seeds.set(sum(1 for s in self._seeds.values() if s.watch.stuck))

    # -- alerts -------------------------------------------------------------
    def _run_pump(self) -> None:
        ses = self._ses
        assert ses is not None
        next_update = next_slots = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_update:
                ses.post_torrent_updates()
                next_update = now + UPDATE_EVERY
            if now >= next_slots and self.upload_slots:
                next_slots = now + SLOTS_EVERY
                try:
                    self._fit_slots()
                except Exception:
                    log.exception("upload slots")
            if self.peer_certs is not None and now >= self._next_renewal:
                self._next_renewal = now + RENEW_CHECK_EVERY
                try:
                    self.peer_certs.renew_if_due()
                except Exception as exc:  # a renewal that failed is tried again; the current one still holds
                    log.warning("peer certificate: renewal failed: %s", exc)
            ses.wait_for_alert(int(min(UPDATE_EVERY, SLOTS_EVERY) * 1000))
            try:
                self._alerts.drain(ses)
                self._reap()
                self._watch_stuck()
            except Exception:  # the pump must outlive one bad alert
                log.exception("alert pump")

    def _alert_table(self) -> ltsession.Alerts:
        return ltsession.Alerts({
            lt.state_update_alert: self._on_state_update, lt.torrent_checked_alert: self._on_checked,
            lt.peer_connect_alert: self._on_peer_connect, lt.hash_failed_alert: self._on_hash_failed,
            lt.file_error_alert: self._on_file_error,
            lt.listen_failed_alert: lambda a: log.warning("libtorrent: %s", a.message()),
            lt.torrent_error_alert: lambda a: log.warning("libtorrent: %s", a.message()),
            lt.torrent_need_cert_alert: self._on_need_cert,
        })

    def _on_need_cert(self, alert) -> None:
        if self.peer_certs is not None:
            self.peer_certs.on_need_cert(alert)

    def _on_state_update(self, alert) -> None:
        with self._lock:
            now = self.clock()
            for st in alert.status:
                seed = self._seeds.get(str(st.info_hashes.v1))
                if seed is None:
                    continue
                # Peers that want something: a seed connected (a T3 that is done, another site) keeps
                # a seed busy no more than no peer does, however often it connects again.
                seed.peers = st.num_peers - st.num_seeds
                seed.upload_rate = st.upload_payload_rate
                self._count_upload(seed, st.total_payload_upload)
                if seed.peers:
                    seed.last_active = now

    def _count_upload(self, seed: Seed, total: int) -> None:
        """libtorrent's payload total of the seed's torrent (0 at the seed's start) into the site's counters."""
        delta = total - seed.uploaded
        seed.uploaded = total
        if delta > 0:
            self.counters.uploaded[seed.info_hash] = self.counters.uploaded.get(seed.info_hash, 0) + delta
            if self.metrics:
                self.metrics.uploaded.labels(dataset=seed.name).inc(delta)

    def _on_checked(self, alert) -> None:
        with self._lock:
            seed = self._seeds.get(str(alert.handle.info_hashes().v1))
        if seed is not None:
            seed.ready.set()

    def _on_peer_connect(self, alert) -> None:
        with self._lock:
            seed = self._seeds.get(str(alert.handle.info_hashes().v1))
            if seed is not None:
                # A peer until the next state update says whether it wants anything (_fit_slots looks at
                # seeds with peers); only then is the seed active (_on_state_update).
                seed.peers = max(seed.peers, 1)

    def _on_hash_failed(self, alert) -> None:
        self.counters.hash_failures += 1
        if self.metrics:
            self.metrics.hash_failures.inc()
        log.warning("seed %s: piece %d failed its hash check (data on disk differs from the torrent)",
                    alert.handle.info_hashes().v1, alert.piece_index)
        # Seed mode hashes a piece before its first send, so the bad bytes
        # never left; but the replica is damaged.
        self._damaged(alert.handle, f"piece {alert.piece_index} of the replica differs from the torrent",
                      "replica failed its hash check")

    def _on_file_error(self, alert) -> None:
        # A file the scan saw cannot be read now (gone, permissions, an I/O
        # error): its pieces cannot be sent, and a peer waiting for them
        # would wait for ever. Stop offering the dataset, so the tracker
        # asks another site, and say which file.
        self.counters.read_errors += 1
        if self.metrics:
            self.metrics.read_errors.inc()
        name = _filename(alert)
        log.warning("seed %s: %s", alert.handle.info_hashes().v1, alert.message())
        self._damaged(alert.handle, f"cannot read {name or 'a file'} ({alert.error.message()})",
                      "a file of the replica cannot be read")

    def _damaged(self, handle: object, problem: str, why: str) -> None:
        """Stop seeding a replica that cannot be served as it is (else libtorrent re-checks it and,
        no longer a seed, keeps peers such as other sites connected for ever), until a rescan or
        restart; the heartbeat that follows tells the tracker this site no longer holds it."""
        ih = str(handle.info_hashes().v1)  # type: ignore[attr-defined]
        with self._lock:
            entry = self._entries.pop(ih, None)
            if entry is not None:
                self.damaged[ih] = (f"{entry.name}: {problem}; not seeded until a rescan (SIGHUP) "
                                    "or a restart")
            if ih in self._seeds:
                self._remove(ih, why)
        self.on_change()

    def _fit_slots(self) -> None:
        """Give each part the seeds' interested peers want its own upload slots (btserver/uploadslots.py)."""
        with self._lock:
            seeds = [s for s in self._seeds.values() if s.peers and s.ready.is_set()]
        for seed in seeds:
            try:
                parts = [peerid.part_of(p.pid.to_bytes()) for p in seed.handle.get_peer_info()
                         if p.flags & lt.peer_info.remote_interested]
                want = uploadslots.slots(self.upload_slots, parts, seed.slots)
                seed.interested, seed.parts = len(parts), len(set(parts))
                if want != seed.slots:
                    seed.handle.set_max_uploads(want)
                    log.info("seed %s (%s): %d upload slots (%d parts wanted by %d peers)", seed.info_hash,
                             seed.name, want, seed.parts, seed.interested)
                    seed.slots = want
            except RuntimeError:  # removed meanwhile: its handle is gone
                continue

    def _watch_stuck(self) -> None:
        """One sample of each seed for its StuckWatch; a stalled seed nobody waits on any more reads a block itself."""
        if self.stuck_after <= 0:
            return
        with self._lock:
            seeds = list(self._seeds.values())
        for seed in seeds:
            watch, owed = seed.watch, 0
            try:
                if seed.peers and not watch.moving(seed.uploaded):
                    # Only a seed with peers and no upload since the last sample costs a look at its peers.
                    owed = waiting([_peer_wait(p) for p in seed.handle.get_peer_info()])
            except RuntimeError:  # removed meanwhile: its handle is gone
                continue
            with self._lock:  # a probe's answer updates the watch from its own thread
                changed = watch.step(self.clock(), seed.uploaded, owed)
                probe = watch.wants_probe()
                if probe:
                    watch.probe_started()
            if changed:
                self._stuck_changed(seed)
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
        with self._lock:
            changed = seed.watch.probe_done(self.clock(), ok)
        if changed:
            self._stuck_changed(seed)

    def _stuck_changed(self, seed: Seed) -> None:
        if seed.watch.stuck:
            log.warning("seed %s (%s): stuck: peers wait for blocks and nothing was uploaded for %.0f s (the "
                        "storage does not answer?); the tracker is told not to hand it out", seed.info_hash,
                        seed.name, self.clock() - (seed.watch.since or 0.0))
        else:
            log.info("seed %s (%s): reads answer again, no longer stuck", seed.info_hash, seed.name)
        with self._lock:
            self._gauge()
        self.on_change()

    def _reap(self) -> None:
        with self._lock:
            expired = policy.idle_expired(self._seeds.values(), self.clock(), self.idle_ttl)
            for ih in expired:
                self._remove(ih, f"idle for {self.idle_ttl:g} s with no peer")
        if expired:
            self.on_change()


PROBE_BLOCK = 4096


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


def _filename(alert: object) -> str:
    # A method in libtorrent 2.x bindings, an attribute in older ones.
    name = getattr(alert, "filename", "")
    return str(name() if callable(name) else name)
