"""Where the tracker keeps swarms: the PeerStore interface and its in-memory implementation.

A peer is keyed by its endpoint (ip, port) within a swarm, as opentracker
does: that is what other peers connect to, a client that restarts with a
new peer id replaces its old entry, and a seed the tracker started on a
site is replaced by that seed's own announce. A peer expires two announce
intervals after its last announce; `stopped` removes it at once.

A federation that runs several tracker processes would put a Redis
implementation beside LocalPeerStore behind the same interface.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Protocol

from tracker.protocol import compact_endpoint

Endpoint = tuple[str, int]


@dataclass(slots=True)
class Peer:
    ip: str
    port: int
    peer_id: bytes
    seed: bool
    expires: float
    compact: bytes  # BEP 23/7 form, computed once at announce, not per answer
    ipv6: bool
    site: str | None = None  # the site that runs it, when the tracker started it there

    @property
    def endpoint(self) -> Endpoint:
        return (self.ip, self.port)


@dataclass(frozen=True, slots=True)
class SwarmCounts:
    complete: int
    incomplete: int
    downloaded: int


class PeerStore(Protocol):
    def update(self, info_hash: bytes, ip: str, port: int, peer_id: bytes, seed: bool, event: str,
               site: str | None = None) -> None: ...
    def peers(self, info_hash: bytes) -> list[Peer]: ...
    def counts(self, info_hash: bytes) -> SwarmCounts: ...
    def has(self, info_hash: bytes) -> bool: ...
    def swarms(self) -> Iterator[bytes]: ...
    def peer_total(self) -> int: ...
    def expire(self) -> int: ...


@dataclass(slots=True)
class _Swarm:
    # Insertion order is announce order (an update re-inserts), so the
    # entries that expire first are always at the front.
    peers: dict[Endpoint, Peer] = field(default_factory=dict)
    seeds: int = 0
    downloaded: int = 0


class LocalPeerStore:
    """Peers in this process's memory, bounded in swarms and peers per swarm."""

    def __init__(self, *, ttl: float, clock: Callable[[], float] = time.monotonic,
                 max_swarms: int = 200_000, max_peers_per_swarm: int = 10_000) -> None:
        self.ttl = ttl
        self.clock = clock
        self.max_swarms = max_swarms
        self.max_peers_per_swarm = max_peers_per_swarm
        self._swarms: dict[bytes, _Swarm] = {}
        self._total = 0

    def update(self, info_hash: bytes, ip: str, port: int, peer_id: bytes, seed: bool, event: str,
               site: str | None = None) -> None:
        swarm = self._swarms.get(info_hash)
        if swarm is None:
            if event == "stopped":
                return
            if len(self._swarms) >= self.max_swarms:
                self.expire()
                if len(self._swarms) >= self.max_swarms:
                    return  # full: this peer is not remembered, but its answer is still served
            swarm = self._swarms[info_hash] = _Swarm()
        key = (ip, port)
        old = swarm.peers.pop(key, None)
        if old is not None:
            self._total -= 1
            swarm.seeds -= old.seed
            site = site or old.site
        if event == "completed":
            swarm.downloaded += 1
        if event == "stopped":
            if not swarm.peers:
                del self._swarms[info_hash]
            return
        try:
            packed, ipv6 = compact_endpoint(ip, port)
        except (OSError, ValueError):
            return  # an address no client could connect to
        if len(swarm.peers) >= self.max_peers_per_swarm:
            oldest = next(iter(swarm.peers))
            self._drop(swarm, oldest)
        swarm.peers[key] = Peer(ip, port, peer_id, seed, self.clock() + self.ttl, packed, ipv6, site)
        swarm.seeds += seed
        self._total += 1

    def _drop(self, swarm: _Swarm, key: Endpoint) -> None:
        peer = swarm.peers.pop(key)
        swarm.seeds -= peer.seed
        self._total -= 1

    def _prune(self, info_hash: bytes, swarm: _Swarm, now: float) -> int:
        dropped = 0
        peers = swarm.peers
        while peers:
            key, peer = next(iter(peers.items()))
            if peer.expires > now:
                break
            self._drop(swarm, key)
            dropped += 1
        if not peers and swarm.downloaded == 0:
            del self._swarms[info_hash]
        return dropped

    def peers(self, info_hash: bytes) -> list[Peer]:
        swarm = self._swarms.get(info_hash)
        if swarm is None:
            return []
        self._prune(info_hash, swarm, self.clock())
        return list(swarm.peers.values())

    def counts(self, info_hash: bytes) -> SwarmCounts:
        swarm = self._swarms.get(info_hash)
        if swarm is None:
            return SwarmCounts(0, 0, 0)
        self._prune(info_hash, swarm, self.clock())
        return SwarmCounts(swarm.seeds, len(swarm.peers) - swarm.seeds, swarm.downloaded)

    def has(self, info_hash: bytes) -> bool:
        return info_hash in self._swarms

    def swarms(self) -> Iterator[bytes]:
        return iter(list(self._swarms))

    def peer_total(self) -> int:
        return self._total

    def expire(self) -> int:
        """Drop every expired peer (and empty swarms); run periodically, not per request."""
        now = self.clock()
        return sum(self._prune(h, s, now) for h, s in list(self._swarms.items()))
