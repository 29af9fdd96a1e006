"""bt-server's control API and the daemon's background work.

Routes (docs/contracts.md): POST /api/seeds and DELETE /api/seeds/{hex}
(signed as this site), GET /api/status, GET /metrics, GET /healthz.
Background (cleanup_ctx): the libtorrent session, the web seed's own
listener (btserver/webseed.py, when `web_listen` is set), the preparation
thread (scan → farms → torrents), publishing, heartbeats. The API answers
from the first moment; a dataset still hashing is simply not seedable yet.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Coroutine

import aiohttp
from aiohttp import web

from torrents import auth
from torrents.log import notice
from torrents.errors import NotFound
from torrents.hostport import format_hostport, parse_hostport
from torrents.infohash import parse_info_hash
from torrents.servicekit import tls
from torrents.servicekit.web import (PeerClock, add_metrics_route, client_session, error_middleware, json_error,
                                     parse_json_body, read_signed)

from btserver.config import ServerConfig

from btserver import heartbeat, publisher, rucio_sync, weburls
from btserver.holdings import Catalog
from btserver.inventory import Inventory, Prepared
from btserver.metrics import Metrics
from btserver.ratelimit import TokenBucket
from btserver.seeder import AtCapacity, Seedable, Seeder, SessionError
from btserver.webload import WebLoad
from btserver.webseed import WebSeed, create_web_app

log = logging.getLogger("btswarm.server.app")



@dataclass
class Deps:
    """What the app is built from; anything left None is built from the config."""

    seeder: Seeder | None = None
    inventory: Inventory | None = None
    metrics: Metrics | None = None
    publish_retry: publisher.Retry | None = None


@dataclass
class Daemon:
    config: ServerConfig
    inventory: Inventory
    seeder: Seeder
    metrics: Metrics
    verifier: auth.Verifier
    publish_retry: publisher.Retry
    control_url: str
    changed: asyncio.Event | None = None
    http: aiohttp.ClientSession | None = None
    published: dict[str, publisher.Answer] = field(default_factory=dict)  # info_hash → the repository's answer
    publishing: set[str] = field(default_factory=set)  # info-hashes published or being published
    tasks: set[asyncio.Task] = field(default_factory=set)
    prepare_lock: threading.Lock = field(default_factory=threading.Lock)
    prepare_error: str | None = None  # the last scan crashed: why (shown in /api/status)
    rucio: rucio_sync.RucioSync | None = None  # [server.rucio] set: the datasets Rucio offers here
    rescan: Callable[[], None] | None = None  # start a scan (SIGHUP, POST /api/rescan); set at start-up
    scans: int = 0  # scans finished: a caller who asked for one knows when its answer is in /api/status
    web: WebSeed | None = None  # the web seed, when web_listen is set
    web_url: str = ""  # its base as clients reach it, known once it listens
    clocks: dict[str, PeerClock] = field(default_factory=dict)  # "tracker URL" / "repo URL" → this host's clock vs its

    def clock(self, part: str, url: str) -> PeerClock:
        """This host's clock against the `part` ("tracker", "repository") at `url`: one per service."""
        return self.clocks.setdefault(f"{part} {url}", PeerClock(f"the {part}'s", url))

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def notify(self) -> None:
        if self.changed is not None:
            self.changed.set()

    def heartbeat_body(self) -> dict:
        built = heartbeat.stamp()  # before the seeds are read: a start stamped later is not in this body
        return heartbeat.heartbeat_body(self.config.site, self.control_url, [self.seeder.endpoint],
                                        self.seeder.seedable(), self.seeder.seeding(), self.config.max_seeds,
                                        kind=self.config.kind, web_busy=self.web.load.busy() if self.web else (),
                                        stuck=self.seeder.stuck_hashes(), built=built)

    def web_seeds(self) -> list[str]:
        """The BEP 19 base URLs this site offers for its datasets (published with each)."""
        return weburls.bases(self.web_url, self.config.web_seed_urls)


DAEMON = web.AppKey("btserver_daemon", Daemon)


