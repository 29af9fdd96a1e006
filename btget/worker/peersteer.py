"""The worker's side of the steering core (btget/worker/steering.py): libtorrent's peer list sampled into a
`steering.Seen`, and what `steering.step` returns carried out on the session."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from torrents.hostport import format_hostport, host_of, own_addresses

from btget.worker import siteshare, sources, stall, steering
from btget.worker.siteshare import mask

if TYPE_CHECKING:
    from btget.worker.spec import WorkerSpec

log = logging.getLogger("btget.worker")


class PeerSteer:
    def __init__(self, lt: Any, ses: Any, handle: Any, spec: "WorkerSpec", ledger: sources.Ledger, *, pieces: int,
                 piece_bytes: int) -> None:
        self.lt, self.ses, self.handle, self.index, self.ledger = lt, ses, handle, spec.index, ledger
        self.site_keys = frozenset(spec.site_peers)  # the sites' seeds, 'ip:port' (the tracker's /api/sites)
        self.web_seed_types = (lt.peer_info.web_seed, lt.peer_info.http_seed)
        # A part of the dataset (the parent gave the worker one) keeps every site: the shard rule.
        self.state = steering.Steering(sites=list(dict.fromkeys(host_of(k) for k in spec.site_peers)), pieces=pieces,
                                       piece_bytes=piece_bytes, whole=not spec.part,
                                       preferred=frozenset(spec.prefer_ips),
                                       stall=stall.StallWatch(never=frozenset(own_addresses(spec.listen_ip))))
        for action in steering.exclude(self.state, set(spec.exclude_ips)):
            self._apply(action, False)

    def let_go(self) -> set[str]:
        """The site addresses we let go ourselves (btget/worker/siteshare.py): the tracker would only hand them back."""
        return self.state.let_go()

    def sample(self, now: float, connections: list, fetching: bool) -> None:
        """One sample of the connections (libtorrent's peer_info) through the steering core, and what it says
        done: the IP filter, the piece priorities, an announce, a line for the log."""
        peers, have, cost, from_sites = self._peers(connections), None, 0.0, 0
        if fetching and steering.cover_due(self.state, now, peers):
            took = time.perf_counter()
            peers = self._peers(connections, bitfields=True)
            have = mask(self.handle.status(self.lt.status_flags_t.query_pieces).pieces)
            sites = self.site_keys or {format_hostport(p.ip, p.port) for p in peers if p.kind is steering.Kind.SITE}
            from_sites = sum(n for key, n in self.ledger.counted.items() if key in sites)
            cost = time.perf_counter() - took
        for action in steering.step(self.state, steering.Seen(now, fetching, peers, have, cost, from_sites)):
            self._apply(action, fetching)

    def ban(self, ip: str) -> None:
        """Shut `ip` out for the rest of the run: it sent corrupt pieces."""
        for action in steering.ban(self.state, ip):
            self._apply(action, False)

    def _peers(self, connections: list, bitfields: bool = False) -> tuple[steering.Peer, ...]:
        """The connections as the steering core sees them: web seeds left out, each peer a site (without
        the sites' list, a seed), another T3 or a sibling worker; with `bitfields`, the T3s' pieces."""
        info = self.lt.peer_info
        out = []
        for p in connections:
            if p.connection_type in self.web_seed_types:
                continue
            key, seed = format_hostport(p.ip[0], p.ip[1]), bool(p.flags & info.seed)
            kind = (steering.Kind.SITE if (key in self.site_keys if self.site_keys else seed)
                    else steering.Kind.T3 if self.ledger.remote(p.ip[0], key) else steering.Kind.SIBLING)
            out.append(steering.Peer(
                p.ip[0], p.ip[1], kind, p.total_download, p.total_upload, p.download_queue_length,
                not p.flags & info.remote_choked, p.num_pieces, seed,
                mask(p.pieces) if bitfields and kind is steering.Kind.T3 and not seed else None,
                bool(p.flags & info.interesting), bool(p.flags & info.endgame_mode)))
        return tuple(out)

    def _apply(self, action: steering.Action, fetching: bool) -> None:
        if isinstance(action, steering.Filter):
            # The IP filter disconnects a blocked peer at once and gives its blocks back to the picker.
            rules = self.lt.ip_filter()
            for ip in action.ips:
                rules.add_rule(ip, ip, 1)
            self.ses.set_ip_filter(rules)
        elif isinstance(action, steering.Prioritize):
            self.handle.prioritize_pieces(list(action.priorities or [siteshare.NORMAL] * self.state.pieces))
        elif isinstance(action, steering.Announce) and fetching:
            self.handle.force_reannounce(0, -1, self.lt.reannounce_flags_t.ignore_min_interval)
        elif isinstance(action, steering.Said):
            log.info("worker %d: %s", self.index, action.text)
