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
from multiprocessing.connection import Connection
from typing import Any, Iterator

from torrents.hostport import ANY, format_hostport, own_addresses

from btget import events
from btget.worker import peerevents, peersteer, progressreport, resumesaves, sharestate, sources, steering
from btget.worker import trackerwatch, webseeduse
from btget.worker.spec import CertRenewal, WorkerSpec, peer_certs_of

log = logging.getLogger("btget.worker")

STALL_CHECK = 0.5  # seconds between looks for web seeds libtorrent banned (it may remove one late)
# A worker told to stop is done within STOP_WITHIN s (the parent waits that and a margin, then ends it
# by PID); the last SAVE_WITHIN of them are for the resume state, after any recheck of a full disk.
# One budget: a recheck and a save bounded apart (12 + 10 s) outlasted the parent's wait under load
# and left the full disk's stale state behind.
STOP_WITHIN = 15.0
SAVE_WITHIN = 5.0


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


class Parent:
    """The worker's end of the pipe to the parent: events out, commands in, the parent's end noticed (then
    the worker saves its state and leaves: `stop` says why)."""

    def __init__(self, conn: Connection, stop: dict) -> None:
        self.conn, self.stop = conn, stop
        self.gone = False
        self.ppid = os.getppid()

    def commands(self) -> Iterator[events.Command]:
        """What the parent sent (btget/events.py), in order."""
        while not self.gone and self.conn.poll():
            try:
                command = self.conn.recv()
            except (EOFError, OSError):
                # The parent died (kill -9): save what we have and leave.
                self.gone = True
                self.stop["signal"] = "orphaned"
                return
            yield command

    def orphaned(self) -> bool:
        """The parent was killed: this process was handed to another."""
        if os.getppid() != self.ppid:
            self.gone = True
            return True
        return False

    def send(self, event: events.WorkerEvent) -> None:
        if self.gone:
            return
        try:
            self.conn.send(event)
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            self.gone = True
            self.stop["signal"] = "orphaned"

    def say(self, said: list[events.WorkerEvent]) -> None:
        for event in said:
            self.send(event)


