"""Starting seeds at sites when a swarm has fewer than it wants.

An announce for H calls `SeedStarter.ensure`; if H's swarm is short of
seeds, sites that hold H get a signed `POST {control_url}/api/seeds` and
the announce waits up to `start_wait` for them, so the endpoints they
answer go into that same announce answer (libtorrent does not re-announce
for 300 s, so a seedless first answer would cost the client five minutes).

A start of H at a site is claimed first (tracker.startstate): across every
tracker process sharing the state, fifty clients arriving together cause
one request per site, not fifty. The process that wins the claim asks the
site; announces in the same process wait on that request, and those in
other processes watch the swarm until the seed appears there (or their
wait is over). A site that answered 429 or failed is left alone for
`site_backoff` seconds, for every process.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import aiohttp

from tracker.config import TrackerConfig
from torrents.errors import ConfigError
from torrents.hostport import parse_hostport
from torrents.servicekit import tls
from torrents.servicekit.web import client_error, client_session, signed_request
from tracker import siteseeds
from tracker.peerstore import PeerStore, SwarmCounts, resolve
from tracker.startstate import LocalStartState, StartState
from tracker.sites import Site, SiteRegistry

log = logging.getLogger("btswarm.tracker.seeding")

# A start request may outlive the announce that caused it (start_wait):
# when it lands later the seed still joins the swarm for the next answers.
# The claim outlives the request by CLAIM_MARGIN, so no process asks again
# while it may still land; if the process dies, the claim expires.
CLAIM_MARGIN = 2.0
WATCH_EVERY = 0.1  # how often a start claimed by another process is looked for in the swarm
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
        try:
            host, port = parse_hostport(text)
        except ConfigError:
            continue
        if 1 <= port <= 65535:
            out.append((host, port))
    return tuple(out)


def parse_started(data: object) -> int | None:
    """`started` of a start answer: when the site started the seed, on its own clock; None if absent or malformed."""
    value = data.get("started") if isinstance(data, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


async def _ended(starts: set[asyncio.Task[Started | None]], timeout: float) -> set[asyncio.Task[Started | None]]:
    """The starts that ended within `timeout` (the first to end and any with it); with none to wait for, the
    time passes."""
    if not starts:
        await asyncio.sleep(timeout)
        return set()
    done, _ = await asyncio.wait(starts, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    return done


def _started(task: asyncio.Task[Started | None]) -> bool:
    """Whether an ended start added a seed."""
    started = None if task.cancelled() or task.exception() else task.result()
    return started is not None and bool(started.endpoints)


class SeedStarter:
    def __init__(self, config: TrackerConfig, sites: SiteRegistry, store: PeerStore, *,
                 state: StartState | None = None, outcomes: Outcomes | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.sites = sites
        self.store = store
        self.state = state or LocalStartState(clock)
        self.outcomes = outcomes
        self.clock = clock
        self.session: aiohttp.ClientSession | None = None
        self._inflight: dict[bytes, dict[str, asyncio.Task[Started | None]]] = {}  # this process's requests
        self._count = 0
        self._rotation = 0

    async def open(self) -> None:
        # A site's https:// control URL is verified (the system's CAs and [tracker] ca_file).
        self.session = client_session(tls.ca_file(self.config.ca_file), limit=MAX_INFLIGHT)

    async def close(self) -> None:
        tasks = [t for per in self._inflight.values() for t in per.values()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.session is not None:
            await self.session.close()

    def wanted(self, counts: SwarmCounts) -> int:
        return wanted_seeds(counts.incomplete, self.config.leechers_per_seed, self.config.max_seeds_per_swarm,
                            self.config.min_seeds)

    def short(self, info_hash: bytes, counts: SwarmCounts, sites_seeding: int) -> bool:
        """Whether H's swarm may want a start: fewer sites seeding it than seeds wanted (no other seed
        counts: tracker/siteseeds.py) and than sites hold it, or a start of ours in flight."""
        if info_hash in self._inflight:
            return True
        return sites_seeding < self.wanted(counts) and sites_seeding < len(siteseeds.holding_sites(self.sites, info_hash))

    async def ensure(self, info_hash: bytes, counts: SwarmCounts) -> bool:
        """Start seeds for H if fewer sites seed it than wanted; wait <= start_wait. True if the swarm has a
        site's seed that `counts` (the announce's view) did not count: one joined meanwhile."""
        holders = self.sites.holders.get(info_hash)
        if not holders:
            return False
        wanted = self.wanted(counts)
        if not self.short(info_hash, counts, siteseeds.at_once(len(siteseeds.said_seeding(self.sites, info_hash)),
                                                               counts.complete)):
            return False  # enough, or every site that could seeds H already
        before: int | None = None
        deadline = self.clock() + self.config.start_wait
        tried: set[str] = set()
        waiting: set[asyncio.Task[Started | None]] = set()
        gained = False
        while True:
            # Re-read each round: starts made by concurrent announces (here
            # or in other processes) land in the store while this one waits,
            # and a site seeding H already must not be asked again.
            # Claims first, then the swarm, never both at once: a start ends by adding its seed,
            # then releasing its claim, so a claim seen gone means its seed is seen (read together,
            # a loaded host let another tracker see neither and ask the site a second time).
            remote = await resolve(self.state.claimed(info_hash, holders))
            seeding = await self.seeding_sites(info_hash)
            if before is None:
                # What the announce saw, not this first read: a start that landed between its swarm read
                # and this one is a seed its view lacks (under load, first answers said complete=0
                # while both sites seeded: issue 28).
                before = min(len(seeding), counts.complete)
            gained |= len(seeding) > before
            mine = self._inflight.get(info_hash, {})
            remote -= set(mine)
            need = wanted - len(seeding - set(mine) - remote) - len(mine) - len(remote)
            if need > 0:
                exclude = seeding | tried | set(mine) | remote
                for site in (await self._candidates(info_hash, holders, exclude))[:need]:
                    tried.add(site.name)
                    if not await self._launch(info_hash, site):
                        remote.add(site.name)  # claimed by another process a moment ago: watch for it
                mine = self._inflight.get(info_hash, {})
            waiting |= set(mine.values())
            remaining = deadline - self.clock()
            if (not waiting and not remote) or remaining <= 0:
                break
            # Another process's start shows only in the swarm: look again shortly.
            done = await _ended(waiting, min(remaining, WATCH_EVERY) if remote else remaining)
            if not done and not remote:
                break
            waiting -= done
            gained |= any([_started(task) for task in done])  # a list: every task's outcome is read
            # A failed site frees its share: the loop asks the next candidate
            # while time remains; a success may already satisfy the swarm.
        return gained

    async def seeding_sites(self, info_hash: bytes) -> frozenset[str]:
        """The sites with a seed in H's swarm (tracker/siteseeds.py)."""
        seeds = await resolve(self.store.seeds(info_hash))
        return siteseeds.seeding_sites(self.sites, info_hash, ((s.ip, s.port) for s in seeds))

    async def _candidates(self, info_hash: bytes, holders: Sequence[str], exclude: set[str]) -> list[Site]:
        names = [n for n in holders if n not in exclude and n in self.config.site_secrets]
        if not names:
            return []
        backed_off = await resolve(self.state.backed_off(info_hash, names))
        found = []
        for name in names:
            site = self.sites.get(name)
            # A site whose seed of H is stuck (its storage hangs) would answer with that seed again.
            if site is not None and name not in backed_off and self.sites.is_up(site) and info_hash not in site.stuck:
                found.append(site)
        ordered = order_sites(found, info_hash, self._rotation)
        self._rotation += 1
        return ordered

    async def _launch(self, info_hash: bytes, site: Site) -> bool:
        """Claim the start of H at `site` and ask it; False if another process holds the claim."""
        if self._count >= MAX_INFLIGHT or self.session is None:
            return True  # this process has enough requests outstanding; nobody else is asked either
        if not await resolve(self.state.claim(info_hash, site.name, self.config.start_timeout + CLAIM_MARGIN)):
            return False
        if site.name not in self._inflight.get(info_hash, {}):
            task = asyncio.get_running_loop().create_task(self._start(info_hash, site))
            self._inflight.setdefault(info_hash, {})[site.name] = task
            self._count += 1
        return True

    async def _start(self, info_hash: bytes, site: Site) -> Started | None:
        hex_hash = info_hash.hex()
        t0 = self.clock()
        outcome = "failed"
        try:
            assert self.session is not None
            # Won the claim, but the swarm was read before it: another process's whole start here
            # (claim, request, seed added, claim released) may fit in between on a loaded host. Its
            # seed was added before its claim went, so it shows in the swarm read now: ask only if not.
            if site.name in await self.seeding_sites(info_hash):
                outcome = "seeding"
                return None
            status, data = await signed_request(
                self.session, "POST", f"{site.control_url}/api/seeds", site=site.name,
                secret=self.config.site_secrets[site.name], payload={"info_hash": hex_hash}, timeout=self.config.start_timeout)
            if status == 200:
                endpoints = parse_endpoints(data)
                if endpoints:
                    outcome = "started"
                    started = parse_started(data)
                    for ep in endpoints:
                        await resolve(self.store.add_seed(info_hash, ep[0], ep[1],
                                                          siteseeds.site_peer_id(site.name, ep), site.name,
                                                          started=started))
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
            log.warning("%s: seed start at %s failed: %s", hex_hash, site.name,
                        client_error(exc, tls.hint("tracker")))
        finally:
            if self.outcomes is not None and outcome != "seeding":  # no request was sent
                self.outcomes.seed_start(outcome, self.clock() - t0)
            await self._finish(info_hash, site.name, outcome)
        return None

    async def _finish(self, info_hash: bytes, site: str, outcome: str) -> None:
        """Back off after a failure, give the claim up, forget the request; never raises."""
        try:
            if outcome == "not_found":
                await resolve(self.state.back_off(site, self.config.site_backoff, info_hash))
            elif outcome not in ("started", "seeding"):
                await resolve(self.state.back_off(site, self.config.site_backoff))
                log.info("%s: backing off for %.0f s (%s)", site, self.config.site_backoff, outcome)
            await resolve(self.state.release(info_hash, site))
        except Exception as exc:  # the shared state is unreachable: the claim expires by itself
            log.warning("%s: %s: cannot record the start's end (%s)", info_hash.hex(), site, exc)
        finally:
            per = self._inflight.get(info_hash)
            if per is not None:
                per.pop(site, None)
                if not per:
                    del self._inflight[info_hash]
            self._count -= 1
