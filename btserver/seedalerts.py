"""What the site session's alerts mean for its seeds: peers and bytes uploaded, a seed ready for peers, a
replica that fails its hash check or cannot be read, a certificate for a restricted dataset's torrent.

Called on the seeder's alert pump thread (btserver/seeder.py), one handler per alert type.
"""

from __future__ import annotations

import logging
from typing import Callable

import libtorrent as lt

from torrents.servicekit import ltsession

from btserver.seedbook import SeedBook

log = logging.getLogger("btswarm.server.seeder")


class SeedAlerts:
    def __init__(self, book: SeedBook, *, damaged: Callable[[object, str, str], None],
                 peer_certs: ltsession.PeerCerts | None = None) -> None:
        self.book = book
        self.damaged = damaged  # (handle, problem, why): stop seeding a replica that cannot be served as it is
        self.peer_certs = peer_certs

    def table(self) -> ltsession.Alerts:
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
        book = self.book
        with book.lock:
            now = book.clock()
            for st in alert.status:
                seed = book.seeds.get(str(st.info_hashes.v1))
                if seed is None:
                    continue
                # Peers that want something: a seed connected (a T3 that is done, another site) keeps
                # a seed busy no more than no peer does, however often it connects again.
                seed.peers = st.num_peers - st.num_seeds
                seed.upload_rate = st.upload_payload_rate
                book.count_upload(seed, st.total_payload_upload)
                if seed.peers:
                    seed.last_active = now

    def _on_checked(self, alert) -> None:
        seed = self.book.seed_of(alert.handle)
        if seed is not None:
            seed.ready.set()

    def _on_peer_connect(self, alert) -> None:
        with self.book.lock:
            seed = self.book.seed_of(alert.handle)
            if seed is not None:
                # A peer until the next state update says whether it wants anything (fit_slots looks at
                # seeds with peers); only then is the seed active (_on_state_update).
                seed.peers = max(seed.peers, 1)

    def _on_hash_failed(self, alert) -> None:
        self.book.counters.hash_failures += 1
        if self.book.metrics:
            self.book.metrics.hash_failures.inc()
        log.warning("seed %s: piece %d failed its hash check (data on disk differs from the torrent)",
                    alert.handle.info_hashes().v1, alert.piece_index)
        # Seed mode hashes a piece before its first send, so the bad bytes
        # never left; but the replica is damaged.
        self.damaged(alert.handle, f"piece {alert.piece_index} of the replica differs from the torrent",
                     "replica failed its hash check")

    def _on_file_error(self, alert) -> None:
        # A file the scan saw cannot be read now (gone, permissions, an I/O
        # error): its pieces cannot be sent, and a peer waiting for them
        # would wait for ever. Stop offering the dataset, so the tracker
        # asks another site, and say which file.
        self.book.counters.read_errors += 1
        if self.book.metrics:
            self.book.metrics.read_errors.inc()
        name = _filename(alert)
        log.warning("seed %s: %s", alert.handle.info_hashes().v1, alert.message())
        self.damaged(alert.handle, f"cannot read {name or 'a file'} ({alert.error.message()})",
                     "a file of the replica cannot be read")


def _filename(alert: object) -> str:
    # A method in libtorrent 2.x bindings, an attribute in older ones.
    name = getattr(alert, "filename", "")
    return str(name() if callable(name) else name)
