"""One bt-get worker: a libtorrent session in its own process, fetching one share.

The parent (btget.download) starts `run(spec, conn)` in a forked process
and talks over a duplex pipe: the worker sends events and receives commands,
each a dataclass of btget.events (Listening, Progress, WorkerFailed,
TrackerReply, WebSeedBanned; Connect, WebSeeds, Stop). The worker never
draws anything and decides nothing about the run: the parent owns the
terminal and the outcome, and when to use web seeds (btget/webseeds.py): a
torrent's own url-list is never used by libtorrent on its own.

Layout on disk: save_path is DIR, so libtorrent writes DIR/NAME/<LFN>.
Everything of bt-get's own lives in DIR/NAME/.bt-get/ (a dot name, which
no dataset reader takes for a file): one resume file per share, and the
share's part file (libtorrent keeps there the bytes of pieces that straddle
into files of other shares), in a directory per share so that two workers
never write the same part file.
"""

from __future__ import annotations

import collections
import enum
import errno
import logging
import os
import signal
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from torrents import peerid
from torrents.hostport import ANY, format_hostport, host_of, own_addresses, url_endpoint
from torrents.servicekit import tls

from btget import events, recover, sources
from btget.reannounce import Reannounce

log = logging.getLogger("btget.worker")

RESUME_SUFFIX = ".resume"
ELSEWHERE = "elsewhere"  # under a part dir: where other shares' files would be (never created)
STALL_CHECK = 0.5  # seconds between looks for peers that hold our requests and send nothing (btget/stall.py)
SOURCE_SAMPLE = 0.05  # seconds between per-peer byte samples while downloading
COVER_SHARE = 100  # the looks at which sites' slices the T3s around us hold take at most 1/COVER_SHARE of the time
SAVE_FRACTION = 100  # resume state is also saved each time 1/SAVE_FRACTION of the share has arrived
# A rerun hashes at most this much (+ 2% of its share) of what is on disk beyond the saved state: the
# saves' lag behind the pieces (btget/recover.py), not a whole dataset on a file system without holes.
RECOVER_BUDGET = 64 * 2**20
PROBE_EVERY = 5.0  # seconds between announces while web seeds stand in for peers (peers blocked: try again)
RENEW_CHECK_EVERY = 5.0  # seconds between looks at whether the peer certificate is due for renewal
# A web seed dropped once it took part in this many pieces that failed their SHA1 check: libtorrent
# bans one at once only when it alone sent the piece, and a web seed that goes on sending bad
# ranges costs a re-fetch each time.
WEB_SEED_HASHFAILS = 2
SKIPPED = "skipping tracker announce"  # libtorrent's words when a listen address has no route to a tracker
REFUSALS_DEFINITIVE = 3  # connections a tracker refused in a row before that is its answer
REASONS_DEFINITIVE = 2  # refusals with a reason in a row before that is its answer
REASON_RECHECK = 3  # seconds before asking a tracker that gave a reason once more
# A worker told to stop is done within STOP_WITHIN s (the parent waits that and a margin, then ends it
# by PID); the last SAVE_WITHIN of them are for the resume state, after any recheck of a full disk.
# One budget: a recheck and a save bounded apart (12 + 10 s) outlasted the parent's wait under load
# and left the full disk's stale state behind.
STOP_WITHIN = 15.0
SAVE_WITHIN = 5.0


@dataclass(frozen=True)
class WorkerSpec:
    index: int  # 1-based, as shown to the user
    torrent: bytes  # the .torrent file
    save_path: str  # DIR: libtorrent writes DIR/NAME/<LFN>
    state_dir: str  # DIR/NAME/.bt-get
    key: str  # names this share's resume state (plan.share_key)
    wanted: tuple[int, ...]  # file indices this worker downloads; the rest get priority 0
    listen_ip: str = ANY  # one address, or every address of the host (the sessions' connections then unbound)
    peers: tuple[tuple[str, int], ...] = ()
    web_seeds: tuple[str, ...] = ()  # HTTP sources (BEP 19) used from the start; the parent adds and drops them
    url_list: tuple[str, ...] = ()  # every web seed it may be told to use (the torrent's, --web-seed): naming
    own_names: dict[int, str] = field(default_factory=dict)  # torrents.metainfo.own_names: case twins
    recheck: bool = False  # --check: ignore saved resume state, hash what is on disk
    max_connections: int = 200
    report_interval: float = 0.5
    # Resume state is written at most this often while pieces arrive: a kill -9
    # then costs at most this long of transfer on the rerun.
    resume_interval: float = 0.5
    # This run's peer-id prefix (download.sibling_prefix); the worker's peer id is it plus its index and
    # part (torrents/peerid.py). A connection whose peer id starts with it is a sibling worker, whatever
    # its address.
    peer_prefix: str = ""
    part: str = ""  # torrents.peerid.part_tag of its files when it wants part of the dataset, else ""
    site_peers: tuple[str, ...] = ()  # the sites' seeds, 'ip:port' (the tracker's /api/sites): btget/siteshare.py
    rates: tuple[int, int] = (0, 0)  # its part of the run's caps, (download, upload) bytes/s; 0: none
    # A restricted dataset (torrents.access): (peer CA, certificate, key) files; the torrent is an SSL torrent
    # of that CA on an SSL socket of its own, and the certificate is read again when it is due for renewal.
    peer_cert: tuple[str, str, str] = ()
    # (repository URL, CA file) when the certificate came from the repository: renewed by asking it again.
    peer_cert_repo: tuple[str, str] = ()

    @property
    def peer_fingerprint(self) -> str:
        return peerid.fingerprint(self.peer_prefix, self.index, self.part) if self.peer_prefix else ""

    @property
    def resume_path(self) -> str:
        return os.path.join(self.state_dir, f"{self.key}{RESUME_SUFFIX}")

    @property
    def stale_path(self) -> str:
        """Where a state that may claim what is not on disk waits to be written over (write_resume's room)."""
        return f"{self.resume_path}.stale"

    @property
    def part_dir(self) -> str:
        return os.path.join(self.state_dir, self.key)


def run(spec: WorkerSpec, conn: Connection) -> None:
    """Process entry point (multiprocessing, forked from the parent)."""
    logging.basicConfig(level=logging.WARNING)
    stop = {"signal": None}

    def on_signal(signum: int, _frame: object) -> None:
        # Ctrl-C reaches the whole process group: save state and leave; the
        # parent decides the exit status.
        stop["signal"] = signum

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        Worker(spec, conn, stop).loop()
    except (BrokenPipeError, EOFError, ConnectionResetError):
        pass  # the parent is gone; nothing left to report to
    finally:
        conn.close()


