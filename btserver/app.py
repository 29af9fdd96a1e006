"""bt-server's control API: the routes, and `create_app` building the daemon (btserver/daemon.py) they serve.

Routes (docs/contracts.md): POST /api/seeds and DELETE /api/seeds/{hex}
(signed as this site), POST /api/rescan, GET /api/status, GET /metrics,
GET /healthz. The daemon is opened and closed with the app (cleanup_ctx);
the API answers from the first moment; a dataset still hashing is simply
not seedable yet.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import AsyncIterator

from aiohttp import web

from torrents import access, auth
from torrents.errors import NotFound
from torrents.hostport import parse_hostport
from torrents.infohash import parse_info_hash
from torrents.servicekit import ltsession
from torrents.servicekit.issuers import Issuers
from torrents.servicekit.web import add_metrics_route, error_middleware, json_error, parse_json_body, read_signed

from btserver import heartbeat, publisher
from btserver.config import ServerConfig
from btserver.daemon import Daemon
from btserver.inventory import Inventory
from btserver.metrics import Metrics
from btserver.ratelimit import TokenBucket
from btserver.seeder import AtCapacity, Seeder
from btserver.webload import WebLoad
from btserver.webseed import WebSeed

log = logging.getLogger("btswarm.server.app")



@dataclass
class Deps:
    """What the app is built from; anything left None is built from the config."""

    seeder: Seeder | None = None
    inventory: Inventory | None = None
    metrics: Metrics | None = None
    publish_retry: publisher.Retry | None = None
    access: access.AccessConfig | None = None  # [access]: members-only datasets (none restricted when absent)


DAEMON = web.AppKey("btserver_daemon", Daemon)


def create_app(config: ServerConfig, *, deps: Deps | None = None) -> web.Application:
    deps = deps or Deps()
    metrics = deps.metrics or Metrics()
    metrics.info.info({"site": config.site})
    peer_ip, peer_port = parse_hostport(config.peer_listen)
    rules = deps.access or access.NONE
    seeder = deps.seeder or Seeder(peer_ip, peer_port, idle_ttl=config.idle_ttl, max_seeds=config.max_seeds,
                                   upload_rate_limit=config.upload_rate_limit,
                                   upload_slots=config.upload_slots, stuck_after=config.stuck_after,
                                   metrics=metrics, restricted=rules.is_restricted, ssl_port=config.peer_ssl_port,
                                   peer_certs=ltsession.peer_certs(config.peer_ca, config.peer_cert,
                                                                   config.peer_key, "server"))
    if seeder.book.metrics is None:
        seeder.book.metrics = metrics
    daemon = Daemon(
        config=config,
        inventory=deps.inventory or Inventory(config),
        seeder=seeder,
        metrics=metrics,
        # The tracker signs seed requests as this site, with this site's secret (so do `bt-server share`
        # and `rescan` on this host): a refusal for its clock is logged as the tracker's.
        verifier=auth.Verifier({config.site: config.secret}, signer="the tracker, signing as"),
        publish_retry=deps.publish_retry or publisher.Retry(),
        control_url=config.public_control_url(),
    )
    if config.web_listen:
        daemon.web = WebSeed(
            inventory=daemon.inventory, metrics=metrics, seeding=seeder.seeding,
            load=WebLoad(idle_ttl=config.idle_ttl, capacity=config.max_seeds),
            damaged=lambda info_hash: info_hash in seeder.book.damaged,
            max_requests=config.web_max_requests, queue_timeout=config.web_queue_timeout,
            # A burst of a quarter second's worth: pacing smooth enough for TCP on a shaped link.
            bucket=TokenBucket(config.web_rate_limit, max(64 * 1024, config.web_rate_limit // 4))
            if config.web_rate_limit else None,
            issuers=Issuers(deps.access) if deps.access is not None and deps.access.restrictions else None)
    app = web.Application(middlewares=[error_middleware])
    app[DAEMON] = daemon
    app.router.add_post("/api/seeds", start_seed)
    app.router.add_delete("/api/seeds/{info_hash}", stop_seed)
    app.router.add_post("/api/rescan", rescan)
    app.router.add_get("/api/status", status)
    app.router.add_get("/healthz", healthz)
    add_metrics_route(app, metrics.registry)
    app.cleanup_ctx.append(lifecycle)
    return app


# -- handlers ----------------------------------------------------------------
async def start_seed(request: web.Request) -> web.Response:
    d = request.app[DAEMON]
    started = time.perf_counter()
    _, raw = await read_signed(request, d.verifier)
    body = parse_json_body(raw, "POST /api/seeds")
    info_hash = parse_info_hash(body.get("info_hash") if isinstance(body, dict) else None)
    loop = asyncio.get_running_loop()
    try:
        await loop.run_in_executor(None, d.seeder.start, info_hash)
    except AtCapacity as exc:
        d.metrics.seed_requests.labels(result="429").inc()
        return json_error(429, str(exc), capacity=exc.capacity)
    except NotFound:
        d.metrics.seed_requests.labels(result="404").inc()
        raise
    elapsed = time.perf_counter() - started
    d.metrics.start_latency.observe(elapsed)
    d.metrics.seed_requests.labels(result="200").inc()
    log.info("seed %s: answered in %.1f ms", info_hash, elapsed * 1000)
    # Stamped once the seed is in seeding(): every heartbeat built after this stamp lists it.
    return web.json_response({"state": "seeding", "info_hash": info_hash, "peers": [d.seeder.endpoint_of(info_hash)],
                              "started": heartbeat.stamp()})


async def stop_seed(request: web.Request) -> web.Response:
    d = request.app[DAEMON]
    await read_signed(request, d.verifier)
    info_hash = parse_info_hash(request.match_info["info_hash"])
    await asyncio.get_running_loop().run_in_executor(None, d.seeder.stop, info_hash)
    return web.json_response({"state": "stopped", "info_hash": info_hash})


async def rescan(request: web.Request) -> web.Response:
    """Scan roots, manifests and shares again, as SIGHUP does (`bt-server share` asks it, signed as this site)."""
    d = request.app[DAEMON]
    await read_signed(request, d.verifier)
    if d.loop is None:
        return json_error(503, "still starting")
    # Every scan that starts from now on reads the roots, manifests and shares as they are now: the
    # next to finish does, unless one is under way (it started before), then the one after it.
    done_after = d.scans + (2 if d.prepare_lock.locked() else 1)
    d.rescan()
    return web.json_response({"rescanning": True, "scans": d.scans, "done_after": done_after}, status=202)


async def status(request: web.Request) -> web.Response:
    d = request.app[DAEMON]
    loop = asyncio.get_running_loop()
    seeds = await loop.run_in_executor(None, d.seeder.book.snapshot)
    stuck = await loop.run_in_executor(None, d.seeder.book.stuck)
    active = {s["info_hash"] for s in seeds}
    prepared = d.inventory.all()
    excluded = d.inventory.excluded
    datasets = [{"name": p.name, "info_hash": p.info_hash, "total_size": p.total_size,
                 "files": p.file_count, "seeding": p.info_hash in active,
                 "refused": [str(x) for x in d.inventory.problems if x.dataset == p.name],
                 "excluded": [{"lfn": lfn, "why": why} for lfn, why in excluded.get(p.name, ())],
                 "repository": d.published[p.info_hash].to_json() if p.info_hash in d.published else None}
                for p in prepared]
    # A replica the repository does not serve as the dataset is a problem to see here.
    disagree = [f"{p.name}: {d.published[p.info_hash].problem}" for p in prepared
                if p.info_hash in d.published and d.published[p.info_hash].problem]
    return web.json_response({
        "site": d.config.site,
        "kind": d.config.kind,
        "scans": d.scans,
        "peers": [d.seeder.endpoint],
        **({"ssl_peers": [d.seeder.ssl_endpoint]} if d.seeder.ssl_endpoint else {}),
        "peer_certificate": d.seeder.peer_certs.to_json() if d.seeder.peer_certs else None,
        "ready": d.inventory.done.is_set(),
        "datasets": datasets,
        "seeds": seeds,
        "stuck": stuck,
        "uploaded_total": d.seeder.book.counters.uploaded_total,
        "uploaded": d.uploaded(),  # per info-hash, peer wire and web seed: what the heartbeat reports
        "capacity": d.config.max_seeds,
        "hash_failures": d.seeder.book.counters.hash_failures,
        "read_errors": d.seeder.book.counters.read_errors,
        "web_seeds": d.web_seeds(),
        "web": None if d.web is None else {"url": d.web_url, "requests": d.web.load.requests_total,
                                           "sent_total": d.web.load.sent_total, "serving": d.web.load.snapshot()},
        "error": d.prepare_error,
        "problems": ([str(p) for p in d.inventory.problems] + d.seeder.problems() + disagree
                     + [f"{c.problem()} at {c.url}: it refuses our signed requests" for c in d.clocks.values()
                        if c.refused]
                     + ([d.rucio.state.problem()] if d.rucio and d.rucio.state.problem() else [])
                     + ([p] if d.seeder.peer_certs and (p := d.seeder.peer_certs.problem()) else [])),
        "rucio": d.rucio.state.to_json() if d.rucio else None,
        # This host's clock minus each service's (seconds, ±1 from HTTP Date; null before an answer).
        "clock_offset_s": {key: None if c.offset is None else round(c.offset) for key, c in d.clocks.items()},
    })


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


# -- background ----------------------------------------------------------------
async def lifecycle(app: web.Application) -> AsyncIterator[None]:
    daemon = app[DAEMON]
    await daemon.open()
    try:
        yield
    finally:
        await daemon.close()
