"""One bt-get worker: a libtorrent session in its own process, fetching one share.

The parent (btget.transfer.download) starts `run(spec, conn)` in a forked process
and talks over a duplex pipe: the worker sends events and receives commands,
each a dataclass of btget.events (Listening, Progress, WorkerFailed,
TrackerReply, WebSeedBanned; Connect, WebSeeds, Stop). The worker never
draws anything and decides nothing about the run: the parent owns the
terminal and the outcome, and when to use web seeds (btget/transfer/webseeds.py): a
torrent's own url-list is never used by libtorrent on its own.

Layout on disk: save_path is DIR, so libtorrent writes DIR/NAME/<LFN>.
Everything of bt-get's own lives in DIR/NAME/.bt-get/ (a dot name, which
no dataset reader takes for a file): one resume file per share, and the
share's part file (libtorrent keeps there the bytes of pieces that straddle
into files of other shares), in a directory per share so that two workers
never write the same part file.
"""

from __future__ import annotations

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
from torrents.hostport import ANY, format_hostport, own_addresses
from torrents.proxyenv import NONE, Proxies, Proxy

from btget import events
from btget.resolve.bearer import TokenSource
from btget.worker import peersteer, resumesaves, sharestate, sources, steering, trackerwatch, webseeduse

from btget.worker.reannounce import Reannounce

log = logging.getLogger("btget.worker")

