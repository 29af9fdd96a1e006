"""Starting seeds at sites when a swarm has fewer than it wants.

An announce for H calls `SeedStarter.ensure`; if H's swarm is short of
seeds, sites that hold H get a signed `POST {control_url}/api/seeds` and
the announce waits up to `start_wait` for them, so the endpoints they
answer go into that same announce answer (libtorrent does not re-announce
for 300 s, so a seedless first answer would cost the client five minutes).

Concurrent announces for H share one in-flight start per (H, site): fifty
clients arriving together cause one request per site, not fifty. A site
that answered 429 or failed is left alone for `site_backoff` seconds.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import time
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import aiohttp

from tracker.config import TrackerConfig
from torrents.servicekit.web import signed_request
from tracker.peerstore import PeerStore, SwarmCounts
from tracker.sites import Site, SiteRegistry

log = logging.getLogger("btswarm.tracker.seeding")

# A start request may outlive the announce that caused it (start_wait):
# when it lands later the seed still joins the swarm for the next answers.
START_TIMEOUT = 10.0
MAX_INFLIGHT = 64  # start requests outstanding at once, over all swarms and sites
MAX_ENDPOINTS = 16  # taken from one site's answer


class Outcomes(Protocol):
    def seed_start(self, outcome: str, seconds: float) -> None: ...


@dataclass(frozen=True)
class Started:
    site: str
    endpoints: tuple[tuple[str, int], ...]


def wanted_seeds(leechers: int, leechers_per_seed: int, cap: int, minimum: int = 1) -> int:
    """Seeds a swarm should have: none without leechers, else one per `leechers_per_seed`, at least `minimum`."""
    if leechers <= 0:
        return 0
    return min(max(1, cap), max(1, minimum, math.ceil(leechers / max(1, leechers_per_seed))))


def order_sites(candidates: Sequence[Site], info_hash: bytes, rotation: int) -> list[Site]:
    """Already seeding H first, then least loaded (load / capacity), then round robin.

    `rotation` advances per decision, so sites that tie take turns.
    """
    n = len(candidates)
    by_name = sorted(candidates, key=lambda s: s.name)

    def key(item: tuple[int, Site]) -> tuple[bool, float, int]:
        i, s = item
        fill = s.load / s.capacity if s.capacity > 0 else float(s.load > 0)
        return (info_hash not in s.seeding, fill, (i - rotation) % n)

    return [s for _, s in sorted(enumerate(by_name), key=key)]


def parse_endpoints(data: object) -> tuple[tuple[str, int], ...]:
    """`peers` of a start answer → endpoints; anything malformed is dropped."""
    if not isinstance(data, dict) or not isinstance(data.get("peers"), list):
        return ()
    out = []
    for text in data["peers"][:MAX_ENDPOINTS]:
        if not isinstance(text, str):
            continue
        host, _, port = text.rpartition(":")
        if host and port.isdigit() and 1 <= int(port) <= 65535:
            out.append((host.strip("[]"), int(port)))
    return tuple(out)


def site_peer_id(site: str, endpoint: tuple[str, int]) -> bytes:
    """A stable 20-byte id for a seed the tracker added on a site's word (its own announce replaces it)."""
    return hashlib.sha1(f"{site}\0{endpoint[0]}:{endpoint[1]}".encode()).digest()


