"""Where the tracker keeps swarms: the PeerStore interface, and its in-memory implementation.

Two implementations side by side, chosen by `[tracker] store`:
LocalPeerStore here (one process; the default) and RedisPeerStore in
tracker/redisstore.py (any number of tracker processes on any hosts,
sharing one Redis). Both answer an announce by the same rules (handout).

A peer is keyed by its endpoint (ip, port) within a swarm, as opentracker
does: that is what other peers connect to, a client that restarts with a
new peer id replaces its old entry, and a seed the tracker started on a
site is replaced by that seed's own announce. A peer expires `ttl` (two
announce intervals) after its last announce; `stopped` removes it at once.

Maybe-async: each method returns its result, or an awaitable of it. The
memory store answers at once, which lets the fast path answer an announce
without making a task; Redis answers after one round trip. Callers in
async code use `resolve()`.
"""

from __future__ import annotations

import inspect
import random
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable, NamedTuple, Protocol, Sequence, TypeVar

from tracker import handout
from tracker.protocol import Announce, compact_endpoint

Endpoint = tuple[str, int]
T = TypeVar("T")
Maybe = T | Awaitable[T]


async def resolve(value: Maybe[T]) -> T:
    """`value`, awaited if it is awaitable: one call site for both kinds of store."""
    if inspect.isawaitable(value):
        return await value
    return value  # type: ignore[return-value]


class SwarmCounts(NamedTuple):
    complete: int
    incomplete: int
    downloaded: int


class SwarmView(NamedTuple):
    """What one announce gets back: the swarm's counts and the peers handed out, in order."""
    complete: int
    incomplete: int
    downloaded: int
    peers4: bytes  # BEP 23 compact
    peers6: bytes  # BEP 7 compact
    listed: list[tuple[str, int, bytes]] | None = None  # (ip, port, peer id), when asked (non-compact answer)

    @property
    def counts(self) -> SwarmCounts:
        return SwarmCounts(self.complete, self.incomplete, self.downloaded)


class Seed(NamedTuple):
    ip: str
    port: int
    site: str | None  # the site it runs at, when known


class PeerStore(Protocol):
    def announce(self, info_hash: bytes, ip: str, port: int, peer_id: bytes, seed: bool, event: str, *,
                 numwant: int, site: str | None = None, listed: bool = False) -> Maybe[SwarmView]:
        """Record an announce (`stopped` removes the peer), then count the swarm and pick up to `numwant` peers.

        `site` is where the announcing peer is (its site's peers are handed
        out first); `listed` asks for (ip, port, peer id) beside the compact form.
        """
    def handout(self, info_hash: bytes, ip: str, port: int, *, numwant: int, site: str | None = None,
                listed: bool = False) -> Maybe[SwarmView]:
        """The same answer without recording anything (after seeds were started)."""
    def add_seed(self, info_hash: bytes, ip: str, port: int, peer_id: bytes, site: str, *,
                 started: int | None = None) -> Maybe[None]:
        """A seed at `site`, on its word; `started`: when the site started it, on the site's clock."""
    def remove(self, info_hash: bytes, ip: str, port: int, site: str | None = None, *,
               built: int | None = None) -> Maybe[None]:
        """Forget a peer; with `built` (a heartbeat's, on `site`'s clock), not if a start of H at `site`
        was stamped at or after it: that heartbeat was built before the seed existed."""
    def counts(self, info_hashes: Sequence[bytes]) -> Maybe[list[SwarmCounts]]: ...
    def seeds(self, info_hash: bytes) -> Maybe[list[Seed]]: ...
    def has(self, info_hash: bytes) -> Maybe[bool]: ...
    def swarms(self, limit: int) -> Maybe[list[bytes]]: ...
    def expire(self) -> Maybe[int]: ...
    def totals(self) -> tuple[float, float]:
        """(swarms, peers) for the metrics gauges, without a round trip (NaN where unknown)."""
    async def close(self) -> None: ...


