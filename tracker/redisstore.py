"""The tracker's state in Redis: swarms, starts and sites, shared by every tracker process and host.

The Redis implementations of tracker.peerstore.PeerStore,
tracker.startstate.StartState and tracker.sites.SiteRegistry, on one
tracker.resp.RedisClient. Nothing here scans: every key is reached by
name. With `P` the configured prefix (`bt:`) and `H` an info-hash in hex,
the {H} hash tag putting one swarm's keys in one Cluster slot:

    P{H}:s            sorted set  the swarm's seeds: compact endpoint (6 bytes, 18 for IPv6) -> expiry, ms
    P{H}:l            sorted set  its leechers, the same
    P{H}:p            hash        endpoint -> peer id (20 bytes) + site name; "#d" completed count,
                                  "#x" until when P swarms lists the swarm
    P{H}:t            hash        site name -> that site's stamp of its last start of H (its own clock)
    P{H}:a:SITE       sorted set  its peers at SITE -> expiry (handed out first to SITE's peers)
    P{H}:start:SITE   string      a start of H at SITE in flight: the claiming process's token (SET NX PX)
    P{H}:nf:SITE      string      SITE does not hold H (it answered 404): leave it alone, PX site_backoff
    Pbackoff:SITE     string      SITE answered 429 or failed: leave it alone, PX site_backoff
    Pswarms           sorted set  info-hash (20 bytes) -> until when it may have peers (listing, full scrape)
    Psites            hash        site name -> its last heartbeat as JSON (uploaded too), can_seed left out
    Psite:SITE:can    string      SITE's can_seed: 20 bytes per info-hash, written when it changes

An announce is one EVALSHA (tracker/lua/announce.lua): expired members
trimmed (ZREMRANGEBYRANK over ZRANGEBYSCORE), the peer recorded, the
swarm counted and its handout drawn with ZRANDMEMBER, every key of the
swarm given the ttl again, so a dead swarm vanishes by itself. Expiry
scores are the tracker hosts' wall clocks (keep them in NTP sync; a skew
well under the ttl of two intervals does no harm).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import os
import secrets
import socket
import time
from importlib import resources
from typing import Any, Awaitable, Callable, Mapping, Sequence

from tracker.peerstore import Seed, SwarmCounts, SwarmView
from tracker.protocol import compact_endpoint
from tracker.resp import RedisClient, RedisError, Script
from tracker.sites import Site, SiteRegistry

log = logging.getLogger("btswarm.tracker.redisstore")

ANNOUNCE = Script(resources.files("tracker").joinpath("lua/announce.lua").read_text())
SEEDS = Script("""
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 1000)
if #gone > 0 then
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #gone - 1)
  redis.call('HDEL', KEYS[2], unpack(gone))
