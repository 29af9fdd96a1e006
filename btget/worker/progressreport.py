"""What a worker tells the parent of its share: libtorrent's status as Progress events (btget/events.py).

The status comes from a state_update_alert while fetching, and is polled while seeding and at the end.
A report carries the bytes and rates, the first payload byte's time, each source's bytes (the peers
sampled into the ledger, btget/worker/sources.py) and, when asked, the bytes of each wanted file that
verified pieces hold; the first report after libtorrent's check says what a rerun found already on disk.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

from btget import events
from btget.worker.sources import Connection, Ledger

if TYPE_CHECKING:
    from btget.swarmread.streaming import PieceMap
    from btget.worker.peerevents import PeerEvents
    from btget.worker.resumesaves import ResumeSaves
    from btget.worker.spec import WorkerSpec
    from btget.worker.webseeduse import WebSeedUse


class ProgressReport:
    def __init__(self, lt: Any, handle: Any, spec: "WorkerSpec", layout: "PieceMap", *, ledger: Ledger,
                 web: "WebSeedUse", saves: "ResumeSaves", peers: "PeerEvents",
                 say: Callable[[list[events.WorkerEvent]], None]) -> None:
        self.lt, self.handle, self.spec, self.layout = lt, handle, spec, layout
        self.ledger, self.web, self.saves, self.peers, self.say = ledger, web, saves, peers, say
        self.status: Any = None
        self.first_byte_at: float | None = None  # time.time() when the first payload byte arrived
        self.checked = False  # libtorrent has read what is on disk (resume state, or --check's hashing)
        # Pieces fetched between the check's end (torrent_checked_alert; libtorrent also says piece_finished
        # for each piece of the resume state it reads) and the first report after it.
        self.check_done = False
        self.fetched: set[int] = set()
        self._web_seed_types = (lt.peer_info.web_seed, lt.peer_info.http_seed)

    def poll_first_byte(self) -> None:
        # Polled from the worker's loop, not taken from a state_update_alert: those come every
        # report_interval (0.5 s), too coarse for a first byte that arrives 50-80 ms after start. Only
        # until that byte: one cheap h.status() per turn of the 50 ms loop, then never again.
        if self.first_byte_at is None and self.handle.status(0).total_payload_download > 0:
            self.first_byte_at = time.time()

    def files_checked(self) -> None:
        """libtorrent has read what is on disk (torrent_checked_alert)."""
        self.check_done = True

    def piece_done(self, piece: int) -> None:
        if self.check_done and not self.checked:
            self.fetched.add(piece)

    def updated(self, seeding: bool) -> events.Progress:
        """The report on a status update. The first after the check carries what is on disk per file: the
        parent's "resuming: ... already verified" (one file_progress, not one per report)."""
        checked = not self.checked and str(self.status.state).rsplit(".", 1)[-1] not in events.CHECKING
        self.checked = self.checked or checked
        return self.progress(seeding=seeding, files=checked, found=self._found(self.status.pieces) if checked else None)

    def polled(self) -> events.Progress:
        """Seeding: libtorrent posts no state update for uploads alone, so the status would stay as it was at
        completion and --seed-ratio would never be reached. Two cheap polls a second while seeding."""
        self.status = self.handle.status(0)
        return self.progress(seeding=True)

    def complete(self) -> None:
        """Every wanted piece passed its check: the last count of the sources."""
        self.status = self.handle.status()
        if self.first_byte_at is None and self.status.total_payload_download > 0:
            self.first_byte_at = time.time()  # all of it came within one turn of the loop
        self.count_sources()
        self.attribute_rest()

    def final(self, fetching: bool) -> Any:
        """The status at the end, the sources counted (while fetching) before the pause ends the connections."""
        self.status = counted = self.handle.status()
        if fetching:
            self.count_sources()
            self.attribute_rest()
        return counted

    # --- sources ----------------------------------------------------------------------
    def count_sources(self) -> list:
        """Sample each peer's bytes received (btget/worker/sources.py); the peers, as libtorrent describes them."""
        try:
            peers = self.handle.get_peer_info()
        except RuntimeError:
            return []
        info = self.lt.peer_info
        busy = info.connecting | info.handshake
        door = self.web.relays.door_of
        connections = [Connection(*door((p.ip[0], p.ip[1])), p.total_download, p.pid.to_bytes(),
                                  web_seed=p.connection_type in self._web_seed_types,
                                  seed=bool(p.flags & info.seed), busy=bool(p.flags & busy),
                                  hashfails=p.num_hashfails) for p in peers]
        self.ledger.sample(connections)
        self.say(self.web.bad(connections))
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

    def attribute_rest(self) -> None:
        self.ledger.attribute_rest(self.status.total_payload_download if self.status else 0, self.layout.piece_length)

    # --- the event ----------------------------------------------------------------------
    def progress(self, phase: events.Phase = events.Phase.RUNNING, *, seeding: bool, files: bool = False,
                 found: int | None = None) -> events.Progress:
        st = self.status
        done = self._file_bytes() if files else None
        connected, connected_at = self.peers.connected, self.peers.connected_at
        if st is None:
            return events.Progress(self.spec.index, phase, hash_failures=self.ledger.hash_failures,
                                   sources=dict(self.ledger.sources), connected=connected, connected_at=connected_at,
                                   files=done, found=found, **self.ledger.named())
        return events.Progress(
            worker=self.spec.index, phase=phase, done=st.total_wanted_done, wanted=st.total_wanted,
            rate=st.download_payload_rate, up_rate=st.upload_payload_rate, peers=st.num_peers, seeds=st.num_seeds,
            downloaded=st.total_payload_download, uploaded=st.total_payload_upload,
            redundant=st.total_redundant_bytes, hash_failures=self.ledger.hash_failures,
            sources=dict(self.ledger.sources),
            state=str(st.state).rsplit(".", 1)[-1], flushed=seeding,
            first_byte_at=self.first_byte_at, connected=connected, connected_at=connected_at,
            files=done, found=found, leechers=self._leechers() if seeding else 0,
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