def create_app(config: ServerConfig, *, deps: Deps | None = None) -> web.Application:
    deps = deps or Deps()
    metrics = deps.metrics or Metrics()
    metrics.info.info({"site": config.site})
    peer_ip, peer_port = parse_hostport(config.peer_listen)
    seeder = deps.seeder or Seeder(peer_ip, peer_port, idle_ttl=config.idle_ttl, max_seeds=config.max_seeds,
                                   upload_rate_limit=config.upload_rate_limit,
                                   upload_slots=config.upload_slots, stuck_after=config.stuck_after,
                                   metrics=metrics)
    if seeder.metrics is None:
        seeder.metrics = metrics
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
            damaged=lambda info_hash: info_hash in seeder.damaged,
            max_requests=config.web_max_requests, queue_timeout=config.web_queue_timeout,
            # A burst of a quarter second's worth: pacing smooth enough for TCP on a shaped link.
            bucket=TokenBucket(config.web_rate_limit, max(64 * 1024, config.web_rate_limit // 4))
            if config.web_rate_limit else None)
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
    return web.json_response({"state": "seeding", "info_hash": info_hash, "peers": [d.seeder.endpoint],
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
    if d.rescan is None:
        return json_error(503, "still starting")
    # Every scan that starts from now on reads the roots, manifests and shares as they are now: the
    # next to finish does, unless one is under way (it started before), then the one after it.
    done_after = d.scans + (2 if d.prepare_lock.locked() else 1)
    d.rescan()
    return web.json_response({"rescanning": True, "scans": d.scans, "done_after": done_after}, status=202)


async def status(request: web.Request) -> web.Response:
    d = request.app[DAEMON]
    loop = asyncio.get_running_loop()
    seeds = await loop.run_in_executor(None, d.seeder.snapshot)
    stuck = await loop.run_in_executor(None, d.seeder.stuck)
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
        "ready": d.inventory.done.is_set(),
        "datasets": datasets,
        "seeds": seeds,
        "stuck": stuck,
        "uploaded_total": d.seeder.counters.uploaded_total,
        "capacity": d.config.max_seeds,
        "hash_failures": d.seeder.counters.hash_failures,
        "read_errors": d.seeder.counters.read_errors,
        "web_seeds": d.web_seeds(),
        "web": None if d.web is None else {"url": d.web_url, "requests": d.web.load.requests_total,
                                           "sent_total": d.web.load.sent_total, "serving": d.web.load.snapshot()},
        "error": d.prepare_error,
        "problems": ([str(p) for p in d.inventory.problems] + d.seeder.problems() + disagree
                     + [f"{c.problem()} at {c.url}: it refuses our signed requests" for c in d.clocks.values()
                        if c.refused]
                     + ([d.rucio.state.problem()] if d.rucio and d.rucio.state.problem() else [])),
        "rucio": d.rucio.state.to_json() if d.rucio else None,
        # This host's clock minus each service's (seconds, ±1 from HTTP Date; null before an answer).
        "clock_offset_s": {key: None if c.offset is None else round(c.offset) for key, c in d.clocks.items()},
    })


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


# -- background ----------------------------------------------------------------
async def lifecycle(app: web.Application) -> AsyncIterator[None]:
    d = app[DAEMON]
    loop = asyncio.get_running_loop()
    d.changed = asyncio.Event()
    d.seeder.on_change = lambda: _threadsafe(loop, d.notify)
    await loop.run_in_executor(None, d.seeder.open)
    notice().info("%s: control %s, peers %s; preparing datasets", d.config.site, d.control_url, d.seeder.endpoint)
    d.http = client_session(tls.ca_file(d.config.ca_file))  # https tracker and repository verified
    web_runner = await _start_web(d) if d.web is not None else None
    stop = threading.Event()

    def on_ready(prepared: Prepared, replaced: Prepared | None) -> None:  # preparation thread
        d.seeder.register(Seedable(prepared.info_hash, prepared.name, prepared.torrent_path,
                                   str(prepared.farm.parent), prepared.own_names))
        if replaced is not None:
            d.seeder.unregister(replaced.info_hash)
        _threadsafe(loop, lambda: _dataset_ready(d, prepared))

    def prepare() -> None:
        with d.prepare_lock:  # a rescan asked during a scan runs after it
            try:
                report = d.inventory.prepare(on_ready, stop)
            except Exception as exc:  # a bug, or a file system gone mad: say so where users look
                log.exception("preparing datasets failed")
                d.prepare_error = f"preparing datasets failed: {type(exc).__name__}: {exc}"
                d.inventory.done.set()
                d.scans += 1
                return
            d.prepare_error = None
            d.scans += 1
            for gone in report.gone:
                d.seeder.unregister(gone.info_hash)
                if d.web is not None:
                    _threadsafe(loop, lambda ih=gone.info_hash: d.web.load.forget(ih))
            notice().info("%s: %d datasets ready, %d gone, %d problems%s", d.config.site, len(report.prepared),
                          len(report.gone), len(report.problems),
                          f" (see {d.control_url}/api/status)" if report.problems else "")
            _threadsafe(loop, lambda: d.metrics.datasets.set(len(d.inventory.all())))
            _threadsafe(loop, d.notify)

    def start_prepare(then: Callable[[], None] | None = None) -> None:
        # A daemon thread, not the default executor: a shutdown during a long
        # hash must not wait for it (the executor joins its threads at exit).
        def work() -> None:
            try:
                prepare()
            finally:
                if then is not None:
                    _threadsafe(loop, then)

        threading.Thread(target=work, name="btserver-prepare", daemon=True).start()

    async def prepare_rucio(cat: Catalog) -> None:
        # Each refresh from Rucio is prepared before the next one is asked for.
        d.inventory.set_external(cat)
        done = loop.create_future()
        start_prepare(lambda: done.done() or done.set_result(None))
        await done

    if d.config.rucio.server:
        d.rucio = rucio_sync.RucioSync(d.config.rucio, d.http, d.config.state, prepare_rucio, d.metrics)
        cached = d.rucio.load_snapshot()  # Rucio may be down now: what it said last time is served meanwhile
        if cached is not None:
            d.inventory.set_external(cached)
    start_prepare()
    if d.rucio is not None:
        d.spawn(d.rucio.run_forever())

    def rescan() -> None:
        # The roots, manifests and shares now (a share waits on it: POST /api/rescan), Rucio
        # too: its refresh prepares again when its answer is in.
        start_prepare()
        if d.rucio is not None:
            d.rucio.wake.set()

    d.rescan = rescan
    if threading.current_thread() is threading.main_thread():
        # SIGHUP: rescan roots and manifests, and Rucio (new, changed and removed datasets).
        loop.add_signal_handler(signal.SIGHUP, rescan)
    if d.config.tracker_urls():
        d.spawn(heartbeat.beat_all(d.http, d.config.tracker_urls(), d.config.site, d.config.secret,
                                   d.heartbeat_body, d.changed, d.config.heartbeat_interval, d.metrics,
                                   {t: d.clock("tracker", t) for t in d.config.tracker_urls()}))
    try:
        yield
    finally:
        stop.set()
        if threading.current_thread() is threading.main_thread():
            loop.remove_signal_handler(signal.SIGHUP)
        for task in list(d.tasks):
            task.cancel()
        await asyncio.gather(*d.tasks, return_exceptions=True)
        await d.http.close()
        if web_runner is not None:
            await web_runner.cleanup()
        await loop.run_in_executor(None, d.seeder.close)
        log.info("stopped")


async def _start_web(d: Daemon) -> web.AppRunner:
    """The web seed's listener; its URL (for the publications) once the port is known."""
    assert d.web is not None
    host, port = parse_hostport(d.config.web_listen, "web_listen")
    runner = web.AppRunner(create_web_app(d.web), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise SessionError(d.config.web_listen, f"web seed cannot listen ({exc.strerror})") from None
    bound = runner.addresses[0][1] if runner.addresses else port
    d.web_url = (d.config.web_url or f"http://{format_hostport(host, bound)}").rstrip("/")
    log.info("web seed listening on %s", d.web_url)
    return runner


def _dataset_ready(d: Daemon, prepared: Prepared) -> None:
    d.metrics.datasets.set(len(d.inventory.all()))
    d.notify()
    if prepared.info_hash in d.publishing:
        return  # a rescan found it unchanged: published, or being published
    if d.config.repo:
        d.publishing.add(prepared.info_hash)
        d.spawn(_publish(d, prepared))


async def _publish(d: Daemon, prepared: Prepared) -> None:
    assert d.http is not None
    torrent = await asyncio.get_running_loop().run_in_executor(None, prepared.torrent_path.read_bytes)
    record = prepared.record()
    if d.web_seeds():
        record["web_seeds"] = d.web_seeds()  # where this site serves it over HTTP (BEP 19 bases)
    answer = await publisher.publish(d.http, d.config.repo, d.config.site, d.config.secret, torrent,
                                     record, retry=d.publish_retry, metrics=d.metrics, kind=d.config.kind,
                                     clock=d.clock("repository", d.config.repo))
    d.published[prepared.info_hash] = answer
    if not answer.ok:
        d.publishing.discard(prepared.info_hash)  # the next rescan (SIGHUP) tries again


def _threadsafe(loop: asyncio.AbstractEventLoop, fn: Callable[[], object]) -> None:
    try:
        loop.call_soon_threadsafe(fn)
    except RuntimeError:  # the loop has closed: we are shutting down
        pass
