"""bt-tracker's aiohttp app: routes, and the background work (expiry, repository poll, registry refresh).

`create_app(config, *, peerstore=None, sites=None, state=None, clock=None)`
builds it; tests pass their own store (with a fake clock), registry or
start state. Without them it builds what `[tracker] store` names: all in
this process's memory, or all in Redis (tracker/redisstore.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import AsyncIterator, Callable

import aiohttp
from aiohttp import web

from torrents import auth
from torrents.errors import AuthError, Forbidden, NotFound
from torrents.infohash import is_info_hash
from torrents.servicekit import tls
from torrents.sitekinds import claim_problem
from torrents.servicekit.web import (add_metrics_route, client_error, client_session, error_middleware, json_error,
                                     parse_json_body, read_signed)
from tracker import membership, protocol
from tracker.announcer import Announcer
from tracker.config import TrackerConfig
from tracker.metrics import TrackerMetrics
from tracker.peerstore import LocalPeerStore, PeerStore, resolve
from tracker.resp import RedisClient, StoreUnavailable, sentinel_addresses
from tracker.seeding import SeedStarter
from tracker.sites import SiteRegistry, parse_heartbeat
from tracker.startstate import LocalStartState, StartState

log = logging.getLogger("btswarm.tracker")

ANNOUNCER = web.AppKey("announcer", Announcer)
VERIFIER = web.AppKey("verifier", auth.Verifier)
MAX_HEARTBEAT = 16 * 1024 * 1024  # 200,000 hex info-hashes fit
REPO_TIMEOUT = 10.0
BENCODED = "text/plain"  # BEP 3 names none; what opentracker sends, and what clients accept


def build_state(config: TrackerConfig, clock: Callable[[], float] = time.monotonic
                ) -> tuple[PeerStore, SiteRegistry, StartState]:
    """The peer store, site registry and start state that `config.store` names."""
    ttl = protocol.peer_ttl(config.interval)
    if config.store == "redis":
        from tracker.redisstore import RedisPeerStore, RedisSiteRegistry, RedisStartState

        client = RedisClient(config.redis_url, timeout=config.redis_timeout, master=config.redis_master,
                             sentinels=sentinel_addresses(config.redis_sentinels), ca_file=config.redis_ca_file)
        prefix = config.redis_prefix
        return (RedisPeerStore(client, ttl=ttl, prefix=prefix),
                RedisSiteRegistry(client, prefix=prefix, heartbeat_interval=config.heartbeat_interval,
                                  networks=config.site_networks),
                RedisStartState(client, prefix=prefix))
    return (LocalPeerStore(ttl=ttl, clock=clock),
            SiteRegistry(heartbeat_interval=config.heartbeat_interval, clock=clock, networks=config.site_networks),
            LocalStartState(clock))


def create_app(config: TrackerConfig, *, peerstore: PeerStore | None = None, sites: SiteRegistry | None = None,
               state: StartState | None = None, clock: Callable[[], float] = time.monotonic) -> web.Application:
    if peerstore is None or sites is None or state is None:
        built = build_state(config, clock)
        peerstore, sites, state = peerstore or built[0], sites or built[1], state or built[2]
    store, registry = peerstore, sites
    metrics = TrackerMetrics(swarms=lambda: store.totals()[0], peers=lambda: store.totals()[1])
    starter = SeedStarter(config, registry, store, state=state, outcomes=metrics, clock=clock)
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
    app.cleanup_ctx.append(_registry_refresh)
    if config.repo:
        app.cleanup_ctx.append(_repo_poll)
    return app


def _query(request: web.Request) -> str:
    # raw_path is the request target exactly as received (no URL object
    # built, no decoding): the query is parsed to bytes in protocol.
    return request.raw_path.partition("?")[2]


async def announce(request: web.Request) -> web.Response:
    try:
        body = await request.app[ANNOUNCER].announce(_query(request), request.remote or "",
                                                     membership.of_transport(request.transport))
    except Exception:
        # Clients get a bencoded failure, never a 5xx page they cannot parse.
        log.exception("announce %r: internal error", request.raw_path[:200])
        body = protocol.failure_answer("tracker: internal error")
    return web.Response(body=body, content_type=BENCODED)


async def scrape(request: web.Request) -> web.Response:
    try:
        answer = request.app[ANNOUNCER].scrape(_query(request))
        body = answer if isinstance(answer, bytes) else await answer
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
    body = parse_json_body(raw, f"heartbeat from {name}")
    # The site's kind is the configuration's word ([tracker] site_kinds), not the heartbeat's.
    claimed = body.get("kind") if isinstance(body, dict) else None
    if problem := claim_problem(name, claimed, announcer.config.kind_of(name), "[tracker] site_kinds"):
        log.warning("heartbeat from %s refused: %s", name, problem)
        raise Forbidden(name, problem)
    site = parse_heartbeat(name, body, now=time.time(), mono=announcer.sites.clock())
    try:
        await announcer.site_beat(site)
    except StoreUnavailable as exc:
        return json_error(503, str(exc))  # the site beats again at its next interval
    log.debug("heartbeat from %s: %d can seed, %d seeding, load %d/%d", name, len(site.can_seed),
              len(site.seeding), site.load, site.capacity)
    return web.json_response({"ok": True, "interval": announcer.config.heartbeat_interval})


MAX_LISTED = 10_000  # swarms in GET /api/swarms


async def _swarm_json(announcer: Announcer, info_hash: bytes) -> dict:
    [c] = await resolve(announcer.store.counts([info_hash]))
    uploaded = announcer.sites.uploaded_by(info_hash)
    return {"info_hash": info_hash.hex(), "seeds": c.complete, "leechers": c.incomplete,
            "completed": c.downloaded, "sites": await announcer.seeding_sites(info_hash),
            "holders": announcer.holding_sites(info_hash),
            "site_uploaded": sum(uploaded.values()), "uploaded_by_site": uploaded}


async def swarms(request: web.Request) -> web.Response:
    announcer = request.app[ANNOUNCER]
    hashes = await resolve(announcer.store.swarms(MAX_LISTED))
    return web.json_response({"swarms": [await _swarm_json(announcer, h) for h in hashes]})


async def swarm(request: web.Request) -> web.Response:
    announcer = request.app[ANNOUNCER]
    hex_hash = request.match_info["info_hash"].lower()
    if not is_info_hash(hex_hash):
        raise NotFound(hex_hash[:60], "not an info-hash (40 hex characters)")
    h = bytes.fromhex(hex_hash)
    if not announcer.known(h) and not await resolve(announcer.store.has(h)):
        raise NotFound(hex_hash, "no such swarm")
    return web.json_response(await _swarm_json(announcer, h))


async def list_sites(request: web.Request) -> web.Response:
    announcer = request.app[ANNOUNCER]
    registry = announcer.sites
    return web.json_response({"sites": [
        {"name": s.name, "kind": announcer.config.kind_of(s.name), "control_url": s.control_url,
         "peers": list(s.peers), **({"ssl_peers": list(s.ssl_peers)} if s.ssl_peers else {}), "up": registry.is_up(s), "last_seen": int(s.last_seen), "load": s.load,
         "capacity": s.capacity, "can_seed": len(s.can_seed),
         "seeding": sorted(h.hex() for h in s.seeding), "stuck": sorted(h.hex() for h in s.stuck),
         "uploaded": sum(s.uploaded.values())}
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
            await resolve(work())
        except StoreUnavailable as exc:
            log.warning("%s: %s", what, exc)
        except Exception:
            log.exception("%s failed", what)


async def _expiry(app: web.Application) -> AsyncIterator[None]:
    announcer = app[ANNOUNCER]
    every = max(1.0, min(30.0, announcer.config.interval / 2))
    task = asyncio.get_running_loop().create_task(_periodic(every, announcer.store.expire, "peer expiry"))
    yield
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await announcer.store.close()


async def _registry_refresh(app: web.Application) -> AsyncIterator[None]:
    """A shared registry (Redis) is re-read every REFRESH seconds; the local one needs nothing."""
    registry = app[ANNOUNCER].sites
    every = getattr(registry, "REFRESH", None)
    task = None
    if every:
        async def refresh_forever() -> None:
            failing = False
            while True:
                try:
                    await resolve(registry.refresh())
                    if failing:
                        log.info("site registry: read from the store again")
                    failing = False
                except StoreUnavailable as exc:
                    if not failing:
                        log.warning("site registry: %s; keeping the last view", exc)
                    failing = True
                except Exception:
                    log.exception("site registry refresh failed")
                await asyncio.sleep(every)

        task = asyncio.get_running_loop().create_task(refresh_forever())
    yield
    if task is not None:
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
    return [bytes.fromhex(v.lower()) for v in values if is_info_hash(v)]


async def _repo_poll(app: web.Application) -> AsyncIterator[None]:
    announcer = app[ANNOUNCER]
    repo = announcer.config.repo

    async def poll_forever() -> None:
        async with client_session(tls.ca_file(announcer.config.ca_file)) as session:
            while True:
                try:
                    hashes = await fetch_published(session, repo)
                    announcer.set_published(hashes)
                    log.debug("%s: %d published info-hashes", repo, len(hashes))
                except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as exc:
                    # Keep the last good set: a repository restart must not refuse every swarm.
                    log.warning("%s: cannot read published info-hashes: %s", repo,
                                client_error(exc, tls.hint("tracker")))
                await asyncio.sleep(announcer.config.repo_poll)

    task = asyncio.get_running_loop().create_task(poll_forever())
    yield
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
