"""Pieces on demand from the swarm, for `bt-get --serve` (the libtorrent side, kept thin).

One libtorrent session joins the swarm with the dataset's files wanted but
its pieces at low priority (prefetch: fetched rarest-first in the
background) or not wanted at all (--no-prefetch). `wait(reader, piece)`
gives a piece a deadline (libtorrent's time-critical picker asks the
fastest peers for it first), waits for it to pass libtorrent's hash check,
then hashes it again from disk before anything is served from it: a piece
passes its check while still in libtorrent's write buffer, so only bytes
read back from the file and matching the torrent's SHA1 are known to be on
disk. `release(reader)` drops the deadlines nobody else waits for.

Decisions (which pieces, which deadlines, what to cancel) are in
btget.swarmread.streaming; this module only tells libtorrent and waits.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from torrents.errors import BtswarmError
from torrents.hostport import ANY
from torrents.metainfo import Metainfo

from btget.swarmread.piecefiles import PieceFiles
from btget.swarmread.streaming import Demand, PieceMap
from btget.worker import sharestate
from btget.worker.spec import CertRenewal, WorkerSpec, peer_certs_of

log = logging.getLogger("btget.serve")

LOW, TOP = 1, 7  # libtorrent piece priorities: background prefetch, and what a reader waits for
RESUME_INTERVAL = 5.0  # seconds between resume saves while pieces arrive
REANNOUNCE_GAP = 2.0  # at most one forced announce this often
REREAD_WAIT = 2.0  # how long a piece that passed libtorrent's check may take to read back right


class PieceUnavailable(BtswarmError):
    """A piece did not arrive in the bounded time (HTTP 503); the problem says what the swarm looks like."""


@dataclass(frozen=True)
class Stats:
    downloaded: int  # payload bytes received from peers this session
    redundant: int
    pieces: int  # pieces libtorrent has
    verified: int  # pieces read back from disk and matching their SHA1
    peers: int
    seeds: int
    rate: int
    state: str


class SwarmPieces:
    def __init__(self, meta: Metainfo, spec: WorkerSpec, *, prefetch: bool, piece_timeout: float) -> None:
        import libtorrent as lt

        from torrents.servicekit import ltsession

        self.lt = lt
        self.meta = meta
        self.spec = spec
        self.map = PieceMap.of(meta)
        self.prefetch = prefetch
        self.base_priority = LOW if prefetch else 0
        self.piece_timeout = piece_timeout
        self.files = PieceFiles(meta, Path(spec.save_path) / meta.name, self.map)
        self.demand = Demand()
        self.verified: set[int] = set()
        self._waiters: dict[int, list[asyncio.Future]] = {}
        self.hash_failures = 0
        self.errors: list[str] = []
        # A reader may want a piece long after the last one arrived: keep the
        # connections to seeds open while nothing is wanted. A session with
        # nothing to fetch counts as finished, tells its peers it only uploads,
        # and seeds hang up on it; worse, libtorrent then stops calling seeds,
        # and a piece deadline set later does not make it call them again
        # (measured: no connection attempt in 30 s). In share mode it never
        # says it only uploads, so the seeds stay; share_mode_target this high
        # keeps share mode from fetching pieces of its own to trade (at most
        # one, while nothing has been read). With prefetch the session is
        # downloading until it has everything, when reads are local anyway.
        self.peer_certs = peer_certs_of(spec)  # a restricted dataset: its SSL torrent
        self.renewal = CertRenewal(self.peer_certs, log)
        self.ses = ltsession.session(spec.listen_ip, 0, close_redundant_connections=False,
                                     ssl_port=0 if self.peer_certs else None,
                                     share_mode_target=1 << 30, connections_limit=spec.max_connections,
                                     alert_mask=int(ltsession.ALERTS | lt.alert.category_t.piece_progress_notification))
        atp = sharestate.torrent_params(lt, spec)
        if self.peer_certs is not None:
            self.peer_certs.add(atp)

        atp.piece_priorities = [self.base_priority] * self.map.num_pieces
        if prefetch:
            # In file order: the order a reader streaming the files meets them
            # (rarest-first would make it wait for pieces fetched last).
            atp.flags |= lt.torrent_flags.sequential_download
        else:
            atp.flags |= lt.torrent_flags.share_mode
        self.handle = self.ses.add_torrent(atp)
        self.listen_port = self.ses.listen_port()
        for peer in spec.peers:
            self.handle.connect_peer(peer)
        self._last_reannounce = 0.0
        self._stopping = False
        self._next_save = time.monotonic() + RESUME_INTERVAL
        self._pending_saves = 0
        self.alerts = self._alert_table()

    # --- the alert pump (runs as a task on the server's loop) ------------------------------
    async def pump(self) -> None:
        """Wait for alerts in a thread, handle them on the loop (alerts live only until the next pop)."""
        while not self._stopping:
            if await asyncio.to_thread(self.ses.wait_for_alert, 200) is not None:
                self.alerts.drain(self.ses)
            if time.monotonic() >= self._next_save:
                self.save_resume()
            if self.renewal.due(time.monotonic()):
                await asyncio.to_thread(self.renewal.renew)  # a repository's renewal is an HTTP request: off the loop

    def _alert_table(self) -> Any:
        from torrents.servicekit import ltsession

        lt = self.lt
        return ltsession.Alerts({
            lt.piece_finished_alert: self._on_piece, lt.hash_failed_alert: self._on_hash_failed,
            lt.save_resume_data_alert: self._on_resume_data, lt.save_resume_data_failed_alert: self._on_resume_failed,
            lt.file_error_alert: self._on_error, lt.torrent_error_alert: self._on_error,
            lt.listen_failed_alert: lambda a: (log.info("%s", a.message()) if self.spec.listen_ip == ANY
                                               else self._on_error(a)),  # one address of many: the others listen
            lt.peer_connect_alert: lambda a: log.debug("%s", a.message()),
            lt.torrent_need_cert_alert: self.renewal.on_need_cert,
            lt.peer_disconnected_alert: lambda a: log.debug("%s", a.message()),
            lt.tracker_reply_alert: lambda a: log.info("tracker %s: %d peers", a.tracker_url(), a.num_peers),
            lt.tracker_error_alert: lambda a: log.warning("tracker %s: %s", a.tracker_url(),
                                                          a.failure_reason() or a.error.message()),
        })

    def _on_piece(self, a: Any) -> None:
        piece = int(a.piece_index)
        self.demand.arrived(piece)
        for fut in self._waiters.pop(piece, []):
            if not fut.done():
                fut.set_result(None)

    def _on_hash_failed(self, a: Any) -> None:
        self.hash_failures += 1

    def _on_resume_data(self, a: Any) -> None:
        self._pending_saves = max(0, self._pending_saves - 1)
        sharestate.write_resume(self.spec.resume_path, self.lt.write_resume_data_buf(a.params))

    def _on_resume_failed(self, a: Any) -> None:
        self._pending_saves = max(0, self._pending_saves - 1)

    def _on_error(self, a: Any) -> None:
        log.warning("libtorrent: %s", a.message())
        self.errors.append(a.error.message())

    # --- pieces ---------------------------------------------------------------------------
    def want(self, reader: int, pieces: Iterable[tuple[int, int]]) -> None:
        """Give pieces deadlines (ms from now) on behalf of `reader`; pieces already here are skipped."""
        todo = [(p, d) for p, d in pieces if p not in self.verified and not self.handle.have_piece(p)]
        changed = self.demand.want(reader, todo)
        if not changed:
            return
        # The priority through the ordinary call, then the deadline: a deadline
        # alone does not take a finished session back to downloading.
        for piece, deadline in changed:
            self.handle.piece_priority(piece, TOP)
            self.handle.set_piece_deadline(piece, max(0, deadline))
        if self.handle.status(0).num_seeds == 0:
            self._reannounce()

    def _reannounce(self) -> None:
        """Ask the tracker now (not at the next interval): a site may have stopped its idle seed."""
        now = time.monotonic()
        if now - self._last_reannounce >= REANNOUNCE_GAP:
            self._last_reannounce = now
            log.info("no seed connected: asking the tracker")
            self.handle.force_reannounce(0, -1, self.lt.reannounce_flags_t.ignore_min_interval)

    def release(self, reader: int, pieces: Iterable[int] | None = None) -> None:
        """`reader` waits no longer (it finished, or its client went away): drop what nobody else wants."""
        cancel, relaxed = self.demand.release(reader, pieces)
        for piece in cancel:
            if not self.handle.have_piece(piece):
                self.handle.reset_piece_deadline(piece)
                self.handle.piece_priority(piece, self.base_priority)
        for piece, deadline in relaxed:
            self.handle.set_piece_deadline(piece, max(0, deadline))

    async def wait(self, reader: int, piece: int, deadline_ms: int = 0) -> None:
        """Return once `piece` is on disk and matches its SHA1; PieceUnavailable after the piece timeout."""
        if piece in self.verified:
            return
        started = time.monotonic()
        while True:
            if self.handle.have_piece(piece):
                if await self._verify(piece, started):
                    return
                raise PieceUnavailable(f"piece {piece}", "does not match its SHA1 on disk after libtorrent checked "
                                       "it (the file was changed behind bt-get; run bt-get --check)")
            self.want(reader, [(piece, deadline_ms)])
            fut = asyncio.get_running_loop().create_future()
            self._waiters.setdefault(piece, []).append(fut)
            if self.handle.have_piece(piece):  # arrived between the check and the future
                self._drop_waiter(piece, fut)
                continue
            left = self.piece_timeout - (time.monotonic() - started)
            try:
                await asyncio.wait_for(fut, max(0.0, left))
            except asyncio.TimeoutError:
                self._drop_waiter(piece, fut)
                raise PieceUnavailable(f"piece {piece}", self._why_missing(piece)) from None
            except BaseException:
                self._drop_waiter(piece, fut)
                raise

    def _drop_waiter(self, piece: int, fut: asyncio.Future) -> None:
        waiters = self._waiters.get(piece, [])
        if fut in waiters:
            waiters.remove(fut)
        if not waiters:
            self._waiters.pop(piece, None)

    def _why_missing(self, piece: int) -> str:
        st = self.handle.status(0)
        try:
            holders = self.handle.piece_availability()[piece]
        except (IndexError, RuntimeError):
            holders = 0
        timeout = f"not received within {self.piece_timeout:g} s"
        if st.num_peers == 0:
            return f"{timeout}: no peer is connected (is a site serving this dataset, is the tracker up?)"
        if holders == 0:
            return f"{timeout}: none of the {st.num_peers} connected peers has it"
        return f"{timeout}: {holders} of the {st.num_peers} connected peers have it but did not send it"

    async def _verify(self, piece: int, started: float) -> bool:
        """Hash the piece as it is on disk; retry briefly while libtorrent's write may still be on its way."""
        expected = self.meta.piece_hash(piece)
        deadline = time.monotonic() + REREAD_WAIT
        while True:
            digest = await asyncio.to_thread(self.files.sha1, piece)
            if digest == expected:
                self.verified.add(piece)
                return True
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.02)

    def read(self, file: int, start: int, end: int) -> bytes:
        """Bytes [start, end) of a file, from disk (only call it for verified pieces)."""
        return self.files.read(file, start, end)

    # --- state --------------------------------------------------------------------------
    def stats(self) -> Stats:
        st = self.handle.status(0)
        return Stats(downloaded=st.total_payload_download, redundant=st.total_redundant_bytes,
                     pieces=st.num_pieces, verified=len(self.verified), peers=st.num_peers, seeds=st.num_seeds,
                     rate=st.download_payload_rate, state=str(st.state).rsplit(".", 1)[-1])

    def save_resume(self) -> None:
        self._next_save = time.monotonic() + RESUME_INTERVAL
        if self.handle.need_save_resume_data():
            self.handle.save_resume_data(self.lt.torrent_handle.flush_disk_cache)
            self._pending_saves += 1

    def close(self) -> None:
        """Save the resume state (bounded wait), leave the swarm, close the files."""
        self._stopping = True
        self.handle.save_resume_data(self.lt.torrent_handle.flush_disk_cache)
        self._pending_saves += 1
        deadline = time.monotonic() + 10
        while self._pending_saves and time.monotonic() < deadline:
            if self.ses.wait_for_alert(200) is not None:
                self.alerts.drain(self.ses)
        self.ses.pause()
        self.files.close()
