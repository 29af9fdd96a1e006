"""The site's libtorrent session: seeds started on demand, stopped when idle.

One session per daemon. Datasets are registered by where their
precomputed torrent is; a start reads and parses it (from the buffer, which
is quick: docs/benchmarks.md "cost") and only a running seed holds it, so
the site's memory grows with its active seeds, not with the datasets it
knows (a parsed torrent costs ~150 bytes a file). Seeds are added in seed
mode: no start-up recheck, each piece is verified the first time it is
sent. A pump thread reads alerts (peers, bytes uploaded, hash failures:
btserver/seedalerts.py), stops seeds that have been idle for `idle_ttl`, and
watches for seeds whose storage hangs (btserver/stuck.py, btserver/seedwatch.py:
peers owed blocks, nothing uploaded for `stuck_after`), which the heartbeat
then names. What it knows (datasets, seeds, counters) is its `book`
(btserver/seedbook.py).

Every public method blocks (libtorrent round-trips): call from a thread
or an executor, never on the event loop.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

import libtorrent as lt

from torrents.errors import BtswarmError, NotFound
from torrents.hostport import format_hostport
from torrents.servicekit import ltsession

from btserver import policy, seedwatch
from btserver.metrics import Metrics
from btserver.seedalerts import SeedAlerts
from btserver.seedbook import Seed, Seedable, SeedBook
from btserver.stuck import StuckWatch

log = logging.getLogger("btswarm.server.seeder")

LISTEN_TIMEOUT = 10.0
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
        self.on_change = on_change or (lambda: None)
        self.book = SeedBook(clock, metrics)
        self._stuck = seedwatch.StuckSeeds(self.book, stuck_after, lambda: self.on_change())
        self._ses: lt.session | None = None
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
        wait_listening(self._ses, f"{self.listen_ip}:{self.port}", ssl=self.peer_certs is not None)
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
        self._alerts = SeedAlerts(self.book, damaged=self._damaged, peer_certs=self.peer_certs).table()
        self._pump = threading.Thread(target=self._run_pump, name="btserver-alerts", daemon=True)
        self._pump.start()
        log.info("peer wire listening on %s%s", self.endpoint,
                 f", SSL (restricted datasets) on {self.ssl_endpoint}" if self.ssl_endpoint else "")

    def close(self) -> None:
        self._stop.set()
        if self._pump is not None:
            self._pump.join(5)
        with self.book.lock:
            for ih in list(self.book.seeds):
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
        with self.book.lock:
            entry = self.book.entries.get(info_hash)
        return self.ssl_endpoint if entry is not None and self.restricted(entry.name) else self.endpoint

    def restricted_names(self) -> dict[str, str]:
        """info-hash → name of each restricted dataset this site can seed (said in heartbeats)."""
        with self.book.lock:
            return {ih: e.name for ih, e in self.book.entries.items() if self.restricted(e.name)}

    # -- datasets -----------------------------------------------------------
    def register(self, seedable: Seedable) -> None:
        """Make a dataset seedable (nothing is read or parsed until a seed starts)."""
        with self.book.lock:
            self.book.entries[seedable.info_hash] = seedable
            self.book.damaged.pop(seedable.info_hash, None)

    def unregister(self, info_hash: str) -> None:
        with self.book.lock:
            self.book.entries.pop(info_hash, None)
            if info_hash in self.book.seeds:
                self._remove(info_hash, "dataset changed")

    def seedable(self) -> list[str]:
        with self.book.lock:
            return sorted(self.book.entries)

    def problems(self) -> list[str]:
        """Why replicas are not seeded (damaged ones), read under the lock."""
        with self.book.lock:
            return sorted(self.book.damaged.values())

    # -- seeds --------------------------------------------------------------
    def start(self, info_hash: str) -> Seed:
        """Seed `info_hash` (already seeding: just refresh it). NotFound, AtCapacity."""
        assert self._ses is not None, "Seeder.open() first"
        book = self.book
        with book.lock:
            seed = book.seeds.get(info_hash)
            if seed is not None:
                seed.last_active = book.clock()
                return seed.when_ready()
            entry = book.entries.get(info_hash)
            if entry is None:
                raise NotFound(info_hash, "no such dataset at this site")
        info = entry.torrent_info()  # outside the lock: status and other starts go on meanwhile
        with book.lock:
            now = book.clock()
            seed = book.seeds.get(info_hash)
            if seed is not None:  # started by another request meanwhile
                seed.last_active = now
                return seed.when_ready()
            if info_hash not in book.entries:
                raise NotFound(info_hash, "no such dataset at this site (gone while starting)")
            if len(book.seeds) >= self.max_seeds:
                victim = policy.eviction_victim(book.seeds.values(), now, self.start_grace)
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
            handle = self._ses.add_torrent(as_seed(atp, self.upload_slots))
            seed = Seed(info_hash, entry.name, handle, time.time(), now, now, slots=self.upload_slots,
                        save_path=entry.save_path, files=info.layout(), watch=StuckWatch(self._stuck.stuck_after))
            book.seeds[info_hash] = seed
            book.gauge()
        self.on_change()
        seed.when_ready()
        log.info("seed %s (%s): started in %.3f s", info_hash, seed.name, book.clock() - now)
        return seed

    def stop(self, info_hash: str) -> None:
        with self.book.lock:
            if info_hash not in self.book.seeds:
                raise NotFound(info_hash, "not seeding")
            self._remove(info_hash, "stopped on request")
        self.on_change()

    def seeding(self) -> list[str]:
        with self.book.lock:
            return sorted(self.book.seeds)

    def _remove(self, info_hash: str, why: str) -> None:
        seed = self.book.seeds.pop(info_hash)
        if self._ses is not None:
            try:  # what it sent since the last state update (up to UPDATE_EVERY ago) counts too
                self.book.count_upload(seed, seed.handle.status().total_payload_upload)
            except RuntimeError:  # its handle is gone already
                pass
            self._ses.remove_torrent(seed.handle)
        if self.peer_certs is not None:
            self.peer_certs.forget(info_hash)
        self.book.gauge()
        log.info("seed %s (%s): %s", info_hash, seed.name, why)

    def _damaged(self, handle: object, problem: str, why: str) -> None:
        """Stop seeding a replica that cannot be served as it is (else libtorrent re-checks it and,
        no longer a seed, keeps peers such as other sites connected for ever), until a rescan or
        restart; the heartbeat that follows tells the tracker this site no longer holds it."""
        ih = str(handle.info_hashes().v1)  # type: ignore[attr-defined]
        with self.book.lock:
            entry = self.book.entries.pop(ih, None)
            if entry is not None:
                self.book.damaged[ih] = (f"{entry.name}: {problem}; not seeded until a rescan (SIGHUP) "
                                         "or a restart")
            if ih in self.book.seeds:
                self._remove(ih, why)
        self.on_change()

    # -- the pump -----------------------------------------------------------
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
                    seedwatch.fit_slots(self.book, self.upload_slots)
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
                self._stuck.sample()
            except Exception:  # the pump must outlive one bad alert
                log.exception("alert pump")

    def _reap(self) -> None:
        with self.book.lock:
            expired = policy.idle_expired(self.book.seeds.values(), self.book.clock(), self.idle_ttl)
            for ih in expired:
                self._remove(ih, f"idle for {self.idle_ttl:g} s with no peer")
        if expired:
            self.on_change()


def wait_listening(ses: lt.session, where: str, *, ssl: bool) -> None:
    """Wait (bounded) until the session listens, on its SSL socket too if `ssl`; SessionError if it cannot."""
    deadline = time.monotonic() + LISTEN_TIMEOUT
    while not ses.is_listening() or not ses.listen_port() or (ssl and not ses.ssl_listen_port()):
        if time.monotonic() > deadline:
            raise SessionError(where, "libtorrent session did not start listening")
        ses.wait_for_alert(50)
        for a in ses.pop_alerts():
            if isinstance(a, lt.listen_failed_alert):
                raise SessionError(where, f"cannot listen ({a.message()})")


def as_seed(atp: lt.add_torrent_params, upload_slots: int) -> lt.add_torrent_params:
    """`atp` with the flags and upload slots of a site's seed."""
    # Not auto-managed and not paused: the queue must never hold a seed back.
    # Upload mode: a site never downloads, so a replica that fails its
    # check is never "repaired" by writing peers' bytes into storage.
    # No file check at start: the scan has just seen every file, a seed
    # mode check stats each one again (seconds on a large dataset) and counts
    # the dataset's links as files of the wrong size; a file that went
    # missing since is a read error on its first piece (see SeedAlerts._on_file_error).
    atp.flags = (lt.torrent_flags.seed_mode | lt.torrent_flags.update_subscribe | lt.torrent_flags.upload_mode
                 | lt.torrent_flags.no_verify_files)
    if upload_slots:
        # Spare the site: it serves `upload_slots` peers of a swarm at a
        # time (at full speed), the other T3s take the pieces from them.
        # The figures (egress by client count, the alternatives tried)
        # are in docs/benchmarks.md, "egress". set_max_uploads refuses
        # fewer than 2; this field does not. Peers that want different
        # parts get more (seedwatch.fit_slots).
        atp.max_uploads = upload_slots
    return atp