class SeedStarter:
    def __init__(self, config: TrackerConfig, sites: SiteRegistry, store: PeerStore, *,
                 outcomes: Outcomes | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.sites = sites
        self.store = store
        self.outcomes = outcomes
        self.clock = clock
        self.session: aiohttp.ClientSession | None = None
        self._inflight: dict[bytes, dict[str, asyncio.Task[Started | None]]] = {}
        self._count = 0
        self._site_backoff: dict[str, float] = {}
        self._pair_backoff: dict[tuple[bytes, str], float] = {}
        self._rotation = 0

    async def open(self) -> None:
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=MAX_INFLIGHT))

    async def close(self) -> None:
        tasks = [t for per in self._inflight.values() for t in per.values()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.session is not None:
            await self.session.close()

    def backed_off(self, site: str, info_hash: bytes | None = None) -> bool:
        now = self.clock()
        if self._site_backoff.get(site, 0.0) > now:
            return True
        return info_hash is not None and self._pair_backoff.get((info_hash, site), 0.0) > now

    async def ensure(self, info_hash: bytes, counts: SwarmCounts) -> list[Started]:
        """Start seeds for H if its swarm is short; wait ≤ start_wait; return what started in time."""
        holders = self.sites.holders.get(info_hash)
        if not holders:
            return []
        wanted = wanted_seeds(counts.incomplete, self.config.leechers_per_seed, self.config.max_seeds_per_swarm,
                              self.config.min_seeds)
        inflight = self._inflight.get(info_hash, {})
        if counts.complete + len(inflight) >= wanted and not inflight:
            return []
        deadline = self.clock() + self.config.start_wait
        tried: set[str] = set()
        results: list[Started] = []
        waiting: set[asyncio.Task[Started | None]] = set()
        while True:
            # Re-read each round: starts made by concurrent announces land in
            # the store while this one waits, and a site seeding H already
            # must not be asked again.
            inflight = self._inflight.get(info_hash, {})
            need = wanted - self.store.counts(info_hash).complete - len(inflight)
            if need > 0:
                exclude = self._seeding_sites(info_hash) | tried | set(inflight)
                for site in self._candidates(info_hash, holders, exclude)[:need]:
                    tried.add(site.name)
                    self._launch(info_hash, site)
                inflight = self._inflight.get(info_hash, {})
            waiting |= set(inflight.values())
            remaining = deadline - self.clock()
            if not waiting or remaining <= 0:
                break
            done, _ = await asyncio.wait(waiting, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                break
            waiting -= done
            for task in done:
                started = None if task.cancelled() or task.exception() else task.result()
                if started is not None and started.endpoints:
                    results.append(started)
            # A failed site frees its share: the loop asks the next candidate
            # while time remains; a success may already satisfy the swarm.
        return results

    def _seeding_sites(self, info_hash: bytes) -> set[str]:
        out = set()
        for p in self.store.peers(info_hash):
            if p.seed:
                name = p.site or self.sites.site_of(p.ip)
                if name:
                    out.add(name)
        return out

    def _candidates(self, info_hash: bytes, holders: Sequence[str], exclude: set[str]) -> list[Site]:
        found = []
        for name in holders:
            site = self.sites.get(name)
            if (site is None or name in exclude or not self.sites.is_up(site)
                    or self.backed_off(name, info_hash) or name not in self.config.site_secrets):
                continue
            found.append(site)
        ordered = order_sites(found, info_hash, self._rotation)
        self._rotation += 1
        return ordered

    def _launch(self, info_hash: bytes, site: Site) -> None:
        if self._count >= MAX_INFLIGHT or self.session is None:
            return
        task = asyncio.get_running_loop().create_task(self._start(info_hash, site))
        self._inflight.setdefault(info_hash, {})[site.name] = task
        self._count += 1

    async def _start(self, info_hash: bytes, site: Site) -> Started | None:
        hex_hash = info_hash.hex()
        t0 = self.clock()
        outcome = "failed"
        try:
            assert self.session is not None
            status, data = await signed_request(
                self.session, "POST", f"{site.control_url}/api/seeds", site=site.name,
                secret=self.config.site_secrets[site.name], payload={"info_hash": hex_hash}, timeout=START_TIMEOUT)
            if status == 200:
                endpoints = parse_endpoints(data)
                if endpoints:
                    outcome = "started"
                    for ep in endpoints:
                        self.store.update(info_hash, ep[0], ep[1], site_peer_id(site.name, ep), True, "started",
                                          site=site.name)
                    log.info("%s: seed started at %s: %s", hex_hash, site.name, endpoints)
                    return Started(site.name, endpoints)
                log.warning("%s: %s answered 200 without peers", hex_hash, site.name)
            elif status == 429:
                outcome = "busy"
            elif status == 404:
                outcome = "not_found"
            else:
                log.warning("%s: %s answered %d to a seed start", hex_hash, site.name, status)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            log.warning("%s: seed start at %s failed: %s", hex_hash, site.name, exc or type(exc).__name__)
        finally:
            per = self._inflight.get(info_hash)
            if per is not None:
                per.pop(site.name, None)
                if not per:
                    del self._inflight[info_hash]
            self._count -= 1
            if self.outcomes is not None:
                self.outcomes.seed_start(outcome, self.clock() - t0)
        until = self.clock() + self.config.site_backoff
        if outcome == "not_found":
            self._prune_pairs()
            self._pair_backoff[(info_hash, site.name)] = until
        else:
            self._site_backoff[site.name] = until
            log.info("%s: backing off for %.0f s (%s)", site.name, self.config.site_backoff, outcome)
        return None

    def _prune_pairs(self) -> None:
        if len(self._pair_backoff) > 10_000:
            now = self.clock()
            self._pair_backoff = {k: v for k, v in self._pair_backoff.items() if v > now}
