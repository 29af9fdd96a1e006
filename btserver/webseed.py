"""bt-server as a BEP 19 web seed: the symlink farm over HTTP, on a listener of its own.

Routes (docs/contracts.md, "bt-server web seed"):
- `GET|HEAD /data/<dataset>/<LFN>`: the file's bytes, one byte range at a time
  (`Range: bytes=a-b` → 206), sent with sendfile(2);
- `GET /healthz`.

Why a listener of its own rather than the control API's: it is the one a
site opens to the world (or puts behind its TLS front) while the control
API stays inside, and its requests wait for their own slots
(`web_max_requests`) and share their own byte rate (`web_rate_limit`), so a
flood of range requests never delays the tracker's seed starts nor starves
the libtorrent seeds.

A request never names a path on disk: the dataset is looked up among the
prepared ones and the LFN among its torrent's files; the farm's link is
then opened and the file actually opened (/proc/self/fd) must lie inside
the configured roots, be a regular file and have the torrent's size. `..`,
a link swapped to point elsewhere, a directory, a file of the wrong size:
404. A replica this site found damaged is not served either.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import time
from dataclasses import dataclass, field
from typing import Callable

from aiohttp import web

from torrents import metainfo
from torrents.errors import TokenRefused
from torrents.metainfo import FileEntry
from torrents.servicekit.issuers import Issuers
from torrents.servicekit.web import challenge

from btserver.inventory import Inventory, Prepared
from btserver.metrics import Metrics
from btserver.ratelimit import TokenBucket
from btserver.webload import WebLoad

log = logging.getLogger("btswarm.server.webseed")

CHUNK = 1024 * 1024  # bytes per sendfile call: the accounting (idle time, metrics) moves at least this often
RETRY_AFTER = "5"  # seconds, on a 503: libtorrent waits urlseed_wait_retry anyway


@dataclass
class WebSeed:
    inventory: Inventory
    load: WebLoad
    metrics: Metrics
    seeding: Callable[[], list[str]]  # the libtorrent seeds running now (they share the capacity)
    damaged: Callable[[str], bool]  # a replica this site found damaged (not served)
    max_requests: int = 16
    queue_timeout: float = 5.0
    bucket: TokenBucket | None = None
    # Members-only datasets ([access], torrents/access.py): served only to a bearer token that reads them.
    issuers: Issuers | None = None
    _slots: asyncio.Semaphore | None = None
    _files: dict[str, dict[str, FileEntry]] = field(default_factory=dict)  # info-hash → LFN → entry

    def slots(self) -> asyncio.Semaphore:
        if self._slots is None:  # made on the loop that serves
            self._slots = asyncio.Semaphore(self.max_requests)
        return self._slots

    def lookup(self, name: str, lfn: str) -> tuple[Prepared, FileEntry] | None:
        """The prepared dataset and the file entry a request names, or None."""
        prepared = self.inventory.by_name(name)
        if prepared is None or self.damaged(prepared.info_hash):
            return None
        files = self._files.get(prepared.info_hash)
        if files is None:
            if len(self._files) > 4 * len(self.inventory.all()) + 16:
                self._files.clear()  # entries of versions long replaced
            # A Prepared keeps no file list (btserver/inventory.py): read it from the .torrent,
            # once per version served.
            meta = metainfo.parse(prepared.torrent_path.read_bytes(), subject=str(prepared.torrent_path))
            files = self._files[prepared.info_hash] = {f.lfn: f for f in meta.files
                                                       if not f.pad and f.symlink is None}
        entry = files.get(lfn)
        return (prepared, entry) if entry is not None else None


WEBSEED = web.AppKey("btserver_webseed", WebSeed)


def create_web_app(seed: WebSeed) -> web.Application:
    app = web.Application()
    app[WEBSEED] = seed
    app.router.add_route("GET", "/data/{name}/{lfn:.+}", serve_file)
    app.router.add_route("HEAD", "/data/{name}/{lfn:.+}", serve_file)
    app.router.add_get("/healthz", healthz)

    async def close(app: web.Application) -> None:
        if seed.issuers is not None:
            await seed.issuers.close()

    app.on_cleanup.append(close)
    return app


def _answer(seed: WebSeed, status: int, text: str, **headers: str) -> web.Response:
    seed.metrics.web_requests.labels(code=str(status)).inc()
    return web.Response(status=status, text=text + "\n", headers=headers)


async def serve_file(request: web.Request) -> web.StreamResponse:
    seed = request.app[WEBSEED]
    name, lfn = request.match_info["name"], request.match_info["lfn"]
    if seed.issuers is not None:
        # Before the lookup: whoever may not read a dataset does not learn whether this site holds it.
        try:
            await seed.issuers.check_read(request.headers.get("Authorization"), name)
        except TokenRefused as exc:
            return challenge(_answer(seed, exc.status, str(exc)), exc)
    # The first request for a version reads and parses its .torrent: not on the loop.
    found = await asyncio.get_running_loop().run_in_executor(None, seed.lookup, name, lfn)
    if found is None:
        return _answer(seed, 404, f"{name}/{lfn}: not served here")
    prepared, entry = found
    if not seed.load.admits(prepared.info_hash, seed.seeding()):
        return _answer(seed, 503, f"{name}: at capacity ({seed.load.capacity} datasets busy)",
                       **{"Retry-After": RETRY_AFTER})
    waited = time.monotonic()
    try:
        await asyncio.wait_for(seed.slots().acquire(), seed.queue_timeout)
    except asyncio.TimeoutError:
        return _answer(seed, 503, f"{name}: {seed.max_requests} requests in flight; try again",
                       **{"Retry-After": RETRY_AFTER})
    seed.metrics.web_queue.observe(time.monotonic() - waited)
    served = seed.load.begin(prepared.info_hash, prepared.name)
    seed.metrics.web_active.inc()
    loop = asyncio.get_running_loop()
    f = None
    try:
        f = await loop.run_in_executor(None, open_confined, prepared.farm / lfn, seed.inventory.allowed_roots(),
                                       entry.length)
        if f is None:
            log.warning("web seed %s/%s: the farm's link does not lead to the file the torrent has", name, lfn)
            return _answer(seed, 404, f"{name}/{lfn}: not served here")
        return await _send(request, seed, served, f, entry.length)
    finally:
        if f is not None:
            f.close()
        seed.load.end(served)
        seed.metrics.web_active.dec()
        seed.slots().release()


async def _send(request: web.Request, seed: WebSeed, served, f, size: int) -> web.StreamResponse:
    try:
        rng = request.http_range
    except ValueError:
        return _answer(seed, 416, "malformed Range", **{"Content-Range": f"bytes */{size}"})
    start, stop = rng.start, rng.stop
    if start is None:
        start, count, status = 0, size, 200
    else:
        if start < 0:  # bytes=-N: the last N bytes
            start = max(0, size + start)
        stop = size if stop is None else min(stop, size)
        if start >= size or stop <= start:
            return _answer(seed, 416, "range not satisfiable", **{"Content-Range": f"bytes */{size}"})
        count, status = stop - start, 206
    resp = web.StreamResponse(status=status)
    resp.content_type = "application/octet-stream"
    resp.content_length = count
    resp.headers["Accept-Ranges"] = "bytes"
    if status == 206:
        resp.headers["Content-Range"] = f"bytes {start}-{start + count - 1}/{size}"
    seed.metrics.web_requests.labels(code=str(status)).inc()
    log.debug("web seed %s %s: bytes %d-%d of %d", request.method, request.path, start, start + count - 1, size)
    await resp.prepare(request)
    if request.method == "HEAD" or count == 0:
        return resp
    loop = asyncio.get_running_loop()
    transport = request.transport
    chunk_size = CHUNK if seed.bucket is None else max(16384, min(CHUNK, int(seed.bucket.rate / 20)))
    try:
        await _stream(seed, served, transport, loop, resp, f, start, count, chunk_size)
    except ConnectionResetError as exc:  # a client that hangs up mid-answer is no error of ours
        log.debug("web seed %s: client gone after part of the answer (%s)", request.path, exc)
        return resp
    await resp.write_eof()
    return resp


async def _stream(seed: WebSeed, served, transport, loop: asyncio.AbstractEventLoop, resp: web.StreamResponse, f,
                  offset: int, left: int, chunk_size: int) -> None:
    """`left` bytes of `f` from `offset` to the client, chunk by chunk (sendfile where the transport can)."""
    while left > 0:
        if transport is None or transport.is_closing():
            raise ConnectionResetError("client went away")
        n = min(chunk_size, left)
        if seed.bucket is not None:
            await seed.bucket.take(n)
        try:
            sent = await loop.sendfile(transport, f, offset, n)
        except NotImplementedError:  # a transport without sendfile (TLS): read and write
            sent = await _write_chunk(resp, loop, f, offset, n)
        except (RuntimeError, ConnectionError) as exc:  # the client hung up between two chunks, or during one
            raise ConnectionResetError(str(exc)) from None
        offset += sent
        left -= sent
        seed.load.sent(served, sent)
        seed.metrics.web_sent.labels(dataset=served.name).inc(sent)
        if sent == 0:
            raise EOFError(f"the file ended {left} bytes before its size (replaced or truncated?)")


async def _write_chunk(resp: web.StreamResponse, loop: asyncio.AbstractEventLoop, f, offset: int, n: int) -> int:
    data = await loop.run_in_executor(None, os.pread, f.fileno(), n, offset)
    await resp.write(data)
    return len(data)


def open_confined(link: os.PathLike, roots: list[str], size: int):
    """Open what the farm's link leads to, if it is a regular file of `size` bytes inside `roots`; else None.

    The check is made on the file actually opened (its path from
    /proc/self/fd), so a link or directory swapped after any earlier check
    cannot lead outside the roots.
    """
    try:
        f = open(link, "rb", buffering=0)
    except (OSError, ValueError):
        return None
    try:
        real = os.readlink(f"/proc/self/fd/{f.fileno()}")
        st = os.fstat(f.fileno())
        inside = any(real == root or real.startswith(root.rstrip("/") + "/") for root in roots)
        if inside and stat.S_ISREG(st.st_mode) and st.st_size == size:
            return f
    except OSError:
        pass
    f.close()
    return None


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})