def record(store: PeerStore, ann: Announce, site: str | None) -> Maybe[SwarmView]:
    """An announce to `store`: recorded (`stopped` removes the peer) and answered. A closed peer's
    (`inbound=0`) is answered and never recorded: nobody could connect to it, so nobody is handed it."""
    if ann.closed and ann.event != "stopped":
        return store.handout(ann.info_hash, ann.ip, ann.port, numwant=ann.numwant, site=site, listed=not ann.compact)
    return store.announce(ann.info_hash, ann.ip, ann.port, ann.peer_id, ann.seed, ann.event,
                          numwant=0 if ann.event == "stopped" else ann.numwant, site=site, listed=not ann.compact)


@dataclass(slots=True, eq=False)
class Peer:
    ip: str
    port: int
    peer_id: bytes
    seed: bool
    expires: float
    compact: bytes  # BEP 23/7 form, computed once at announce, not per answer
    ipv6: bool
    site: str | None = None  # the site it is at (the tracker started it there, or its address is the site's)
    slot: int = -1  # its index in the swarm's seeds or leechers
    site_slot: int = -1  # its index in its site's group

    @property
    def endpoint(self) -> Endpoint:
        return (self.ip, self.port)


def _put(group: list[Peer], p: Peer, attr: str) -> None:
    setattr(p, attr, len(group))
    group.append(p)


def _take(group: list[Peer], p: Peer, attr: str) -> None:
    """Remove `p` in O(1): the last member takes its place."""
    i = getattr(p, attr)
    last = group.pop()
    if last is not p:
        group[i] = last
        setattr(last, attr, i)


@dataclass(slots=True)
class _Swarm:
    # Insertion order is announce order (an update re-inserts), so the
    # entries that expire first are always at the front.
    peers: dict[Endpoint, Peer] = field(default_factory=dict)
    # The same peers by kind and by site, as lists: sampling them costs
    # what is handed out, not the size of the swarm.
    seeds: list[Peer] = field(default_factory=list)
    leechers: list[Peer] = field(default_factory=list)
    sites: dict[str, list[Peer]] = field(default_factory=dict)
    downloaded: int = 0
    started: dict[str, int] = field(default_factory=dict)  # site -> its stamp of its last start of this swarm

    def link(self, p: Peer) -> None:
        self.peers[(p.ip, p.port)] = p
        _put(self.seeds if p.seed else self.leechers, p, "slot")
        if p.site is not None:
            _put(self.sites.setdefault(p.site, []), p, "site_slot")

    def unlink(self, p: Peer) -> None:
        _take(self.seeds if p.seed else self.leechers, p, "slot")
        if p.site is not None:
            group = self.sites[p.site]
            _take(group, p, "site_slot")
            if not group:
                del self.sites[p.site]


