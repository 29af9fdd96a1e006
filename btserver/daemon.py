"""The site daemon as one object: its parts, and `open`, `prepare`, `rescan`, `close`.

`bt-server run` is an aiohttp app (btserver/app.py: the routes) whose
cleanup context opens a Daemon and closes it. Open starts the libtorrent
session, the web seed's listener (when `web_listen` is set), the first
preparation (scan → farms → torrents, in a thread of its own), the Rucio
refresh and the heartbeats; every prepared dataset is registered with the
seeder and published. `rescan()` (SIGHUP, POST /api/rescan) prepares again.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Coroutine

import aiohttp
from aiohttp import web

from torrents import auth
from torrents.errors import BtswarmError
from torrents.hostport import format_hostport, is_wildcard, parse_hostport, source_address, url_endpoint
from torrents.log import notice
from torrents.servicekit import tls
from torrents.servicekit.web import PeerClock, client_session

from btserver import heartbeat, publisher, rucio_sync, weburls
from btserver.config import ServerConfig
from btserver.holdings import Catalog
from btserver.inventory import Inventory, Prepared
from btserver.metrics import Metrics
from btserver.seedbook import Seedable
from btserver.seeder import Seeder, SessionError
from btserver.webseed import WebSeed, create_web_app

log = logging.getLogger("btswarm.server.app")


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
    containers_sent: dict[str, tuple[str, ...]] = field(default_factory=dict)  # Rucio containers the repository took
    containers_wanted: dict[str, tuple[str, ...]] = field(default_factory=dict)  # the newest refresh's containers
    containers_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    tasks: set[asyncio.Task] = field(default_factory=set)
    prepare_lock: threading.Lock = field(default_factory=threading.Lock)
    prepare_error: str | None = None  # the last scan crashed: why (shown in /api/status)
    rucio: rucio_sync.RucioSync | None = None  # [server.rucio] set: the datasets Rucio offers here
    scans: int = 0  # scans finished: a caller who asked for one knows when its answer is in /api/status
    web: WebSeed | None = None  # the web seed, when web_listen is set
    web_url: str = ""  # its base as clients reach it, known once it listens
    clocks: dict[str, PeerClock] = field(default_factory=dict)  # "tracker URL" / "repo URL" → this host's clock vs its
    loop: asyncio.AbstractEventLoop | None = None  # set by open: the daemon is running
    _stop: threading.Event = field(default_factory=threading.Event)
    _web_runner: web.AppRunner | None = None

    # --- the parts' questions ---------------------------------------------------------------
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
                                        stuck=self.seeder.book.stuck_hashes(), built=built, uploaded=self.uploaded(),
                                        ssl_peers=[self.seeder.ssl_endpoint] if self.seeder.ssl_endpoint else [],
                                        restricted=self.seeder.restricted_names())

    def peer_address(self) -> str:
        """The address peers are told when the peer wire listens on a wildcard ("" when it listens on one):
        [server] peer_address, else this host's address towards the (first) tracker, which is where the T3s
        that the tracker sends here must find it."""
        host = parse_hostport(self.config.peer_listen)[0]
        if not is_wildcard(host):
            return ""
        if self.config.peer_address:
            return self.config.peer_address
        for url in self.config.tracker_urls():
            try:
                return source_address(*url_endpoint(url))
            except OSError as exc:
                log.warning("%s: no route to the tracker at %s (%s)", self.config.site, url, exc.strerror or exc)
        raise BtswarmError("[server] peer_listen", f"{self.config.peer_listen} listens everywhere and no tracker is "
                                                   "reachable to learn this host's address: set [server] peer_address")

    def uploaded(self) -> dict[str, int]:
        """Payload bytes sent per info-hash since the daemon started: the peer wire's and the web seed's."""
        sent = Counter(self.seeder.book.uploaded())
        if self.web is not None:
            sent.update(self.web.load.sent_by_hash)
        return dict(sent)

    def web_seeds(self) -> list[str]:
        """The BEP 19 base URLs this site offers for its datasets (published with each)."""
        return weburls.bases(self.web_url, self.config.web_seed_urls)

    # --- the life of the daemon -------------------------------------------------------------
    async def open(self) -> None:
        loop = self.loop = asyncio.get_running_loop()
        self.changed = asyncio.Event()
        self.seeder.on_change = lambda: self._threadsafe(self.notify)
        await loop.run_in_executor(None, self.seeder.open)
        self.seeder.advertised = self.peer_address()
        told = f" (listening on {self.config.peer_listen})" if self.seeder.advertised else ""
        notice().info("%s: control %s, peers %s%s; preparing datasets", self.config.site, self.control_url,
                      self.seeder.endpoint, told)
        self.http = client_session(tls.ca_file(self.config.ca_file))  # https tracker and repository verified
        if self.web is not None:
            self._web_runner = await self._start_web()
        if self.config.rucio.server:
            self.rucio = rucio_sync.RucioSync(self.config.rucio, self.http, self.config.state, self._prepare_rucio,
                                              self.metrics)
            cached = self.rucio.load_snapshot()  # Rucio may be down now: what it said last time is served meanwhile
            if cached is not None:
                self.inventory.set_external(cached)
        self.start_prepare()
        if self.rucio is not None:
            self.spawn(self.rucio.run_forever())
        if threading.current_thread() is threading.main_thread():
            # SIGHUP: rescan roots and manifests, and Rucio (new, changed and removed datasets).
            loop.add_signal_handler(signal.SIGHUP, self.rescan)
        if self.config.tracker_urls():
            self.spawn(heartbeat.beat_all(self.http, self.config.tracker_urls(), self.config.site, self.config.secret,
                                          self.heartbeat_body, self.changed, self.config.heartbeat_interval,
                                          self.metrics, {t: self.clock("tracker", t) for t in self.config.tracker_urls()}))

    def rescan(self) -> None:
        """The roots, manifests and shares now (a share waits on it: POST /api/rescan), Rucio too: its
        refresh prepares again when its answer is in."""
        self.start_prepare()
        if self.rucio is not None:
            self.rucio.wake.set()

    async def close(self) -> None:
        assert self.loop is not None
        self._stop.set()
        if threading.current_thread() is threading.main_thread():
            self.loop.remove_signal_handler(signal.SIGHUP)
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.http is not None:
            await self.http.close()
        if self._web_runner is not None:
            await self._web_runner.cleanup()
        await self.loop.run_in_executor(None, self.seeder.close)
        log.info("stopped")

    # --- preparing datasets -----------------------------------------------------------------
    def prepare(self) -> None:
        """One scan, blocking (the preparation thread): every dataset ready is registered and published."""
        with self.prepare_lock:  # a rescan asked during a scan runs after it
            try:
                report = self.inventory.prepare(self._on_ready, self._stop)
            except Exception as exc:  # a bug, or a file system gone mad: say so where users look
                log.exception("preparing datasets failed")
                self.prepare_error = f"preparing datasets failed: {type(exc).__name__}: {exc}"
                self.inventory.done.set()
                self.scans += 1
                return
            self.prepare_error = None
            for gone in report.gone:
                self.seeder.unregister(gone.info_hash)
                if self.web is not None:
                    self._threadsafe(lambda ih=gone.info_hash: self.web.load.forget(ih))
            self.scans += 1  # counted once its answer is whole: the gone datasets' seeds stopped too
            notice().info("%s: %d datasets ready, %d gone, %d problems%s", self.config.site, len(report.prepared),
                          len(report.gone), len(report.problems),
                          f" (see {self.control_url}/api/status)" if report.problems else "")
            self._threadsafe(lambda: self.metrics.datasets.set(len(self.inventory.all())))
            self._threadsafe(self.notify)

    def start_prepare(self, then: Callable[[], None] | None = None) -> None:
        """`prepare` in a daemon thread, not the default executor: a shutdown during a long hash must not
        wait for it (the executor joins its threads at exit); `then` on the loop once it is done."""
        def work() -> None:
            try:
                self.prepare()
            finally:
                if then is not None:
                    self._threadsafe(then)

        threading.Thread(target=work, name="btserver-prepare", daemon=True).start()

    async def _prepare_rucio(self, cat: Catalog) -> None:
        # Each refresh from Rucio is prepared before the next one is asked for.
        assert self.loop is not None
        self.inventory.set_external(cat)
        done = self.loop.create_future()
        self.start_prepare(lambda: done.done() or done.set_result(None))
        await done
        if self.config.repo:
            self.spawn(self._publish_containers(cat.containers))

    async def _publish_containers(self, now: dict[str, tuple[str, ...]]) -> None:
        """Tell the repository the Rucio containers that changed. Apart from the refresh (a slow repository
        never holds one up), one at a time, the newest refresh's word last."""
        assert self.http is not None
        self.containers_wanted = now
        if self.containers_lock.locked():
            return  # the one running sends this word once it is done with the older one
        async with self.containers_lock:
            while True:
                wanted = self.containers_wanted
                taken = await publisher.publish_containers(
                    self.http, self.config.repo, self.config.site, self.config.secret,
                    publisher.container_changes(self.containers_sent, wanted),
                    clock=self.clock("repository", self.config.repo))
                for container, datasets in taken.items():
                    if container in wanted:
                        self.containers_sent[container] = datasets
                    else:  # withdrawn
                        self.containers_sent.pop(container, None)
                if self.containers_wanted is wanted:
                    return

    def _on_ready(self, prepared: Prepared, replaced: Prepared | None) -> None:  # preparation thread
        self.seeder.register(Seedable(prepared.info_hash, prepared.name, prepared.torrent_path,
                                      str(prepared.farm.parent), prepared.own_names))
        if replaced is not None:
            self.seeder.unregister(replaced.info_hash)
        self._threadsafe(lambda: self._dataset_ready(prepared))

    def _dataset_ready(self, prepared: Prepared) -> None:
        self.metrics.datasets.set(len(self.inventory.all()))
        self.notify()
        if prepared.info_hash in self.publishing:
            return  # a rescan found it unchanged: published, or being published
        if self.config.repo:
            self.publishing.add(prepared.info_hash)
            self.spawn(self._publish(prepared))

    async def _publish(self, prepared: Prepared) -> None:
        assert self.http is not None
        torrent = await asyncio.get_running_loop().run_in_executor(None, prepared.torrent_path.read_bytes)
        record = prepared.record()
        if self.web_seeds():
            record["web_seeds"] = self.web_seeds()  # where this site serves it over HTTP (BEP 19 bases)
        answer = await publisher.publish(self.http, self.config.repo, self.config.site, self.config.secret, torrent,
                                         record, retry=self.publish_retry, metrics=self.metrics, kind=self.config.kind,
                                         clock=self.clock("repository", self.config.repo))
        self.published[prepared.info_hash] = answer
        if not answer.ok:
            self.publishing.discard(prepared.info_hash)  # the next rescan (SIGHUP) tries again

    async def _start_web(self) -> web.AppRunner:
        """The web seed's listener; its URL (for the publications) once the port is known."""
        assert self.web is not None
        host, port = parse_hostport(self.config.web_listen, "web_listen")
        runner = web.AppRunner(create_web_app(self.web), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise SessionError(self.config.web_listen, f"web seed cannot listen ({exc.strerror})") from None
        bound = runner.addresses[0][1] if runner.addresses else port
        self.web_url = (self.config.web_url or f"http://{format_hostport(host, bound)}").rstrip("/")
        log.info("web seed listening on %s", self.web_url)
        return runner

    def _threadsafe(self, fn: Callable[[], object]) -> None:
        assert self.loop is not None
        try:
            self.loop.call_soon_threadsafe(fn)
        except RuntimeError:  # the loop has closed: we are shutting down
            pass
