"""What a worker makes of its peers coming, going and banned: the ledger's accounts, the shut-outs for corrupt
pieces, and the tracker asked again when every seed is gone (btget/worker/reannounce.py decides when)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from torrents.hostport import own_addresses

from btget import events
from btget.worker.reannounce import Reannounce

if TYPE_CHECKING:
    from btget.worker.peersteer import PeerSteer
    from btget.worker.sources import Ledger
    from btget.worker.spec import WorkerSpec
    from btget.worker.webseeduse import WebSeedUse


class PeerEvents:
    def __init__(self, lt: Any, handle: Any, spec: "WorkerSpec", *, ledger: "Ledger", steer: "PeerSteer",
                 web: "WebSeedUse") -> None:
        self.lt, self.handle, self.spec, self.ledger, self.steer, self.web = lt, handle, spec, ledger, steer, web
        self.connected = False  # some peer connected at some point (sent to the parent)
        self.connected_at: float | None = None  # time.time() of the first peer connection
        self.had_seeds = False
        self.reannounce = Reannounce()  # when losing every seed asks the tracker again

    def _peer_of(self, a: Any) -> tuple[tuple[str, int] | None, bytes]:
        """A peer alert's endpoint (a web seed's relay: the door it stands for) and peer id."""
        ep = getattr(a, "endpoint", None) or getattr(a, "ip", None)
        pid = a.pid.to_bytes() if getattr(a, "pid", None) is not None else b""
        return (self.web.relays.door_of((ep[0], ep[1])) if ep else None), pid

    def connect(self, a: Any) -> None:
        ep, pid = self._peer_of(a)
        self.connected = True  # an attempt (libtorrent posts it before the connection is made)
        if ep:
            self.ledger.connected(ep[0], ep[1], pid)
        self.connected_at = self.connected_at or time.time()

    def disconnect(self, a: Any, fetching: bool) -> None:
        ep, pid = self._peer_of(a)
        if ep:  # connect_failed: refused, or timed out (a firewall that drops)
            self.ledger.disconnected(ep[0], ep[1], pid, connect_failed=fetching and a.op == self.lt.operation_t.connect)
        if fetching:
            if (ep and ep not in self.ledger.web_seeds and ep[0] not in self.steer.let_go()
                    and self.ledger.remote(ep[0], self.ledger.key(*ep))):
                self.reannounce.lost()
            # A site that cannot read its replica drops its seed at once, between two status
            # updates: look now, not at the next one.
            self.seeds(self.handle.status(0).num_seeds, fetching)

    def ban(self, a: Any) -> list[events.WorkerEvent]:
        """A peer_ban_alert: the peer shut out; what to tell the parent of a web seed banned."""
        self._banned(self.web.relays.door_of((a.endpoint[0], a.endpoint[1])))
        return self.web.peer_banned()

    def seeds(self, seeds: int, fetching: bool) -> None:
        """No seed connected while fetching: every one left (a site that cannot read its replica stops
        seeding it), was banned, or could not be reached. Ask the tracker now (btget/worker/reannounce.py), whose
        answer carries a site's seed or starts one, rather than wait out the announce interval. Not for
        the sites we let go ourselves (btget/worker/siteshare.py): the tracker would only hand them back."""
        seedless = (self.had_seeds or self.connected) and fetching
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