class LocalPeerStore:
    """Peers in this process's memory, bounded in swarms and peers per swarm."""

    def __init__(self, *, ttl: float, clock: Callable[[], float] = time.monotonic,
                 max_swarms: int = 200_000, max_peers_per_swarm: int = 10_000,
                 rng: random.Random | None = None) -> None:
        self.ttl = ttl
        self.clock = clock
        self.max_swarms = max_swarms
        self.max_peers_per_swarm = max_peers_per_swarm
        self.rng = rng or random.Random()
        self._swarms: dict[bytes, _Swarm] = {}
        self._total = 0

    # --- the interface ---------------------------------------------------------------------------
    def announce(self, info_hash: bytes, ip: str, port: int, peer_id: bytes, seed: bool, event: str, *,
                 numwant: int, site: str | None = None, listed: bool = False) -> SwarmView:
        self.update(info_hash, ip, port, peer_id, seed, event, site)
        return self.handout(info_hash, ip, port, numwant=numwant, site=site, listed=listed)

    def handout(self, info_hash: bytes, ip: str, port: int, *, numwant: int, site: str | None = None,
                listed: bool = False) -> SwarmView:
        swarm = self._swarms.get(info_hash)
        if swarm is None:
            return SwarmView(0, 0, 0, b"", b"", [] if listed else None)
        self._prune(info_hash, swarm, self.clock())
        chosen = handout.pick(swarm.sites.get(site, ()) if site is not None else (), swarm.seeds,
                              swarm.leechers, (ip, port), numwant, self.rng,
                              swarm.peers.get((ip, port))) if numwant > 0 else []
        nseeds = len(swarm.seeds)
        return SwarmView(nseeds, len(swarm.peers) - nseeds, swarm.downloaded,
                         b"".join([p.compact for p in chosen if not p.ipv6]),
                         b"".join([p.compact for p in chosen if p.ipv6]),
                         [(p.ip, p.port, p.peer_id) for p in chosen] if listed else None)

    def add_seed(self, info_hash: bytes, ip: str, port: int, peer_id: bytes, site: str, *,
                 started: int | None = None) -> None:
        self.update(info_hash, ip, port, peer_id, True, "started", site)
        swarm = self._swarms.get(info_hash)
        if started is not None and swarm is not None:
            swarm.started[site] = max(started, swarm.started.get(site, started))

    def remove(self, info_hash: bytes, ip: str, port: int, site: str | None = None, *,
               built: int | None = None) -> None:
        swarm = self._swarms.get(info_hash)
        if swarm is not None and site is not None and built is not None and swarm.started.get(site, -1) >= built:
            return
        self.update(info_hash, ip, port, b"", True, "stopped")

    def counts(self, info_hashes: Sequence[bytes]) -> list[SwarmCounts]:
        out = []
        for h in info_hashes:
            swarm = self._swarms.get(h)
            if swarm is None:
                out.append(SwarmCounts(0, 0, 0))
                continue
            self._prune(h, swarm, self.clock())
            out.append(SwarmCounts(len(swarm.seeds), len(swarm.leechers), swarm.downloaded))
        return out

    def seeds(self, info_hash: bytes) -> list[Seed]:
        swarm = self._swarms.get(info_hash)
        if swarm is None:
            return []
        self._prune(info_hash, swarm, self.clock())
        return [Seed(p.ip, p.port, p.site) for p in swarm.seeds]

    def has(self, info_hash: bytes) -> bool:
        return info_hash in self._swarms

    def swarms(self, limit: int) -> list[bytes]:
        return [h for _, h in zip(range(limit), self._swarms)]

    def totals(self) -> tuple[float, float]:
        return float(len(self._swarms)), float(self._total)

    def expire(self) -> int:
        """Drop every expired peer (and empty swarms); run periodically, not per request."""
        now = self.clock()
        return sum(self._prune(h, s, now) for h, s in list(self._swarms.items()))

    async def close(self) -> None:
        pass

    # --- the memory store's own ----------------------------------------------------------------
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
            swarm.unlink(old)
            self._total -= 1
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
            self._drop(swarm, next(iter(swarm.peers.values())))
        swarm.link(Peer(ip, port, peer_id, seed, self.clock() + self.ttl, packed, ipv6, site))
        self._total += 1

    def peers(self, info_hash: bytes) -> list[Peer]:
        """Every live peer of a swarm, in announce order (tests and handout.select)."""
        swarm = self._swarms.get(info_hash)
        if swarm is None:
            return []
        self._prune(info_hash, swarm, self.clock())
        return list(swarm.peers.values())

    def peer_total(self) -> int:
        return self._total

    def _drop(self, swarm: _Swarm, peer: Peer) -> None:
        del swarm.peers[(peer.ip, peer.port)]
        swarm.unlink(peer)
        self._total -= 1

    def _prune(self, info_hash: bytes, swarm: _Swarm, now: float) -> int:
        dropped = 0
        peers = swarm.peers
        while peers:
            peer = next(iter(peers.values()))
            if peer.expires > now:
                break
            self._drop(swarm, peer)
            dropped += 1
        if not peers and swarm.downloaded == 0:
            del self._swarms[info_hash]
        return dropped
