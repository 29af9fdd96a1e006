"""bt-tracker's aiohttp app: routes, and the background work (expiry, repository poll).

`create_app(config, *, peerstore=None, sites=None, clock=None)` builds it;
tests pass their own store (with a fake clock) or registry.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import AsyncIterator, Callable

import aiohttp
from aiohttp import web

from torrents import auth
from tracker.config import TrackerConfig
from torrents.errors import AuthError, NotFound
from torrents.servicekit.web import add_metrics_route, error_middleware, parse_json_body, read_signed
from tracker import protocol
from tracker.announcer import Announcer
from tracker.metrics import TrackerMetrics
from tracker.peerstore import LocalPeerStore, PeerStore
from tracker.seeding import SeedStarter
from tracker.sites import SiteRegistry, parse_heartbeat

log = logging.getLogger("btswarm.tracker")

ANNOUNCER = web.AppKey("announcer", Announcer)
VERIFIER = web.AppKey("verifier", auth.Verifier)
MAX_HEARTBEAT = 16 * 1024 * 1024  # 200,000 hex info-hashes fit
REPO_TIMEOUT = 10.0
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
BENCODED = "text/plain"  # BEP 3 names none; what opentracker sends, and what clients accept


def create_app(config: TrackerConfig, *, peerstore: PeerStore | None = None, sites: SiteRegistry | None = None,
               clock: Callable[[], float] = time.monotonic) -> web.Application:
    store = peerstore or LocalPeerStore(ttl=2 * config.interval, clock=clock)
    registry = sites or SiteRegistry(heartbeat_interval=config.heartbeat_interval, clock=clock,
                                     networks=config.site_networks)
    metrics = TrackerMetrics(swarms=lambda: sum(1 for _ in store.swarms()), peers=store.peer_total)
    starter = SeedStarter(config, registry, store, outcomes=metrics, clock=clock)
    announcer = Announcer(config, store, registry, starter, metrics)

    app = web.Application(middlewares=[error_middleware], client_max_size=MAX_HEARTBEAT)
    app[ANNOUNCER] = announcer
    app[VERIFIER] = auth.Verifier(config.site_secrets)
    app.router.add_get("/announce", announce)
    app.router.add_get("/scrape", scrape)
    app.router.add_post("/api/sites/{site}/heartbeat", heartbeat)
    app.router.add_get("/api/swarms", swarms)
    app.router.add_get("/api/swarms/{info_hash}", swarm)
    app.router.add_get("/api/sites", list_sites)
    app.router.add_get("/healthz", healthz)
    add_metrics_route(app, metrics.registry)
    app.cleanup_ctx.append(_seed_starter(starter))
    app.cleanup_ctx.append(_expiry)
    if config.repo:
        app.cleanup_ctx.append(_repo_poll)
    return app


def _query(request: web.Request) -> str:
    # raw_path is the request target exactly as received (no URL object
    # built, no decoding): the query is parsed to bytes in protocol.
    return request.raw_path.partition("?")[2]


async def announce(request: web.Request) -> web.Response:
    try:
        body = await request.app[ANNOUNCER].announce(_query(request), request.remote or "")
    except Exception:
        # Clients get a bencoded failure, never a 5xx page they cannot parse.
        log.exception("announce %r: internal error", request.raw_path[:200])
        body = protocol.failure_answer("tracker: internal error")
    return web.Response(body=body, content_type=BENCODED)


async def scrape(request: web.Request) -> web.Response:
    try:
        body = request.app[ANNOUNCER].scrape(_query(request))
    except Exception:
        log.exception("scrape %r: internal error", request.raw_path[:200])
        body = protocol.failure_answer("tracker: internal error")
    return web.Response(body=body, content_type=BENCODED)


async def heartbeat(request: web.Request) -> web.Response:
    name = request.match_info["site"]
    signer, raw = await read_signed(request, request.app[VERIFIER], max_body=MAX_HEARTBEAT)
    if signer != name:
        raise AuthError(name, f"heartbeat signed by site {signer!r}")
    announcer = request.app[ANNOUNCER]
    site = parse_heartbeat(name, parse_json_body(raw, f"heartbeat from {name}"), now=time.time(),
                           mono=announcer.sites.clock())
    announcer.site_beat(site)
    log.debug("heartbeat from %s: %d can seed, %d seeding, load %d/%d", name, len(site.can_seed),
              len(site.seeding), site.load, site.capacity)
    return web.json_response({"ok": True, "interval": announcer.config.heartbeat_interval})


def _swarm_json(announcer: Announcer, info_hash: bytes) -> dict:
    c = announcer.store.counts(info_hash)
    return {"info_hash": info_hash.hex(), "seeds": c.complete, "leechers": c.incomplete,
            "completed": c.downloaded, "sites": announcer.seeding_sites(info_hash)}


async def swarms(request: web.Request) -> web.Response:
    announcer = request.app[ANNOUNCER]
    return web.json_response({"swarms": [_swarm_json(announcer, h) for h in announcer.store.swarms()]})


async def swarm(request: web.Request) -> web.Response:
    announcer = request.app[ANNOUNCER]
    hex_hash = request.match_info["info_hash"].lower()
    if not _HEX40.match(hex_hash):
        raise NotFound(hex_hash[:60], "not an info-hash (40 hex characters)")
    h = bytes.fromhex(hex_hash)
    if not announcer.store.has(h) and not announcer.known(h):
        raise NotFound(hex_hash, "no such swarm")
    return web.json_response(_swarm_json(announcer, h))


async def list_sites(request: web.Request) -> web.Response:
    registry = request.app[ANNOUNCER].sites
    return web.json_response({"sites": [
        {"name": s.name, "control_url": s.control_url, "peers": list(s.peers), "up": registry.is_up(s),
         "last_seen": int(s.last_seen), "load": s.load, "capacity": s.capacity, "can_seed": len(s.can_seed),
         "seeding": sorted(h.hex() for h in s.seeding)}
        for s in registry.all()]})


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


def _seed_starter(starter: SeedStarter) -> Callable[[web.Application], AsyncIterator[None]]:
    async def ctx(app: web.Application) -> AsyncIterator[None]:
        await starter.open()
        yield
        await starter.close()
    return ctx


async def _periodic(every: float, work: Callable[[], object], what: str) -> None:
    while True:
        await asyncio.sleep(every)
        try:
            result = work()
            if asyncio.iscoroutine(result):
                await result
        except Exception:
            log.exception("%s failed", what)


async def _expiry(app: web.Application) -> AsyncIterator[None]:
    announcer = app[ANNOUNCER]
    every = max(1.0, min(30.0, announcer.config.interval / 2))
    task = asyncio.get_running_loop().create_task(_periodic(every, announcer.store.expire, "peer expiry"))
    yield
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def fetch_published(session: aiohttp.ClientSession, repo: str) -> list[bytes]:
    """The repository's published info-hashes (`GET {repo}/api/info-hashes`)."""
    url = repo.rstrip("/") + "/api/info-hashes"
    async with session.get(url, timeout=aiohttp.ClientTimeout(total=REPO_TIMEOUT)) as resp:
        if resp.status != 200:
            raise aiohttp.ClientResponseError(resp.request_info, resp.history, status=resp.status)
        data = await resp.json(content_type=None)
    values = data.get("info_hashes") if isinstance(data, dict) else None
    if not isinstance(values, list):
        raise ValueError(f"{url}: no info_hashes list")
    return [bytes.fromhex(v) for v in values if isinstance(v, str) and _HEX40.match(v)]


async def _repo_poll(app: web.Application) -> AsyncIterator[None]:
    announcer = app[ANNOUNCER]
    repo = announcer.config.repo

    async def poll_forever() -> None:
        async with aiohttp.ClientSession() as session:
            while True:
                try:
                    hashes = await fetch_published(session, repo)
                    announcer.set_published(hashes)
                    log.debug("%s: %d published info-hashes", repo, len(hashes))
                except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as exc:
                    # Keep the last good set: a repository restart must not refuse every swarm.
                    log.warning("%s: cannot read published info-hashes: %s", repo, exc or type(exc).__name__)
                await asyncio.sleep(announcer.config.repo_poll)

    task = asyncio.get_running_loop().create_task(poll_forever())
    yield
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