end
local seeds = redis.call('ZRANGE', KEYS[1], 0, 999)
if #seeds == 0 then return {{}, {}} end
return {seeds, redis.call('HMGET', KEYS[2], unpack(seeds))}
""")
RELEASE = Script("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0")
HASH_LEN = 20


def endpoint_of(member: bytes) -> tuple[str, int]:
    """A compact endpoint (BEP 23 / BEP 7) back to (ip, port)."""
    family = socket.AF_INET if len(member) == 6 else socket.AF_INET6
    return socket.inet_ntop(family, member[:-2]), int.from_bytes(member[-2:], "big")


class RedisPeerStore:
    """Swarms in Redis: any tracker process answers any announce the same way."""

    def __init__(self, client: RedisClient, *, ttl: float, prefix: str = "bt:",
                 clock: Callable[[], float] = time.time, max_peers_per_swarm: int = 10_000) -> None:
        self.client = client
        self.ttl_ms = int(ttl * 1000)
        self.prefix = prefix.encode()
        self.clock = clock
        self.max_peers = max_peers_per_swarm
        self.index = self.prefix + b"swarms"
        self._swarm_total = math.nan

    def _keys(self, info_hash: bytes, site: str | None) -> list[bytes]:
        base = self.prefix + b"{" + info_hash.hex().encode() + b"}:"
        keys = [base + b"s", base + b"l", base + b"p", base + b"t"]
        if site is not None:
            keys.append(base + b"a:" + site.encode())
        return keys

    def _now(self) -> int:
        return int(self.clock() * 1000)

    def announce(self, info_hash: bytes, ip: str, port: int, peer_id: bytes, seed: bool, event: str, *,
                 numwant: int, site: str | None = None, listed: bool = False) -> Awaitable[SwarmView]:
        try:
            member, _ = compact_endpoint(ip, port)
            op = b"x" if event == "stopped" else b"s" if seed else b"l"
        except (OSError, ValueError):
            member, op = b"", b"n"  # an address no client could connect to: not recorded
        value = peer_id + site.encode() if site else peer_id
        return self._run(info_hash, site, member, value, op, event == "completed", numwant, listed)

    def _stamped(self, info_hash: bytes, ip: str, port: int, peer_id: bytes, op: bytes, site: str,
                 stamp: int) -> Awaitable[SwarmView]:
        try:
            member, _ = compact_endpoint(ip, port)
        except (OSError, ValueError):
            member, op = b"", b"n"
        return self._run(info_hash, site, member, peer_id + site.encode(), op, False, 0, False, stamp)

    def handout(self, info_hash: bytes, ip: str, port: int, *, numwant: int, site: str | None = None,
                listed: bool = False) -> Awaitable[SwarmView]:
        try:
            member, _ = compact_endpoint(ip, port)
        except (OSError, ValueError):
            member = b""
        return self._run(info_hash, site, member, b"", b"n", False, numwant, listed)

    def add_seed(self, info_hash: bytes, ip: str, port: int, peer_id: bytes, site: str, *,
                 started: int | None = None) -> Awaitable[Any]:
        if started is None:
            return self.announce(info_hash, ip, port, peer_id, True, "started", numwant=0, site=site)
        return self._stamped(info_hash, ip, port, peer_id, b"s", site, started)

    def remove(self, info_hash: bytes, ip: str, port: int, site: str | None = None, *,
               built: int | None = None) -> Awaitable[Any]:
        if built is None or site is None:
            return self.announce(info_hash, ip, port, b"", True, "stopped", numwant=0, site=site)
        return self._stamped(info_hash, ip, port, b"", b"x", site, built)

    def _run(self, info_hash: bytes, site: str | None, member: bytes, value: bytes, op: bytes,
             completed: bool, numwant: int, listed: bool, stamp: int | None = None) -> Awaitable[SwarmView]:
        """The script's answer as a SwarmView: a Future chained by callbacks when connected (the hot
        path: no task, no coroutine per announce), else a coroutine that connects first."""
        keys = self._keys(info_hash, site)
        args = (self._now(), self.ttl_ms, member, value, op, b"1" if completed else b"0", numwant,
                b"1" if listed else b"0", self.max_peers, b"" if stamp is None else stamp,
                site.encode() if stamp is not None and site else b"")
        reply = self.client.evalsha_nowait(ANNOUNCE, keys, args)
        if not isinstance(reply, asyncio.Future):
            reply.close()  # type: ignore[attr-defined]  # not connected: the slow path below
            return self._run_later(info_hash, keys, args, listed)
        out: asyncio.Future[SwarmView] = asyncio.get_running_loop().create_future()

        def done(f: asyncio.Future) -> None:
            if out.done():
                return
            if f.cancelled():
                out.cancel()
                return
            exc = f.exception()
            if isinstance(exc, RedisError) and exc.problem.startswith("NOSCRIPT"):
                # First use on this server (or it restarted): load the script, then answer.
                task = asyncio.ensure_future(self._run_later(info_hash, keys, args, listed))
                task.add_done_callback(lambda t: _copy(t, out))
            elif exc is not None:
                out.set_exception(exc)
            else:
                try:
                    out.set_result(self._view(info_hash, f.result(), listed))
                except Exception as e:  # a malformed reply: the caller answers "internal error"
                    out.set_exception(e)

        reply.add_done_callback(done)
        return out

    async def _run_later(self, info_hash: bytes, keys: list[bytes], args: tuple, listed: bool) -> SwarmView:
        return self._view(info_hash, await self.client.evalsha(ANNOUNCE, keys, args), listed)

    def _view(self, info_hash: bytes, reply: list, listed: bool) -> SwarmView:
        complete, incomplete, downloaded, index_until, peers4, peers6, members, ids = reply
        if index_until:
            self._index(info_hash, index_until)
        out = None
        if listed:
            out = [(*endpoint_of(m), i[:HASH_LEN]) for m, i in zip(members, ids)]
        return SwarmView(complete, incomplete, downloaded, peers4, peers6, out)

    def _index(self, info_hash: bytes, until_ms: int) -> None:
        # Not waited for: the swarm's answer does not depend on it, and a
        # failure (Redis gone) shows in the next announce anyway.
        fut = asyncio.ensure_future(self.client.call(b"ZADD", self.index, until_ms, info_hash))
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())

    async def counts(self, info_hashes: Sequence[bytes]) -> list[SwarmCounts]:
        views = await asyncio.gather(*(self._run(h, None, b"", b"", b"n", False, 0, False) for h in info_hashes))
        return [v.counts for v in views]

    async def seeds(self, info_hash: bytes) -> list[Seed]:
        keys = self._keys(info_hash, None)
        members, values = await self.client.evalsha(SEEDS, (keys[0], keys[2]), (self._now(),))
        out = []
        for m, v in zip(members, values):
            ip, port = endpoint_of(m)
            site = v[HASH_LEN:].decode(errors="replace") if v and len(v) > HASH_LEN else None
            out.append(Seed(ip, port, site))
        return out

    async def has(self, info_hash: bytes) -> bool:
        return bool(await self.client.call(b"EXISTS", self._keys(info_hash, None)[2]))

    async def swarms(self, limit: int) -> list[bytes]:
        return list(await self.client.call(b"ZRANGEBYSCORE", self.index, self._now(), b"+inf", b"LIMIT", 0, limit))

    async def expire(self) -> int:
        """Drop dead swarms from the index (their keys expire by themselves); refresh the gauge."""
        dropped = await self.client.call(b"ZREMRANGEBYSCORE", self.index, b"-inf", self._now())
        self._swarm_total = float(await self.client.call(b"ZCARD", self.index))
        return int(dropped)

    def totals(self) -> tuple[float, float]:
        return self._swarm_total, math.nan  # peers over all swarms would take a scan

    async def close(self) -> None:
        await self.client.close()


class RedisStartState:
    """Starts in flight and back-offs as keys with a time to live: a start is claimed with SET NX PX."""

    def __init__(self, client: RedisClient, *, prefix: str = "bt:") -> None:
        self.client = client
        self.prefix = prefix.encode()
        # Whose claim it is: a claim taken over after expiry is not released by its first holder.
        self.token = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}".encode()

    def _key(self, info_hash: bytes, what: bytes, site: str) -> bytes:
        return self.prefix + b"{" + info_hash.hex().encode() + b"}:" + what + b":" + site.encode()

    def _site_key(self, site: str) -> bytes:
        return self.prefix + b"backoff:" + site.encode()

    async def claim(self, info_hash: bytes, site: str, ttl: float) -> bool:
        reply = await self.client.call(b"SET", self._key(info_hash, b"start", site), self.token, b"NX", b"PX",
                                       int(ttl * 1000))
        return reply is not None

    async def release(self, info_hash: bytes, site: str) -> None:
        await self.client.evalsha(RELEASE, (self._key(info_hash, b"start", site),), (self.token,))

    async def claimed(self, info_hash: bytes, sites: Sequence[str]) -> set[str]:
        if not sites:
            return set()
        values = await self.client.call(b"MGET", *(self._key(info_hash, b"start", s) for s in sites))
        return {s for s, v in zip(sites, values) if v is not None}

    async def back_off(self, site: str, seconds: float, info_hash: bytes | None = None) -> None:
        key = self._site_key(site) if info_hash is None else self._key(info_hash, b"nf", site)
        await self.client.call(b"SET", key, b"1", b"PX", max(1, int(seconds * 1000)))

    async def backed_off(self, info_hash: bytes, sites: Sequence[str]) -> set[str]:
        if not sites:
            return set()
        # The pair keys share H's slot (one MGET); each site's key has its own.
        pairs, *each = await asyncio.gather(
            self.client.call(b"MGET", *(self._key(info_hash, b"nf", s) for s in sites)),
            *(self.client.call(b"EXISTS", self._site_key(s)) for s in sites))
        return {s for s, p, e in zip(sites, pairs, each) if p is not None or e}


def _copy(src: asyncio.Future, dst: asyncio.Future) -> None:
    """Settle `dst` as `src` was settled."""
    if dst.done():
        return
    if src.cancelled():
        dst.cancel()
    elif src.exception() is not None:
        dst.set_exception(src.exception())
    else:
        dst.set_result(src.result())


def _digest(hashes: frozenset[bytes]) -> str:
    return hashlib.sha1(b"".join(sorted(hashes))).hexdigest()


class RedisSiteRegistry(SiteRegistry):
    """The site registry written through to Redis and re-read from it every REFRESH seconds.

    Reads (holders, site_of, is_up) stay local and synchronous, as in
    SiteRegistry: an announce never waits for the registry. Up and down
    are judged on the wall clock of the tracker that took the heartbeat.
    """

    REFRESH = 1.0

    def __init__(self, client: RedisClient, *, prefix: str = "bt:", heartbeat_interval: float,
                 networks: Mapping[str, tuple[str, ...]] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(heartbeat_interval=heartbeat_interval, clock=clock, networks=networks)
        self.client = client
        self.prefix = prefix.encode()
        self.key = self.prefix + b"sites"
        self._can: dict[str, tuple[str, frozenset[bytes]]] = {}  # name -> (digest, can_seed) last seen in Redis
        self.refresh_failures = 0

    def _can_key(self, name: str) -> bytes:
        return self.prefix + b"site:" + name.encode() + b":can"

    async def beat(self, site: Site) -> None:  # type: ignore[override]
        super().beat(site)
        digest = _digest(site.can_seed)
        writes = []
        # Written when it changed, or when Redis lost it (restarted empty): a tracker started
        # after that would otherwise read no can_seed for the site.
        if (self._can.get(site.name, ("",))[0] != digest
                or not await self.client.call(b"EXISTS", self._can_key(site.name))):
            writes.append(self.client.call(b"SET", self._can_key(site.name), b"".join(sorted(site.can_seed))))
            self._can[site.name] = (digest, site.can_seed)
        doc = {"control_url": site.control_url, "peers": list(site.peers),
               "seeding": sorted(h.hex() for h in site.seeding), "stuck": sorted(h.hex() for h in site.stuck),
               "load": site.load, "capacity": site.capacity,
               "uploaded": {h.hex(): n for h, n in site.uploaded.items()},
               "ssl_peers": list(site.ssl_peers), "restricted": {h.hex(): n for h, n in site.restricted.items()},
               "last_seen": site.last_seen, "seen": site.seen_mono, "can": digest}
        # The can_seed blob is written before the document that names its digest.
        writes.append(self.client.call(b"HSET", self.key, site.name, json.dumps(doc)))
        await asyncio.gather(*writes)

    async def refresh(self) -> None:  # type: ignore[override]
        raw = await self.client.call(b"HGETALL", self.key)
        docs = {}
        for name, text in zip(raw[::2], raw[1::2]):
            try:
                docs[name.decode()] = json.loads(text)
            except (UnicodeDecodeError, ValueError):
                log.warning("%s: unreadable site document in Redis; ignored", name[:60])
        stale = [n for n, d in docs.items() if self._can.get(n, ("",))[0] != d.get("can")]
        blobs = await asyncio.gather(*(self.client.call(b"GET", self._can_key(n)) for n in stale))
        for name, blob in zip(stale, blobs):
            blob = blob or b""
            hashes = frozenset(blob[i:i + HASH_LEN] for i in range(0, len(blob) - HASH_LEN + 1, HASH_LEN))
            self._can[name] = (_digest(hashes), hashes)
        # A heartbeat this process took since the HGETALL went out is newer
        # than what it read: never step back from it.
        sites = [s for s in self.all() if s.name not in docs]
        for name, d in docs.items():
            old = self.get(name)
            if old is not None and old.seen_mono >= float(d.get("seen", 0) or 0):
                sites.append(old)
                continue
            try:
                seeding = frozenset(bytes.fromhex(h) for h in d.get("seeding", []))
                site = Site(name=name, control_url=d["control_url"], peers=tuple(d.get("peers", [])),
                            can_seed=self._can.get(name, ("", frozenset()))[1],
                            seeding=old.seeding if old is not None and old.seeding == seeding else seeding,
                            load=int(d.get("load", 0)), capacity=int(d.get("capacity", 0)),
                            last_seen=float(d.get("last_seen", 0)), seen_mono=float(d.get("seen", 0)),
                            stuck=frozenset(bytes.fromhex(h) for h in d.get("stuck", [])),
                            uploaded={bytes.fromhex(h): int(n) for h, n in d.get("uploaded", {}).items()},
                            ssl_peers=tuple(d.get("ssl_peers", [])),
                            restricted={bytes.fromhex(h): str(n) for h, n in d.get("restricted", {}).items()})
            except (KeyError, TypeError, ValueError):
                log.warning("%s: malformed site document in Redis; ignored", name[:60])
                continue
            if old is not None and old.peers == site.peers:
                site.peers = old.peers  # the same objects: load() compares them cheaply
            sites.append(site)
        self.load(sites)