class WorkerPhase(enum.Enum):
    FETCHING = "fetching"
    FLUSHING = "flushing"  # every wanted piece passed its check; flush_cache puts them on disk
    SEEDING = "seeding"  # complete and on disk: what the parent is told as finished
    FAILED = "failed"  # libtorrent cannot go on (disk full, a file error)


class Worker:
    def __init__(self, spec: WorkerSpec, conn: Connection, stop: dict) -> None:
        import libtorrent as lt

        from torrents.servicekit import ltsession

        self.lt = lt
        self.spec = spec
        self.conn = conn
        self.stop = stop
        # Bytes per source and what is known of each peer (btget/sources.py); web seeds (given and
        # the torrent's url-list) by endpoint, so that one is never taken for a sibling worker.
        self.ledger = sources.Ledger(spec.listen_ip, spec.peer_prefix, _endpoints(spec.web_seeds + spec.url_list))
        self.banned_ips: set[str] = set()
        self.phase = WorkerPhase.FETCHING
        self.parent_gone = False
        self.ppid = os.getppid()
        self.status: Any = None
        self.first_byte_at: float | None = None  # time.time() when the first payload byte arrived
        self.checked = False  # libtorrent has read what is on disk (resume state, or --check's hashing)
        self.pending_saves = 0
        self.had_seeds = False
        self.connected = False  # some peer connected at some point (sent to the parent)
        self.connected_at: float | None = None  # time.time() of the first peer connection
        self.listening: set[str] = set()  # TCP listen endpoints: one per address of the host with ANY
        self.skipped: dict[str, set[str]] = {}  # tracker URL → the listen endpoints that have no route to it
        self.reannounce = Reannounce()  # when losing every seed asks the tracker again
        self.web_urls = set(spec.web_seeds)  # the web seeds in use now (as the parent names them)
        from btget import doorrelay

        self.relays = doorrelay.Relays()  # libtorrent asks each http web seed through one (btget/doorrelay.py)
        self.alerts = self._alert_table()
        self.probe = False  # web seeds stand in for peers: keep asking the tracker for them
        self.next_probe = 0.0
        self.bans_seen = False  # libtorrent banned some peer: maybe a web seed (see _banned_web_seeds)
        self.unsaved = 0  # bytes of pieces finished since the last resume save was asked for
        # Pieces fetched between the check's end (torrent_checked_alert; libtorrent also says piece_finished
        # for each piece of the resume state it reads) and the first report after it.
        self.check_done = False
        self.fetched: set[int] = set()
        self.save_every = 0  # set in _params: 1% of this share, at least one piece
        self.piece_length = 0
        # A piece could not be written (disk full): what libtorrent believes it has may not be on disk
        # until the files are checked again (see _recheck).
        self.write_failed = False
        self.rechecked = False
        self._web_seed_types = (lt.peer_info.web_seed, lt.peer_info.http_seed)
        from btget import stall

        self.stall = stall.StallWatch(never=frozenset(own_addresses(spec.listen_ip)))
        self.shed: dict[str, float] = {}  # site address let go (btget/siteshare.py) → monotonic time it may return
        self.site_keys = frozenset(spec.site_peers)
        self.slices = list(dict.fromkeys(host_of(k) for k in spec.site_peers))  # slices[k]: site k's address
        self.spared: set[str] = set()  # site addresses let go while the T3s around us hold their slices
        self.helping = False  # the site that fed us is kept to fetch a slower site's slice (btget/siteshare.py)
        self.fed_by: int | None = None  # the slice of the site that fed us, remembered after we let it go
        self.next_cover = 0.0  # monotonic time of the next look at the T3s' bitfields
        self.next_share = 0.0  # monotonic time of the next look at how many sites unchoke us (siteshare.to_shed)
        self.nowhere_seen: collections.deque[tuple[float, int]] = collections.deque()  # (time, pieces held nowhere)
        self.kept_slices: set[int] = set()  # the slices asked for first (btget/siteshare.py), as libtorrent was told
        self.num_pieces = 0
        # It fetches every file of the torrent: the parent gave it no part (download.run decides, once).
        self.whole = not spec.part
        # piece_finished_alert (piece_progress) drives the byte-based resume saves.
        extra = {"connections_limit": spec.max_connections,
                 "alert_mask": int(ltsession.ALERTS | lt.alert.category_t.piece_progress_notification),
                 **({"peer_fingerprint": spec.peer_fingerprint} if spec.peer_fingerprint else {})}
        self.peer_certs = peer_certs_of(spec)
        self.next_renewal = 0.0
        self.ses = ltsession.session(spec.listen_ip, 0, ssl_port=0 if self.peer_certs else None, **extra)
        if any(spec.rates):
            self._set_rates(spec.rates)
        marks = {"session": time.time()}
        self.handle = self.ses.add_torrent(self._params())
        marks["torrent_added"] = time.time()
        # Sibling workers find each other on this host's loopback when listening everywhere.
        # A restricted dataset's siblings meet on the SSL socket: the only one its SSL torrent takes peers on.
        port = self.ses.ssl_listen_port() if self.peer_certs else self.ses.listen_port()
        self.send(events.Listening(spec.index, own_addresses(spec.listen_ip)[0], port, marks))
        for peer in spec.peers:
            self.handle.connect_peer(peer)

    # --- set-up -------------------------------------------------------------------
    def _params(self) -> Any:
        atp = torrent_params(self.lt, self.spec)
        if self.peer_certs is not None:
            self.peer_certs.add(atp)  # the root certificate at add time: the info-hash is the public one
        atp.url_seeds = [self._relayed(u) for u in self.spec.web_seeds]
        wanted = set(self.spec.wanted)
        files = atp.ti.layout()
        self.piece_length = atp.ti.piece_length()
        self.num_pieces = atp.ti.num_pieces()
        self.file_sizes = [files.file_size(i) for i in range(files.num_files())]
        self.save_every = max(self.piece_length, sum(files.file_size(i) for i in wanted) // SAVE_FRACTION)
        from btget.streaming import PieceMap

        self.layout = PieceMap(self.file_sizes, self.piece_length)
        from btget.siteshare import Paces

        self.paces = Paces(sum(self.file_sizes) // max(1, len(self.slices)))  # which sites the rules can steer
        return atp

    # --- main loop ------------------------------------------------------------------
    def loop(self) -> None:
        next_report = next_sample = next_stall = 0.0
        next_resume = time.monotonic() + self.spec.resume_interval
        while self.stop["signal"] is None:
            if self.ses.wait_for_alert(50) is not None:
                self.alerts.drain(self.ses)
            while not self.parent_gone and self.conn.poll():
                try:
                    command = self.conn.recv()
                except (EOFError, OSError):
                    # The parent died (kill -9): save what we have and leave.
                    self.parent_gone = True
                    self.stop["signal"] = "orphaned"
                    break
                if isinstance(command, events.Stop):
                    self.stop["signal"] = "stop"
                elif isinstance(command, events.Connect):
                    self.ledger.introduce(command.peers)
                    for peer in command.peers:
                        self.handle.connect_peer(peer)
                elif isinstance(command, events.WebSeeds):
                    self._set_web_seeds(command)
                elif isinstance(command, events.Rates):
                    self._set_rates((command.download, command.upload))
            if self.first_byte_at is None and self.phase is WorkerPhase.FETCHING:
                # Polled here, not taken from a state_update_alert: those come
                # every report_interval (0.5 s), too coarse for a first byte that
                # arrives 50-80 ms after start. Only until that byte: one cheap
                # h.status() per turn of this 50 ms loop, then never again.
                if self.handle.status(0).total_payload_download > 0:
                    self.first_byte_at = time.time()
            now = time.monotonic()
            if self.phase is WorkerPhase.FETCHING and now >= next_sample:
                # get_peer_info is the only source of per-peer byte counts, and
                # a seed hangs up the moment we complete: sample often, so
                # little of a connection's last stretch goes uncounted. The sites are
                # looked at as often: one unchoking us is told within a turn which slice
                # to send first, before its queue fills with other pieces.
                if self._shed_sites(now, self._count_sources()):
                    self._set_ip_filter()
                next_sample = now + SOURCE_SAMPLE
            if now >= next_stall:
                self._shut_out_stalled(now)
                if self.bans_seen and self.web_urls:
                    self._banned_web_seeds()
                next_stall = now + STALL_CHECK
            if self.probe and self.phase is WorkerPhase.FETCHING and now >= self.next_probe:
                # Blocked peers are given up after a few failures; handed out again by the
                # tracker they are tried again, so one that became reachable is found.
                self.handle.force_reannounce(0, -1, self.lt.reannounce_flags_t.ignore_min_interval)
                self.next_probe = now + PROBE_EVERY
            if self.peer_certs is not None and now >= self.next_renewal:
                # A long fetch or --seed-time outlives a T3's certificate: take the renewed one in time.
                self.next_renewal = now + RENEW_CHECK_EVERY
                try:
                    self.peer_certs.renew_if_due()
                except Exception as exc:  # noqa: BLE001 - the current certificate holds; tried again later
                    log.warning("peer certificate: renewal failed: %s", exc)
            if now >= next_report:
                if self.phase is WorkerPhase.SEEDING:
                    # Seeding: libtorrent posts no state update for uploads alone, so
                    # the status would stay as it was at completion and --seed-ratio
                    # would never be reached. Two cheap polls a second while seeding.
                    self.status = self.handle.status(0)
                    self.send(self.progress())
                else:
                    # Status arrives as a state_update_alert, not by polling.
                    self.ses.post_torrent_updates()
                next_report = now + self.spec.report_interval
            if now >= next_resume and self.phase is not WorkerPhase.FAILED:
                self.save_resume()
                next_resume = now + self.spec.resume_interval
            if os.getppid() != self.ppid:
                self.parent_gone = True  # orphaned (the parent was killed): save and leave
                break
        self.shutdown()

    # --- alerts: one handler each ------------------------------------------------------
    def _alert_table(self) -> Any:
        from torrents.servicekit import ltsession

        lt = self.lt
        return ltsession.Alerts({
            lt.state_update_alert: self._on_state_update, lt.torrent_finished_alert: self._on_finished,
            lt.piece_finished_alert: self._on_piece, lt.save_resume_data_alert: self._on_resume_data,
            lt.save_resume_data_failed_alert: self._on_resume_failed, lt.cache_flushed_alert: lambda a: self._flushed(),
            lt.peer_connect_alert: self._on_peer_connect, lt.peer_disconnected_alert: self._on_peer_disconnect,
            lt.hash_failed_alert: lambda a: self.ledger.hash_failed(), lt.peer_ban_alert: self._on_ban,
            lt.tracker_error_alert: self._on_tracker_error, lt.tracker_reply_alert: self._on_tracker_reply,
            lt.file_error_alert: self._on_file_error, lt.torrent_checked_alert: self._on_checked,
            lt.listen_failed_alert: self._on_listen_failed, lt.listen_succeeded_alert: self._on_listen,
            lt.torrent_error_alert: lambda a: self._fail("torrent", _filename(a) or "torrent", a.error.message()),
            lt.torrent_need_cert_alert: self._on_need_cert,
        })

    def _on_need_cert(self, a: Any) -> None:
        if self.peer_certs is not None:
            self.peer_certs.on_need_cert(a)

    def _on_state_update(self, a: Any) -> None:
        for st in a.status:
            self.status = st
        if self.status is not None:
            self._seeds_gone(self.status.num_seeds)
            # The first report after the check carries what is on disk per file: the parent's
            # "resuming: ... already verified" (one file_progress, not one per report).
            checked = not self.checked and str(self.status.state).rsplit(".", 1)[-1] not in events.CHECKING
            self.checked = self.checked or checked
            self.send(self.progress(files=checked, found=self._found(self.status.pieces) if checked else None))

    def _on_listen_failed(self, a: Any) -> None:
        # Listening everywhere, one address refusing (a link-local one, a port taken there) leaves the others.
        if self.spec.listen_ip == ANY:
            log.info("worker %d: cannot listen on %s (%s)", self.spec.index, _endpoint_of(a), a.error.message())
        else:
            self._fail("listen", self.spec.listen_ip, f"cannot listen ({a.error.message()})")

    def _on_checked(self, a: Any) -> None:
        self.check_done = True

    def _on_finished(self, a: Any) -> None:
        if self.phase is not WorkerPhase.FETCHING:
            return
        self.status = self.handle.status()
        if self.first_byte_at is None and self.status.total_payload_download > 0:
            self.first_byte_at = time.time()  # all of it came within one turn of the loop
        self._count_sources()
        self._attribute_rest()
        # Pieces pass their hash check while still in libtorrent's write queue: report
        # "finished" only once the cache is flushed (cache_flushed_alert), so the parent's
        # checksums read what is on disk. A flushing save_resume_data is not enough in 2.x: the
        # parent then read files short of their last writes (1,000 files of 32 KiB: exit 5 in 4
        # runs of 6; with flush_cache, 0 of 8).
        self.handle.save_resume_data(self.lt.torrent_handle.flush_disk_cache)
        self.pending_saves += 1
        self.handle.flush_cache()
        self.phase = WorkerPhase.FLUSHING

    def _on_piece(self, a: Any) -> None:
        # Saved every 0.5 s *and* every 1% of the share: on a fast link half a second is many
        # pieces, which a kill -9 would cost again.
        self.unsaved += self.piece_length
        if self.check_done and not self.checked:
            self.fetched.add(int(a.piece_index))
        if self.unsaved >= self.save_every and self.phase is not WorkerPhase.FAILED:
            self.save_resume()

    def _on_resume_data(self, a: Any) -> None:
        self.pending_saves = max(0, self.pending_saves - 1)
        self._write_resume(self.lt.write_resume_data_buf(a.params))

    def _on_resume_failed(self, a: Any) -> None:
        self.pending_saves = max(0, self.pending_saves - 1)

    def _peer_of(self, a: Any) -> tuple[tuple[str, int] | None, bytes]:
        """A peer alert's endpoint (a web seed's relay: the door it stands for) and peer id."""
        ep = getattr(a, "endpoint", None) or getattr(a, "ip", None)
        pid = a.pid.to_bytes() if getattr(a, "pid", None) is not None else b""
        return (self.relays.door_of((ep[0], ep[1])) if ep else None), pid

    def _on_peer_connect(self, a: Any) -> None:
        ep, pid = self._peer_of(a)
        self.connected = True  # an attempt (libtorrent posts it before the connection is made)
        if ep:
            self.ledger.connected(ep[0], ep[1], pid)
        self.connected_at = self.connected_at or time.time()

    def _on_peer_disconnect(self, a: Any) -> None:
        ep, pid = self._peer_of(a)
        fetching = self.phase is WorkerPhase.FETCHING
        if ep:  # connect_failed: refused, or timed out (a firewall that drops)
            self.ledger.disconnected(ep[0], ep[1], pid, connect_failed=fetching and a.op == self.lt.operation_t.connect)
        if fetching:
            if (ep and ep not in self.ledger.web_seeds and ep[0] not in self._let_go()
                    and self.ledger.remote(ep[0], self.ledger.key(*ep))):
                self.reannounce.lost()
            # A site that cannot read its replica drops its seed at once, between two status
            # updates: look now, not at the next one.
            self._seeds_gone(self.handle.status(0).num_seeds)

    def _on_ban(self, a: Any) -> None:
        self._banned(self.relays.door_of((a.endpoint[0], a.endpoint[1])))
        if self.web_urls:
            self.bans_seen = True
            self._banned_web_seeds()

    def _on_listen(self, a: Any) -> None:
        # An SSL torrent announces from the SSL sockets only.
        wanted = self.lt.socket_type_t.tcp_ssl if self.peer_certs is not None else self.lt.socket_type_t.tcp
        if a.socket_type == wanted:
            self.listening.add(_endpoint_of(a))

    def _unreachable_from_some(self, a: Any) -> bool:
        """Listening everywhere, libtorrent announces from each address, and one that has no route to the
        tracker (loopback, for a tracker on another host) is skipped: not the tracker's failure while
        another address may reach it. True for such a skip (said once every address has skipped)."""
        if self.spec.listen_ip != ANY or SKIPPED not in a.error.message():
            return False
        skipped = self.skipped.setdefault(a.tracker_url(), set())
        skipped.add(format_hostport(str(a.local_endpoint[0]), int(a.local_endpoint[1])))
        return not self.listening <= skipped

    def _on_tracker_error(self, a: Any) -> None:
        # A dead or refusing tracker is the usual reason for "0 seeds": say so rather than let
        # the user watch a still bar.
        if self._unreachable_from_some(a):
            return
        said = a.failure_reason()
        reason = said or a.error.message()
        # An https tracker whose certificate we cannot verify: final at once (our CAs do not
        # change while we run).
        untrusted = None if said else tls.libtorrent_problem(reason, tls.FLAG_HINT)
        # It answered with a reason twice (once may be a tracker that has not yet heard the
        # site's heartbeat for a dataset just published), or nobody listens there, every time.
        often = a.times_in_row >= (REASONS_DEFINITIVE if said else REFUSALS_DEFINITIVE)
        definitive = bool(untrusted) or often and (bool(said) or a.error.value() == errno.ECONNREFUSED)
        if not said and not untrusted:
            reason += bound_elsewhere(self.spec.listen_ip, a.tracker_url())
        if said and not definitive:
            # Ask again soon rather than after libtorrent's half-minute back-off.
            self.handle.force_reannounce(REASON_RECHECK, -1, self.lt.reannounce_flags_t.ignore_min_interval)
        self.send(events.TrackerReply(self.spec.index, False, a.tracker_url(), untrusted or reason, definitive))

    def _on_tracker_reply(self, a: Any) -> None:
        self.send(events.TrackerReply(self.spec.index, True, a.tracker_url(), f"{a.num_peers} peers"))

    def _on_file_error(self, a: Any) -> None:
        code = a.error.value()
        if not self.write_failed:
            self.write_failed = True
            # The saved state may claim pieces that are not on disk (see _recheck): out of the way,
            # where a rerun never reads it, its blocks kept for the state saved after the check.
            _replace(self.spec.resume_path, self.spec.stale_path)
        kind = "disk_full" if code in (errno.ENOSPC, errno.EDQUOT) else "file"
        problem = "disk full (free some space, then run bt-get again: it resumes)" if kind == "disk_full" \
            else a.error.message()
        self._fail(kind, _filename(a) or self.spec.save_path, problem)

    def _fail(self, kind: str, subject: str, problem: str) -> None:
        self.phase = WorkerPhase.FAILED
        self.send(events.WorkerFailed(self.spec.index, kind, subject, problem))

    def _flushed(self) -> None:
        """The cache flush after completion is done (cache_flushed_alert): the data is on disk, say finished."""
        if self.phase is WorkerPhase.FLUSHING:
            self.phase = WorkerPhase.SEEDING
            self.send(self.progress(events.Phase.FINISHED, files=True))

    def _seeds_gone(self, seeds: int) -> None:
        """No seed connected while fetching: every one left (a site that cannot read its replica stops
        seeding it), was banned, or could not be reached. Ask the tracker now (btget/reannounce.py), whose
        answer carries a site's seed or starts one, rather than wait out the announce interval. Not for
        the sites we let go ourselves (btget/siteshare.py): the tracker would only hand them back."""
        seedless = (self.had_seeds or self.connected) and self.phase is WorkerPhase.FETCHING
        if self.reannounce.due(time.monotonic(), seeds, seedless, let_go=len(self._let_go())):
            self.handle.force_reannounce(0, -1, self.lt.reannounce_flags_t.ignore_min_interval)
        self.had_seeds = seeds > 0

    def _shut_out_stalled(self, now: float) -> None:
        """A peer holding our requests that sends nothing (a hung site) is shut out for a while (btget/stall.py)."""
        from btget.stall import PeerSample

        changed = bool(self.stall.expire(now))
        if [ip for ip, until in self.shed.items() if until <= now]:
            self.shed = {ip: until for ip, until in self.shed.items() if until > now}
            changed = True
            if self.phase is WorkerPhase.FETCHING:  # the IP filter dropped the sites shed: ask for them again
                self.handle.force_reannounce(0, -1, self.lt.reannounce_flags_t.ignore_min_interval)
        if self.phase is WorkerPhase.FETCHING:
            try:
                peers = self.handle.get_peer_info()
            except RuntimeError:
                peers = []
            choked = self.lt.peer_info.remote_choked  # it chokes us (`choked`: we choke it)
            seed = self.lt.peer_info.seed
            # Without the sites' list (site share off, /api/sites not answered) a seed is taken for a site.
            samples = [PeerSample(p.ip[0], p.ip[1], p.total_download, p.download_queue_length, bool(p.flags & choked),
                                  p.total_upload, p.num_pieces,
                                  site=(format_hostport(p.ip[0], p.ip[1]) in self.site_keys if self.site_keys
                                        else bool(p.flags & seed)))
                       for p in peers if p.connection_type not in self._web_seed_types]
            stalled = self.stall.step(now, samples)
            for ip in stalled:
                log.info("worker %d: %s holds our requests and nothing moved either way: shut out for %.0f s",
                         self.spec.index, ip, self.stall.ban)
            changed |= bool(stalled)
        if changed:
            self._set_ip_filter()

    def _shed_sites(self, now: float, peers: list) -> bool:
        """Let go of the sites unchoking us beyond our share of them or past their turn, and of those
        whose pieces the T3s around us can give us; ask first for the slices of the sites we keep
        (btget/siteshare.py). True if the IP filter changed."""
        if not self.slices:
            return False
        if not peers:
            # Nobody left around us (the T3s that fed us left, or every connection dropped): the sites we
            # spared for them are the only source, so they come back now, not after a stall.
            return self._take_back_spared()
        from btget import siteshare

        lt = self.lt
        keys, slices = self.site_keys, self.slices
        seed, choked = lt.peer_info.seed, lt.peer_info.remote_choked
        site_peers, t3s, downloading = [], [], 1
        for p in peers:
            if p.connection_type in self._web_seed_types:
                continue
            key = format_hostport(p.ip[0], p.ip[1])
            if key in keys:
                site_peers.append(siteshare.SitePeer(p.ip[0], p.total_download, not p.flags & choked))
            elif self.ledger.remote(p.ip[0], key):
                t3s.append(p)
                downloading += not p.flags & seed
        self.paces.see(now, site_peers)
        held = self.paces.held(site_peers)
        shed = []
        crowd = self.whole and siteshare.busy(len(slices), 1 + len(t3s), downloading)  # else every site is kept
        if crowd and now >= self.next_share and self.paces.judged(site_peers):
            # The share rule looks every STALL_CHECK, on half a second of bytes: looking every 50 ms, T3s on
            # loopback shed sites on their first bursts and the sites' slots went round (bench_egress, 8
            # clients: 1.91 copies against 1.14-1.31).
            self.next_share = now + STALL_CHECK
            shed = [ip for ip in siteshare.to_shed(site_peers, len(site_peers), downloading, self.whole)
                    if ip not in held]
        shed += [ip for ip in siteshare.turns_done(site_peers, len(slices), 1 + len(t3s), downloading, self.whole,
                                                   self.paces.slice_bytes)
                 if ip not in held and ip not in self.shed and ip not in shed]
        for ip in shed:
            self.shed[ip] = now + siteshare.SHED_FOR
        spared = set()
        if not crowd:
            self.next_cover = 0.0
        elif now < self.next_cover:
            spared = self.spared
        else:
            # As often as the samples (a site unchoking a T3 that should let it go sends
            # ~0.6 MB in 50 ms: read every 0.25 s, the sites sent 1.85 copies instead of
            # 1.70), but at most 1% of a core: 25,000 pieces cost ~0.3 ms a peer.
            took = time.perf_counter()
            cover = self._cover(t3s)
            self.next_cover = now + COVER_SHARE * (time.perf_counter() - took)
            fed_by = siteshare.feeding(slices, site_peers, cover)
            self.fed_by = self.fed_by if fed_by is None else fed_by
            self.helping = siteshare.helps(len(slices), self.fed_by, cover, self.helping,
                                           self._clearing_time(now, cover))
            spared = set(siteshare.to_spare(slices, 1 + len(t3s), downloading, self.whole, cover,
                                            slices[self.fed_by] if self.helping else None)) - held
        returned = self.spared - spared
        changed = bool(shed) or spared != self.spared
        self.spared = spared
        if returned and self.phase is WorkerPhase.FETCHING:  # the IP filter dropped them: ask for them again
            self.handle.force_reannounce(0, -1, lt.reannounce_flags_t.ignore_min_interval)
        if self.whole:
            gone = set(self.shed) | spared
            kept = {slices.index(p.ip) for p in site_peers if p.unchokes_us and p.ip not in gone}
            if kept != self.kept_slices:
                priorities = siteshare.priorities(self.num_pieces, len(slices), kept)
                self.handle.prioritize_pieces(priorities or [siteshare.NORMAL] * self.num_pieces)
                self.kept_slices = kept
        return changed

    def _take_back_spared(self) -> bool:
        """Let every spared site connect again and ask the tracker for them at once. True if any was."""
        if not self.spared:
            return False
        self.spared = set()
        if self.phase is WorkerPhase.FETCHING:
            self.handle.force_reannounce(0, -1, self.lt.reannounce_flags_t.ignore_min_interval)
        return True

    def _clearing_time(self, now: float, cover: Any) -> float:
        """When the pieces held nowhere around us will be held somewhere, at their pace of the last second."""
        from btget.siteshare import PACE_OVER, clearing_time

        sample = (now, (cover.lacking & ~cover.held).bit_count())
        self.nowhere_seen.append(sample)
        while len(self.nowhere_seen) > 2 and now - self.nowhere_seen[1][0] >= PACE_OVER:
            self.nowhere_seen.popleft()
        return clearing_time(self.nowhere_seen[0], sample)

    def _cover(self, t3s: list) -> Any:
        """What we lack and what the T3s around us hold (btget/siteshare.py)."""
        from btget.siteshare import Cover, mask, span

        every = span(0, self.num_pieces)
        lacking = every & ~mask(self.handle.status(self.lt.status_flags_t.query_pieces).pieces)
        held = 0
        for p in t3s:
            held |= every if p.flags & self.lt.peer_info.seed else mask(p.pieces)
            if not lacking & ~held:
                break
        return Cover(self.num_pieces, lacking, held, self.piece_length)

    def _let_go(self) -> set[str]:
        """The site addresses we let go ourselves (btget/siteshare.py): shed for a while, or spared."""
        return set(self.shed) | self.spared

    def _set_ip_filter(self) -> None:
        # The IP filter disconnects a blocked peer at once and gives its blocks back to the picker.
        rules = self.lt.ip_filter()
        for ip in set(self.stall.banned) | self.banned_ips | self._let_go():
            rules.add_rule(ip, ip, 1)
        self.ses.set_ip_filter(rules)

    def _banned(self, endpoint: tuple[str, int]) -> None:
        """libtorrent banned a peer for corrupt pieces (it alone sent a piece that failed, or took part
        in too many). It bans the endpoint; the same peer connecting from another port would be a new
        peer to it (several connections per address are allowed, for loopback and NAT), so the address
        is shut out for the rest of the run: unless it is our own, which our sibling workers share."""
        self.reannounce.lost()
        self.ledger.ban(endpoint[0], endpoint[1])
        # A web seed's address is left open: libtorrent dropped the web seed, and the site's peer wire
        # there checks every piece before sending it (seed mode).
        if (endpoint[0] not in own_addresses(self.spec.listen_ip) and endpoint[0] not in self.banned_ips
                and (endpoint[0], endpoint[1]) not in self.ledger.web_seeds):
            self.banned_ips.add(endpoint[0])
            self._set_ip_filter()

    def _set_rates(self, rates: tuple[int, int]) -> None:
        """A cap is for the campus link: every peer counts against it but the sibling workers,
        which listen on our own address (ltsession.limit_everyone)."""
        from torrents.servicekit import ltsession

        # The payload is capped, not libtorrent's estimate of it with IP overhead (which took
        # 0.87-0.90 of a 50 or 100 Mbit/s cap on shaped links): what the user asked for is what
        # --json and the display then show.
        self.ses.apply_settings({"download_rate_limit": rates[0], "upload_rate_limit": rates[1],
                                 "rate_limit_ip_overhead": False})
        ltsession.limit_everyone(self.ses, exempt=own_addresses(self.spec.listen_ip))

    def _set_web_seeds(self, command: events.WebSeeds) -> None:
        """Use exactly the web seeds the parent named (adding and removing url seeds on the handle)."""
        wanted = set(command.urls)
        for url in sorted(self.web_urls - wanted):
            self.handle.remove_url_seed(self.relays.local(url))  # its connection closes; its requests go back
        for url in sorted(wanted - self.web_urls):
            self.handle.add_url_seed(self._relayed(url))
        self.web_urls = wanted
        self.ledger.web_seeds |= _endpoints(command.urls)
        self.probe = command.probe
        self.next_probe = time.monotonic() + PROBE_EVERY

    def _banned_web_seeds(self, also: set[str] = frozenset()) -> None:
        """Web seeds that sent pieces failing their SHA1 check: those libtorrent banned (it removes them
        from the torrent, so they are the URLs gone from the handle; looked at on the ban alert and
        again every STALL_CHECK, in case the removal came later) and `also` (dropped here)."""
        for url in also & self.web_urls:
            self.handle.remove_url_seed(self.relays.local(url))
        gone = (self.web_urls - {self.relays.original(u) for u in self.handle.url_seeds()}) | (also & self.web_urls)
        for url in sorted(gone):
            self.send(events.WebSeedBanned(self.spec.index, url))
        self.web_urls -= gone

    def _relayed(self, url: str) -> str:
        """The URL libtorrent is given for web seed `url`: its relay's, counted as a web seed's endpoint."""
        local = self.relays.local(url)
        self.ledger.web_seeds |= self.relays.endpoints
        return local

    # --- resume state ---------------------------------------------------------------
    def save_resume(self, force: bool = False) -> None:
        self.unsaved = 0
        if force or self.handle.need_save_resume_data():
            self.handle.save_resume_data(self.lt.torrent_handle.flush_disk_cache)
            self.pending_saves += 1

    def _write_resume(self, data: bytes) -> None:
        if self.write_failed and not self.rechecked:
            return  # a state asked for before the failure: it may claim what did not reach the disk
        write_resume(self.spec.resume_path, data, room=self.spec.stale_path if self.write_failed else None)

    def shutdown(self) -> None:
        deadline = time.monotonic() + STOP_WITHIN
        if self.write_failed:
            self._recheck(deadline - SAVE_WITHIN)
        # The peers and byte counts before the pause, which ends the connections.
        self.status = counted = self.handle.status()
        if self.phase is WorkerPhase.FETCHING:
            self._count_sources()
            self._attribute_rest()
        # Paused before the state is saved and the files counted, so that the last report counts what
        # the saved state holds: pieces that passed their check after the count still reached the disk,
        # a rerun found them (btget/recover.py), and its "resuming: ..." said more than the summary had.
        if not self.handle.flags() & self.lt.torrent_flags.paused:
            self.handle.pause()
            self._wait_for(self.lt.torrent_paused_alert, min(SAVE_WITHIN, deadline - SAVE_WITHIN - time.monotonic()))
        self.save_resume(force=True)
        while self.pending_saves and time.monotonic() < deadline:
            if self.ses.wait_for_alert(200) is not None:
                self.alerts.drain(self.ses)
        remove_stale(self.spec)  # unused: the check was cut short, or a new state was written
        self.status = counted
        self.send(self.progress(events.Phase.STOPPED, files=True))
        self.ses.pause()
        self.relays.close()
        if self.alerts.unhandled:
            log.debug("worker %d: alerts not handled: %s", self.spec.index, self.alerts.unhandled)

    def _recheck(self, until: float) -> None:
        """After a failed write, find what is on disk by hashing the files, by `until` (monotonic).

        libtorrent counts a piece once it passed its check, before it is written. While it is fetching,
        it takes back a piece whose write fails (60 MiB into 40 MiB: 165 pieces passed, 159 written and
        counted); but once it holds every piece it keeps no record to take one back from, and says 60 MiB
        with 39.75 on disk (1 run in 5 here, when the writes lag behind the transfer). So the files are
        checked: 0.1-0.15 s for 40 MiB. Pausing first lets the writes under way end (a check would read
        their blocks from the write queue); the full disk keeps libtorrent in upload mode, so resuming to
        check fetches nothing. Without a check (cut short), no state is saved: the rerun checks."""
        lt = self.lt
        self.handle.pause()
        if self._wait_for(lt.torrent_paused_alert, min(5.0, until - time.monotonic())):
            self.handle.force_recheck()
            self.handle.resume()
            self.rechecked = self._wait_for(lt.torrent_checked_alert, until - time.monotonic())
        self.status = self.handle.status()

    def _wait_for(self, kind: type, seconds: float) -> bool:
        """Handle alerts until one of `kind` comes (True) or `seconds` pass (False)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.ses.wait_for_alert(200) is not None:
                alerts = self.alerts.drain(self.ses)
                if any(isinstance(a, kind) for a in alerts):
                    return True
        return False

    # --- reports --------------------------------------------------------------------
    def _count_sources(self) -> list:
        """Sample each peer's bytes received (btget/sources.py); the peers, as libtorrent describes them."""
        try:
            peers = self.handle.get_peer_info()
        except RuntimeError:
            return []
        info = self.lt.peer_info
        busy = info.connecting | info.handshake
        door = self.relays.door_of
        connections = [sources.Connection(*door((p.ip[0], p.ip[1])), p.total_download, p.pid.to_bytes(),
                                          web_seed=p.connection_type in self._web_seed_types,
                                          seed=bool(p.flags & info.seed), busy=bool(p.flags & busy),
                                          hashfails=p.num_hashfails) for p in peers]
        self.ledger.sample(connections)
        bad = {(c.ip, c.port) for c in connections if c.web_seed and c.hashfails >= WEB_SEED_HASHFAILS}
        if bad:
            self._banned_web_seeds({u for u in self.web_urls if _endpoints((u,)) & bad})
        return peers

    def _leechers(self) -> int:
        """BitTorrent peers connected to us that are still downloading (web seeds and seeds aside)."""
        try:
            peers = self.handle.get_peer_info()
        except RuntimeError:
            return 0
        info = self.lt.peer_info
        gone = info.seed | info.connecting | info.handshake
        return sum(1 for p in peers if not p.flags & gone and p.connection_type not in self._web_seed_types)

    def _attribute_rest(self) -> None:
        self.ledger.attribute_rest(self.status.total_payload_download if self.status else 0, self.piece_length)

    def progress(self, phase: events.Phase = events.Phase.RUNNING, files: bool = False,
                 found: int | None = None) -> events.Progress:
        st = self.status
        done = self._file_bytes() if files else None
        if st is None:
            return events.Progress(self.spec.index, phase, hash_failures=self.ledger.hash_failures,
                                   sources=dict(self.ledger.sources), connected=self.connected, connected_at=self.connected_at,
                                   files=done, found=found, **self.ledger.named())
        return events.Progress(
            worker=self.spec.index, phase=phase, done=st.total_wanted_done, wanted=st.total_wanted,
            rate=st.download_payload_rate, up_rate=st.upload_payload_rate, peers=st.num_peers, seeds=st.num_seeds,
            downloaded=st.total_payload_download, uploaded=st.total_payload_upload,
            redundant=st.total_redundant_bytes, hash_failures=self.ledger.hash_failures,
            sources=dict(self.ledger.sources),
            state=str(st.state).rsplit(".", 1)[-1], flushed=self.phase is WorkerPhase.SEEDING,
            first_byte_at=self.first_byte_at, connected=self.connected, connected_at=self.connected_at,
            files=done, found=found, leechers=self._leechers() if self.phase is WorkerPhase.SEEDING else 0,
            **self.ledger.named())

    def _file_bytes(self) -> dict[int, int]:
        """Bytes of each wanted file that verified pieces hold. libtorrent's file_progress counts a piece once
        it passed its check, also when its write then failed (a full disk: 41.25 MiB counted, 39.75 on disk);
        the pieces it has (status.pieces) are those it wrote, so after a failed write those count."""
        if not self.write_failed:
            done = self.handle.file_progress(self.lt.torrent_handle.piece_granularity)
            return {i: done[i] for i in self.spec.wanted}
        return self._held_bytes(self.handle.status(self.lt.status_flags_t.query_pieces).pieces)

    def _held_bytes(self, have: Any) -> dict[int, int]:
        """Bytes of each wanted file that the pieces marked in `have` hold: a walk of the wanted files, each
        over its own pieces. Never a lookup in the wanted tuple per file of the torrent: that is quadratic in
        the file count, and blocked the worker for most of a 78,579-file fetch."""
        return {i: self.layout.covered(i, have) for i in self.spec.wanted}

    def _found(self, pieces: Any) -> int:
        """Wanted bytes that the pieces of a status (`pieces`, one flag each) held before this run fetched
        any: a rerun's "resuming: ..." (btget/readout.py). The status lags the check by up to a report
        interval, in which the run completes pieces, some from blocks the last run left on disk."""
        return sum(self._held_bytes([bool(v) and i not in self.fetched for i, v in enumerate(pieces)]).values())

    def send(self, event: events.WorkerEvent) -> None:
        if self.parent_gone:
            return
        try:
            self.conn.send(event)
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            self.parent_gone = True
            self.stop["signal"] = "orphaned"


def peer_certs_of(spec: WorkerSpec) -> Any:
    """The share's PeerCerts (a restricted dataset), renewed from the repository when it gave the
    certificate, else from the files again; None for a public dataset. Shared with `bt-get --serve`."""
    if not spec.peer_cert:
        return None
    from torrents.servicekit import ltsession

    certs = ltsession.peer_certs(*spec.peer_cert, "get")
    if spec.peer_cert_repo:
        from btget import peercert

        certs.load = peercert.renewer(*spec.peer_cert_repo, ltsession.torrent_info(spec.torrent).name())
    return certs


def torrent_params(lt: Any, spec: WorkerSpec) -> Any:
    """add_torrent_params for a share: its saved resume state if any, its files wanted, the rest not.

    Shared with `bt-get --serve` (btget.serve), which keeps its state the same way.
    """
    from torrents.servicekit import ltsession

    ti = ltsession.torrent_info(spec.torrent)
    # The torrent's own web seeds are the parent's to use (btget/webseeds.py), never libtorrent's at once.
    ti.set_web_seeds([])
    atp = None
    if not spec.recheck and os.path.isfile(spec.resume_path):
        try:
            with open(spec.resume_path, "rb") as f:
                atp = lt.read_resume_data(f.read())
            if str(atp.info_hashes.v1) != str(ti.info_hashes().v1):
                atp = None  # state of another version of the dataset
        except (RuntimeError, OSError) as exc:
            log.warning("%s: ignoring unreadable resume state (%s)", spec.resume_path, exc)
            atp = None
    resumed = atp is not None
    # Every file under the name its info dict gives (libtorrent renames case twins).
    atp = ltsession.torrent_params(ti, spec.save_path, spec.own_names, atp)
    os.makedirs(spec.part_dir, exist_ok=True)
    atp.part_file_dir = spec.part_dir
    wanted = set(spec.wanted)
    atp.renamed_files = {**atp.renamed_files, **elsewhere(ti, wanted, spec.part_dir)}
    if resumed:
        # What arrived after the last save that reached the disk is there all the same (btget/recover.py).
        share = sum(ti.layout().file_size(i) for i in wanted)
        found = recover.find(ti, spec.save_path, spec.own_names, list(atp.have_pieces), wanted,
                             RECOVER_BUDGET + share // 50)
        if found:
            recover.claim(atp, found, ti.num_pieces())
    atp.file_priorities = [4 if i in wanted else 0 for i in range(ti.num_files())]
    atp.url_seeds = list(spec.web_seeds)
    flags = atp.flags
    flags &= ~lt.torrent_flags.paused
    flags &= ~lt.torrent_flags.auto_managed
    flags &= ~lt.torrent_flags.seed_mode
    # A full disk put the torrent in upload mode (no more downloading); the state saved then says so.
    flags &= ~lt.torrent_flags.upload_mode
    atp.flags = flags
    return atp


def elsewhere(ti: Any, wanted: set[int], part_dir: str) -> dict[int, str]:
    """Other shares' files renamed to paths of this share's that never exist.

    The bytes of a piece that straddles into another share's file belong in this share's part
    file. libtorrent puts them there only while that file does not exist: a priority-0 file
    found on disk is read and written in place (its rule for torrents from before part files).
    A rerun then served its straddling pieces from the sibling's file, holes where the sibling
    had not yet written, and the sibling banned it for corrupt pieces (30 hash failures, the
    piece never fetched, in tests/btget/test_resume.py). Renamed, such a file is never found,
    and no worker ever touches a file of another share. (Pad files are renamed too: libtorrent
    never opens one, and skipping them cost 80 ms per 100,000 files.)
    """
    prefix = os.path.join(part_dir, ELSEWHERE, "")
    return {i: prefix + str(i) for i in range(ti.num_files()) if i not in wanted}


def write_resume(path: str, data: bytes, room: str | None = None) -> None:
    """Resume state, written to a temporary name and renamed: a kill at any instant
    leaves either the old state or the new one, never half of one.

    On a full disk the new state is written in place instead, in the blocks the
    old one holds (`path`, else `room`, renamed to `path` then): a state saved before
    the disk filled would make the rerun fetch again all that arrived since (issue
    28: 51.3-54.7 MiB fetched again where 39.3 MiB were intact). A kill in the middle
    of that leaves a state libtorrent cannot read: the rerun then hashes what is on
    disk (slower, not wrong); a state that does not fit is removed, with the same
    effect.
    """
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return
    except OSError as exc:
        _remove(tmp)
        target = next((p for p in (path, room) if p and os.path.isfile(p)), None)
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or target is None:
            log.warning("%s: cannot save resume state (%s)", path, exc.strerror)
            return
    try:
        with open(target, "r+b") as f:
            f.write(data)
            f.truncate()
            f.flush()
            os.fsync(f.fileno())
        _replace(target, path)
    except OSError as exc:
        _remove(target)  # half of a state: none is better (libtorrent then checks the files)
        log.warning("%s: cannot save resume state (%s): the next run checks the files on disk", path, exc.strerror)


def _replace(src: str, dst: str) -> None:
    try:
        os.replace(src, dst)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("%s: cannot rename to %s (%s)", src, dst, exc.strerror)


def remove_stale(spec: WorkerSpec) -> None:
    """Drop the state kept aside after a failed write: the rerun then checks the files instead."""
    _remove(spec.stale_path)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("%s: cannot remove (%s)", path, exc.strerror)


def _endpoints(urls: tuple[str, ...]) -> set[tuple[str, int]]:
    """(host, port) of http(s) URLs."""
    return {ep for ep in map(url_endpoint, urls) if ep[0]}


def bound_elsewhere(listen_ip: str, url: str) -> str:
    """Why a tracker may be out of reach, when it is that: our sessions are bound to `listen_ip` (--listen)
    and this host reaches the tracker from another address, which a bound connection cannot use ("" when
    not bound, or bound to the right one)."""
    from torrents.hostport import is_local, source_address

    if listen_ip == ANY:
        return ""
    host, port = url_endpoint(url)
    try:
        source = source_address(host, port)
    except (OSError, ValueError):
        return f" (bt-get is bound to {listen_ip} by --listen/[get] listen, and this host has no route to {host})"
    if source == listen_ip or (":" in source) == (":" in listen_ip) and is_local(host):
        return ""  # bound or not, a connection to this host's own address stays on it
    return f" (bt-get is bound to {listen_ip} by --listen/[get] listen, but this host reaches {host} " \
           f"from {source}: leave listen unset to use every address)"


def _endpoint_of(alert: Any) -> str:
    """A listen alert's address and port, as the user would write them."""
    from torrents.hostport import format_hostport

    return format_hostport(str(alert.address), int(alert.port))


def _filename(alert: Any) -> str:
    # A method in libtorrent 2.x bindings, an attribute in older ones.
    name = getattr(alert, "filename", "")
    return str(name() if callable(name) else name)