RESUME_SUFFIX = ".resume"
STALL_CHECK = 0.5  # seconds between looks for web seeds libtorrent banned (it may remove one late)
RENEW_CHECK_EVERY = 5.0  # seconds between looks at whether the peer certificate is due for renewal
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
    site_peers: tuple[str, ...] = ()  # the sites' seeds, 'ip:port' (the tracker's /api/sites): btget/worker/siteshare.py
    prefer_ips: tuple[str, ...] = ()  # the addresses of the sites the user prefers (--prefer-site): btget/worker/steering.py
    exclude_ips: tuple[str, ...] = ()  # and of those left out (--exclude-site): never connected
    rates: tuple[int, int] = (0, 0)  # its part of the run's caps, (download, upload) bytes/s; 0: none
    proxies: Proxies = NONE  # the web seeds' proxies, for the relay (torrents/proxyenv.py)
    tracker_proxy: Proxy | None = None  # the proxy libtorrent announces through (btget/resolve/reach.py)
    token: TokenSource | None = None  # a members-only dataset: the user's token, sent to its web seeds
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

        self.lt = lt
        self.spec = spec
        self.conn = conn
        self.stop = stop
        # Bytes per source and what is known of each peer (btget/worker/sources.py); web seeds (given and
        # the torrent's url-list) by endpoint, so that one is never taken for a sibling worker.
        self.ledger = sources.Ledger(spec.listen_ip, spec.peer_prefix, webseeduse.endpoints(spec.web_seeds + spec.url_list))
        self.phase = WorkerPhase.FETCHING
        self.parent_gone = False
        self.ppid = os.getppid()
        self.status: Any = None
        self.first_byte_at: float | None = None  # time.time() when the first payload byte arrived
        self.checked = False  # libtorrent has read what is on disk (resume state, or --check's hashing)
        self.had_seeds = False
        self.connected = False  # some peer connected at some point (sent to the parent)
        self.connected_at: float | None = None  # time.time() of the first peer connection
        self.trackers = trackerwatch.TrackerWatch(spec.index, spec.listen_ip)
        self.reannounce = Reannounce()  # when losing every seed asks the tracker again
        self.web = webseeduse.WebSeedUse(spec.index, self.ledger, spec.web_seeds, spec.proxies, spec.token)
        self.saves = resumesaves.ResumeSaves(lt, spec)

        self.alerts = self._alert_table()
        # Pieces fetched between the check's end (torrent_checked_alert; libtorrent also says piece_finished
        # for each piece of the resume state it reads) and the first report after it.
        self.check_done = False
        self.fetched: set[int] = set()
        self._web_seed_types = (lt.peer_info.web_seed, lt.peer_info.http_seed)
        self.peer_certs = peer_certs_of(spec)
        self.next_renewal = 0.0
        self.ses = self._session()
        marks = {"session": time.time()}
        atp = self._params()
        self.handle = self.web.handle = self.saves.handle = self.ses.add_torrent(atp)
        marks["torrent_added"] = time.time()
        # It fetches every file of the torrent unless the parent gave it a part (download.run decides, once).
        self.steer = peersteer.PeerSteer(lt, self.ses, self.handle, spec, self.ledger, pieces=atp.ti.num_pieces(),
                                         piece_bytes=self.piece_length)
        # Sibling workers find each other on this host's loopback when listening everywhere; a restricted
        # dataset's on the SSL socket, the only one its SSL torrent takes peers on.
        port = self.ses.ssl_listen_port() if self.peer_certs else self.ses.listen_port()
        self.send(events.Listening(spec.index, own_addresses(spec.listen_ip)[0], port, marks))
        for peer in spec.peers:
            self.handle.connect_peer(peer)

    # --- set-up -------------------------------------------------------------------
    def _session(self) -> Any:
        from torrents.servicekit import ltsession

        spec = self.spec
        # piece_finished_alert (piece_progress) drives the byte-based resume saves.
        extra = {"connections_limit": spec.max_connections,
                 "alert_mask": int(ltsession.ALERTS | self.lt.alert.category_t.piece_progress_notification),
                 **({"peer_fingerprint": spec.peer_fingerprint} if spec.peer_fingerprint else {}),
                 **ltsession.proxy_settings(spec.tracker_proxy)}
        ses = ltsession.session(spec.listen_ip, 0, ssl_port=0 if self.peer_certs else None, **extra)
        if any(spec.rates):
            self._set_rates(spec.rates, ses)
        return ses

    def _params(self) -> Any:
        atp = sharestate.torrent_params(self.lt, self.spec)
        if self.peer_certs is not None:
            self.peer_certs.add(atp)  # the root certificate at add time: the info-hash is the public one
        atp.url_seeds = [self.web.relayed(u) for u in self.spec.web_seeds]
        files = atp.ti.layout()
        self.piece_length = atp.ti.piece_length()
        self.file_sizes = [files.file_size(i) for i in range(files.num_files())]
        self.saves.sized(sum(self.file_sizes[i] for i in self.spec.wanted), self.piece_length)
        from btget.swarmread.streaming import PieceMap

        self.layout = PieceMap(self.file_sizes, self.piece_length)
        return atp

    # --- main loop ------------------------------------------------------------------
    def loop(self) -> None:
        next_report = next_sample = next_stall = 0.0
        next_resume = time.monotonic() + self.spec.resume_interval
        while self.stop["signal"] is None:
            if self.ses.wait_for_alert(50) is not None:
                self.alerts.drain(self.ses)
            self._commands()
            fetching = self.phase is WorkerPhase.FETCHING
            if self.first_byte_at is None and fetching:
                # Polled here, not taken from a state_update_alert: those come
                # every report_interval (0.5 s), too coarse for a first byte that
                # arrives 50-80 ms after start. Only until that byte: one cheap
                # h.status() per turn of this 50 ms loop, then never again.
                if self.handle.status(0).total_payload_download > 0:
                    self.first_byte_at = time.time()
            now = time.monotonic()
            if now >= next_sample:
                # get_peer_info is the only source of per-peer byte counts, and
                # a seed hangs up the moment we complete: sample often, so
                # little of a connection's last stretch goes uncounted. The sites are
                # steered as often: one unchoking us is told within a turn which slice
                # to send first, before its queue fills with other pieces.
                self.steer.sample(now, self._count_sources() if fetching else [], fetching)
                next_sample = now + steering.SAMPLE_EVERY
            if now >= next_stall:
                self._say(self.web.recheck())
                next_stall = now + STALL_CHECK
            if fetching and self.web.probe_due(now):
                self.handle.force_reannounce(0, -1, self.lt.reannounce_flags_t.ignore_min_interval)
            if self.peer_certs is not None and now >= self.next_renewal:
                self.next_renewal = now + RENEW_CHECK_EVERY
                self._renew()
            if now >= next_report:
                self._report()
                next_report = now + self.spec.report_interval
            if now >= next_resume and self.phase is not WorkerPhase.FAILED:
                self.saves.save()
                next_resume = now + self.spec.resume_interval
            if os.getppid() != self.ppid:
                self.parent_gone = True  # orphaned (the parent was killed): save and leave
                break
        self.shutdown()

    def _renew(self) -> None:
        """A long fetch or --seed-time outlives a T3's certificate: take the renewed one in time."""
        try:
            self.peer_certs.renew_if_due()
        except Exception as exc:  # noqa: BLE001 - the current certificate holds; tried again later
            log.warning("peer certificate: renewal failed: %s", exc)

    def _commands(self) -> None:
        """Carry out what the parent sent (btget/events.py)."""
        while not self.parent_gone and self.conn.poll():
            try:
                command = self.conn.recv()
            except (EOFError, OSError):
                # The parent died (kill -9): save what we have and leave.
                self.parent_gone = True
                self.stop["signal"] = "orphaned"
                return
            if isinstance(command, events.Stop):
                self.stop["signal"] = "stop"
            elif isinstance(command, events.Connect):
                self.ledger.introduce(command.peers)
                for peer in command.peers:
                    self.handle.connect_peer(peer)
            elif isinstance(command, events.WebSeeds):
                self.web.use(command, time.monotonic())
            elif isinstance(command, events.Rates):
                self._set_rates((command.download, command.upload), self.ses)

    def _report(self) -> None:
        if self.phase is WorkerPhase.SEEDING:
            # Seeding: libtorrent posts no state update for uploads alone, so
            # the status would stay as it was at completion and --seed-ratio
            # would never be reached. Two cheap polls a second while seeding.
            self.status = self.handle.status(0)
            self.send(self.progress())
        else:
            # Status arrives as a state_update_alert, not by polling.
            self.ses.post_torrent_updates()

    # --- alerts: one handler each ------------------------------------------------------
    def _alert_table(self) -> Any:
        from torrents.servicekit import ltsession

        lt = self.lt
        return ltsession.Alerts({
            lt.state_update_alert: self._on_state_update, lt.torrent_finished_alert: self._on_finished,
            lt.piece_finished_alert: self._on_piece, lt.save_resume_data_alert: lambda a: self.saves.answered(a.params),
            lt.save_resume_data_failed_alert: lambda a: self.saves.answered(),
            lt.cache_flushed_alert: lambda a: self._flushed(),
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
        # parent then read files short of their last writes (docs/benchmarks.md "rucio").
        self.saves.save(force=True)
        self.handle.flush_cache()
        self.phase = WorkerPhase.FLUSHING

    def _on_piece(self, a: Any) -> None:
        if self.check_done and not self.checked:
            self.fetched.add(int(a.piece_index))
        self.saves.piece_done(may_save=self.phase is not WorkerPhase.FAILED)

    def _peer_of(self, a: Any) -> tuple[tuple[str, int] | None, bytes]:
        """A peer alert's endpoint (a web seed's relay: the door it stands for) and peer id."""
        ep = getattr(a, "endpoint", None) or getattr(a, "ip", None)
        pid = a.pid.to_bytes() if getattr(a, "pid", None) is not None else b""
        return (self.web.relays.door_of((ep[0], ep[1])) if ep else None), pid

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
            if (ep and ep not in self.ledger.web_seeds and ep[0] not in self.steer.let_go()
                    and self.ledger.remote(ep[0], self.ledger.key(*ep))):
                self.reannounce.lost()
            # A site that cannot read its replica drops its seed at once, between two status
            # updates: look now, not at the next one.
            self._seeds_gone(self.handle.status(0).num_seeds)

    def _on_ban(self, a: Any) -> None:
        self._banned(self.web.relays.door_of((a.endpoint[0], a.endpoint[1])))
        self._say(self.web.peer_banned())

    def _on_listen(self, a: Any) -> None:
        # An SSL torrent announces from the SSL sockets only.
        wanted = self.lt.socket_type_t.tcp_ssl if self.peer_certs is not None else self.lt.socket_type_t.tcp
        if a.socket_type == wanted:
            self.trackers.listening.add(_endpoint_of(a))

    def _on_tracker_error(self, a: Any) -> None:
        reply, again = self.trackers.failed(trackerwatch.Failure(
            a.tracker_url(), a.failure_reason(), a.error.message(), a.error.value(), a.times_in_row,
            format_hostport(str(a.local_endpoint[0]), int(a.local_endpoint[1]))))
        if again is not None:
            self.handle.force_reannounce(again, -1, self.lt.reannounce_flags_t.ignore_min_interval)
        if reply is not None:
            self.send(reply)

    def _on_tracker_reply(self, a: Any) -> None:
        self.send(events.TrackerReply(self.spec.index, True, a.tracker_url(), f"{a.num_peers} peers"))

    def _on_file_error(self, a: Any) -> None:
        code = a.error.value()
        self.saves.failed_write()  # (see _recheck)
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
        seeding it), was banned, or could not be reached. Ask the tracker now (btget/worker/reannounce.py), whose
        answer carries a site's seed or starts one, rather than wait out the announce interval. Not for
        the sites we let go ourselves (btget/worker/siteshare.py): the tracker would only hand them back."""
        seedless = (self.had_seeds or self.connected) and self.phase is WorkerPhase.FETCHING
        if self.reannounce.due(time.monotonic(), seeds, seedless, let_go=len(self.steer.let_go())):
            self.handle.force_reannounce(0, -1, self.lt.reannounce_flags_t.ignore_min_interval)
        self.had_seeds = seeds > 0

    def _banned(self, endpoint: tuple[str, int]) -> None:
        """libtorrent banned a peer for corrupt pieces (it alone sent a piece that failed, or took part
        in too many). It bans the endpoint; the same peer connecting from another port would be a new
        peer to it (several connections per address are allowed, for loopback and NAT), so the address
        is shut out for the rest of the run: unless it is our own, which our sibling workers share."""
        self.reannounce.lost()
        self.ledger.ban(endpoint[0], endpoint[1])
        # A web seed's address is left open: libtorrent dropped the web seed, and the site's peer wire
        # there checks every piece before sending it (seed mode).
        if endpoint[0] not in own_addresses(self.spec.listen_ip) and (endpoint[0], endpoint[1]) not in self.ledger.web_seeds:
            self.steer.ban(endpoint[0])

    def _set_rates(self, rates: tuple[int, int], ses: Any) -> None:
        """A cap is for the campus link: every peer counts against it but the sibling workers,
        which listen on our own address (ltsession.limit_everyone)."""
        from torrents.servicekit import ltsession

        # The payload is capped, not libtorrent's estimate of it with IP overhead (which kept the
        # payload under the cap): what the user asked for is what
        # --json and the display then show.
        ses.apply_settings({"download_rate_limit": rates[0], "upload_rate_limit": rates[1],
                            "rate_limit_ip_overhead": False})
        ltsession.limit_everyone(ses, exempt=own_addresses(self.spec.listen_ip))

    def _say(self, said: list[events.WorkerEvent]) -> None:
        for event in said:
            self.send(event)

    # --- the end ----------------------------------------------------------------------
    def shutdown(self) -> None:
        deadline = time.monotonic() + STOP_WITHIN
        if self.saves.write_failed:
            self._recheck(deadline - SAVE_WITHIN)
        # The peers and byte counts before the pause, which ends the connections.
        self.status = counted = self.handle.status()
        if self.phase is WorkerPhase.FETCHING:
            self._count_sources()
            self._attribute_rest()
        # Paused before the state is saved and the files counted, so that the last report counts what
        # the saved state holds: pieces that passed their check after the count still reached the disk,
        # a rerun found them (btget/worker/recover.py), and its "resuming: ..." said more than the summary had.
        if not self.handle.flags() & self.lt.torrent_flags.paused:
            self.handle.pause()
            self._wait_for(self.lt.torrent_paused_alert, min(SAVE_WITHIN, deadline - SAVE_WITHIN - time.monotonic()))
        self.saves.save(force=True)
        while self.saves.pending and time.monotonic() < deadline:
            if self.ses.wait_for_alert(200) is not None:
                self.alerts.drain(self.ses)
        sharestate.remove_stale(self.spec)  # unused: the check was cut short, or a new state was written
        self.status = counted
        self.send(self.progress(events.Phase.STOPPED, files=True))
        self.ses.pause()
        self.web.relays.close()
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
            self.saves.rechecked = self._wait_for(lt.torrent_checked_alert, until - time.monotonic())
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
        """Sample each peer's bytes received (btget/worker/sources.py); the peers, as libtorrent describes them."""
        try:
            peers = self.handle.get_peer_info()
        except RuntimeError:
            return []
        info = self.lt.peer_info
        busy = info.connecting | info.handshake
        door = self.web.relays.door_of
        connections = [sources.Connection(*door((p.ip[0], p.ip[1])), p.total_download, p.pid.to_bytes(),
                                          web_seed=p.connection_type in self._web_seed_types,
                                          seed=bool(p.flags & info.seed), busy=bool(p.flags & busy),
                                          hashfails=p.num_hashfails) for p in peers]
        self.ledger.sample(connections)
        self._say(self.web.bad(connections))
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
        if not self.saves.write_failed:
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
        any: a rerun's "resuming: ..." (btget/display/readout.py). The status lags the check by up to a report
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
        from btget.resolve import peercert

        certs.load = peercert.renewer(*spec.peer_cert_repo, ltsession.torrent_info(spec.torrent).name(),
                                      token=spec.token)
    return certs


def _endpoint_of(alert: Any) -> str:
    """A listen alert's address and port, as the user would write them."""
    return format_hostport(str(alert.address), int(alert.port))


def _filename(alert: Any) -> str:
    # A method in libtorrent 2.x bindings, an attribute in older ones.
    name = getattr(alert, "filename", "")
    return str(name() if callable(name) else name)