class Worker:
    """The session and the worker's phase; its parts do the rest: `parent` (the pipe), `peers` (peers coming,
    going, banned), `steer` (the steering core applied), `report` (what the parent is told), `saves` (the
    resume state), `web` (the web seeds in use), `trackers` (their failures)."""

    def __init__(self, spec: WorkerSpec, conn: Connection, stop: dict) -> None:
        import libtorrent as lt

        self.lt = lt
        self.spec = spec
        self.stop = stop
        self.parent = Parent(conn, stop)
        self.send, self._say = self.parent.send, self.parent.say
        # Bytes per source and what is known of each peer (btget/worker/sources.py); web seeds (given and
        # the torrent's url-list) by endpoint, so that one is never taken for a sibling worker.
        self.ledger = sources.Ledger(spec.listen_ip, spec.peer_prefix, webseeduse.endpoints(spec.web_seeds + spec.url_list))
        self.phase = WorkerPhase.FETCHING
        self.trackers = trackerwatch.TrackerWatch(spec.index, spec.listen_ip)
        self.web = webseeduse.WebSeedUse(spec.index, self.ledger, spec.web_seeds, spec.proxies, spec.token)
        self.saves = resumesaves.ResumeSaves(lt, spec)
        self.peer_certs = peer_certs_of(spec)
        self.renewal = CertRenewal(self.peer_certs, log)
        self.ses = session(lt, spec, ssl=self.peer_certs is not None)
        marks = {"session": time.time()}
        atp = self._params()
        self.handle = self.web.handle = self.saves.handle = self.ses.add_torrent(atp)
        marks["torrent_added"] = time.time()
        # It fetches every file of the torrent unless the parent gave it a part (download.run decides, once).
        self.steer = peersteer.PeerSteer(lt, self.ses, self.handle, spec, self.ledger, pieces=atp.ti.num_pieces(),
                                         piece_bytes=self.layout.piece_length)
        self.peers = peerevents.PeerEvents(lt, self.handle, spec, ledger=self.ledger, steer=self.steer, web=self.web)
        self.report = progressreport.ProgressReport(lt, self.handle, spec, self.layout, ledger=self.ledger,
                                                    web=self.web, saves=self.saves, peers=self.peers, say=self._say)
        self.alerts = self._alert_table()
        # Sibling workers find each other on this host's loopback when listening everywhere; a restricted
        # dataset's on the SSL socket, the only one its SSL torrent takes peers on.
        port = self.ses.ssl_listen_port() if self.peer_certs else self.ses.listen_port()
        self.send(events.Listening(spec.index, own_addresses(spec.listen_ip)[0], port, marks))
        for peer in spec.peers:
            self.handle.connect_peer(peer)

    def _params(self) -> Any:
        atp = sharestate.torrent_params(self.lt, self.spec)
        if self.peer_certs is not None:
            self.peer_certs.add(atp)  # the root certificate at add time: the info-hash is the public one
        atp.url_seeds = [self.web.relayed(u) for u in self.spec.web_seeds]
        files = atp.ti.layout()
        file_sizes = [files.file_size(i) for i in range(files.num_files())]
        self.saves.sized(sum(file_sizes[i] for i in self.spec.wanted), atp.ti.piece_length())
        from btget.swarmread.streaming import PieceMap

        self.layout = PieceMap(file_sizes, atp.ti.piece_length())
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
            if fetching:
                self.report.poll_first_byte()
            now = time.monotonic()
            if now >= next_sample:
                # get_peer_info is the only source of per-peer byte counts, and
                # a seed hangs up the moment we complete: sample often, so
                # little of a connection's last stretch goes uncounted. The sites are
                # steered as often: one unchoking us is told within a turn which slice
                # to send first, before its queue fills with other pieces.
                self.steer.sample(now, self.report.count_sources() if fetching else [], fetching)
                next_sample = now + steering.SAMPLE_EVERY
            if now >= next_stall:
                self._say(self.web.recheck())
                next_stall = now + STALL_CHECK
            if fetching and self.web.probe_due(now):
                self.handle.force_reannounce(0, -1, self.lt.reannounce_flags_t.ignore_min_interval)
            if self.renewal.due(now):
                self.renewal.renew()
            if now >= next_report:
                self._report()
                next_report = now + self.spec.report_interval
            if now >= next_resume and self.phase is not WorkerPhase.FAILED:
                self.saves.save()
                next_resume = now + self.spec.resume_interval
            if self.parent.orphaned():
                break  # save and leave
        self.shutdown()

    def _commands(self) -> None:
        """Carry out what the parent sent."""
        for command in self.parent.commands():
            if isinstance(command, events.Stop):
                self.stop["signal"] = "stop"
            elif isinstance(command, events.Connect):
                self.ledger.introduce(command.peers)
                for peer in command.peers:
                    self.handle.connect_peer(peer)
            elif isinstance(command, events.WebSeeds):
                self.web.use(command, time.monotonic())
            elif isinstance(command, events.Rates):
                set_rates(self.ses, (command.download, command.upload), self.spec.listen_ip)

    def _report(self) -> None:
        if self.phase is WorkerPhase.SEEDING:
            self.send(self.report.polled())
        else:
            # Status arrives as a state_update_alert, not by polling.
            self.ses.post_torrent_updates()

    # --- alerts: one handler each ------------------------------------------------------
    def _alert_table(self) -> Any:
        from torrents.servicekit import ltsession

        lt, peers, report = self.lt, self.peers, self.report
        return ltsession.Alerts({
            lt.state_update_alert: self._on_state_update, lt.torrent_finished_alert: self._on_finished,
            lt.piece_finished_alert: self._on_piece, lt.save_resume_data_alert: lambda a: self.saves.answered(a.params),
            lt.save_resume_data_failed_alert: lambda a: self.saves.answered(),
            lt.cache_flushed_alert: lambda a: self._flushed(),
            lt.peer_connect_alert: peers.connect,
            lt.peer_disconnected_alert: lambda a: peers.disconnect(a, self.phase is WorkerPhase.FETCHING),
            lt.hash_failed_alert: lambda a: self.ledger.hash_failed(), lt.peer_ban_alert: lambda a: self._say(peers.ban(a)),
            lt.tracker_error_alert: self._on_tracker_error,
            lt.tracker_reply_alert: lambda a: self.send(self.trackers.replied(a)),
            lt.file_error_alert: self._on_file_error, lt.torrent_checked_alert: lambda a: report.files_checked(),
            lt.listen_failed_alert: self._on_listen_failed, lt.listen_succeeded_alert: self._on_listen,
            lt.torrent_error_alert: lambda a: self._fail("torrent", _filename(a) or "torrent", a.error.message()),
            lt.torrent_need_cert_alert: self.renewal.on_need_cert,
        })

    def _on_state_update(self, a: Any) -> None:
        for st in a.status:
            self.report.status = st
        if self.report.status is not None:
            self.peers.seeds(self.report.status.num_seeds, self.phase is WorkerPhase.FETCHING)
            self.send(self.report.updated(seeding=self.phase is WorkerPhase.SEEDING))

    def _on_listen_failed(self, a: Any) -> None:
        # Listening everywhere, one address refusing (a link-local one, a port taken there) leaves the others.
        if self.spec.listen_ip == ANY:
            log.info("worker %d: cannot listen on %s (%s)", self.spec.index, _endpoint_of(a), a.error.message())
        else:
            self._fail("listen", self.spec.listen_ip, f"cannot listen ({a.error.message()})")

    def _on_finished(self, a: Any) -> None:
        if self.phase is not WorkerPhase.FETCHING:
            return
        self.report.complete()
        # Pieces pass their hash check while still in libtorrent's write queue: report
        # "finished" only once the cache is flushed (cache_flushed_alert), so the parent's
        # checksums read what is on disk. A flushing save_resume_data is not enough in 2.x: the
        # parent then read files short of their last writes (docs/benchmarks.md "rucio").
        self.saves.save(force=True)
        self.handle.flush_cache()
        self.phase = WorkerPhase.FLUSHING

    def _on_piece(self, a: Any) -> None:
        self.report.piece_done(int(a.piece_index))
        self.saves.piece_done(may_save=self.phase is not WorkerPhase.FAILED)

    def _on_listen(self, a: Any) -> None:
        # An SSL torrent announces from the SSL sockets only.
        wanted = self.lt.socket_type_t.tcp_ssl if self.peer_certs is not None else self.lt.socket_type_t.tcp
        if a.socket_type == wanted:
            self.trackers.listening.add(_endpoint_of(a))

    def _on_tracker_error(self, a: Any) -> None:
        reply, again = self.trackers.failed(trackerwatch.failure_of(a))
        if again is not None:
            self.handle.force_reannounce(again, -1, self.lt.reannounce_flags_t.ignore_min_interval)
        if reply is not None:
            self.send(reply)

    def _on_file_error(self, a: Any) -> None:
        code = a.error.value()
        self.saves.failed_write()  # (see ResumeSaves.recheck)
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
            self.send(self.report.progress(events.Phase.FINISHED, seeding=True, files=True))

    # --- the end ----------------------------------------------------------------------
    def shutdown(self) -> None:
        deadline = time.monotonic() + STOP_WITHIN
        if self.saves.write_failed:
            self.saves.recheck(self._wait_for, deadline - SAVE_WITHIN)
        # The peers and byte counts before the pause, which ends the connections.
        counted = self.report.final(fetching=self.phase is WorkerPhase.FETCHING)
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
        self.report.status = counted
        self.send(self.report.progress(events.Phase.STOPPED, seeding=self.phase is WorkerPhase.SEEDING, files=True))
        self.ses.pause()
        self.web.relays.close()
        if self.alerts.unhandled:
            log.debug("worker %d: alerts not handled: %s", self.spec.index, self.alerts.unhandled)

    def _wait_for(self, kind: type, seconds: float) -> bool:
        """Handle alerts until one of `kind` comes (True) or `seconds` pass (False)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.ses.wait_for_alert(200) is not None:
                alerts = self.alerts.drain(self.ses)
                if any(isinstance(a, kind) for a in alerts):
                    return True
        return False


def session(lt: Any, spec: WorkerSpec, *, ssl: bool) -> Any:
    """The worker's libtorrent session: its listen address, its connections, the tracker's proxy, its caps;
    an SSL socket of its own for a restricted dataset (`ssl`)."""
    from torrents.servicekit import ltsession

    # piece_finished_alert (piece_progress) drives the byte-based resume saves.
    extra = {"connections_limit": spec.max_connections,
             "alert_mask": int(ltsession.ALERTS | lt.alert.category_t.piece_progress_notification),
             **({"peer_fingerprint": spec.peer_fingerprint} if spec.peer_fingerprint else {}),
             **ltsession.proxy_settings(spec.tracker_proxy)}
    ses = ltsession.session(spec.listen_ip, 0, ssl_port=0 if ssl else None, **extra)
    if any(spec.rates):
        set_rates(ses, spec.rates, spec.listen_ip)
    return ses


def set_rates(ses: Any, rates: tuple[int, int], listen_ip: str) -> None:
    """A cap is for the campus link: every peer counts against it but the sibling workers,
    which listen on our own address (ltsession.limit_everyone)."""
    from torrents.servicekit import ltsession

    # The payload is capped, not libtorrent's estimate of it with IP overhead (which kept the
    # payload under the cap): what the user asked for is what
    # --json and the display then show.
    ses.apply_settings({"download_rate_limit": rates[0], "upload_rate_limit": rates[1],
                        "rate_limit_ip_overhead": False})
    ltsession.limit_everyone(ses, exempt=own_addresses(listen_ip))


def _endpoint_of(alert: Any) -> str:
    """A listen alert's address and port, as the user would write them."""
    return format_hostport(str(alert.address), int(alert.port))


def _filename(alert: Any) -> str:
    # A method in libtorrent 2.x bindings, an attribute in older ones.
    name = getattr(alert, "filename", "")
    return str(name() if callable(name) else name)
