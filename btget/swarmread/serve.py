"""`bt-get NAME --serve [IP:PORT]`: the dataset's files over HTTP, fetched from the swarm as they are read.

    GET|HEAD /NAME/LFN     the file; Range: one range (206), several (206
                           multipart/byteranges), none (200, the whole file)
    GET /  and  /NAME/     JSON: the files, and what the swarm session has done

A request's pieces get deadlines in reading order; the response waits for
each piece to be on disk and match its SHA1 (btget.swarmread.swarmpieces), then sends
it from disk. A reader that keeps reading where it stopped gets pieces read
ahead (btget.swarmread.streaming.ReadAhead). A client that goes away drops the
deadlines of the pieces nobody else waits for. Unknown file: 404; a Range
outside the file: 416; a piece no peer delivers within --piece-timeout: 503
with the reason (or, once the response has begun, the connection is cut:
HTTP has no way to take back a 206).

Requests never name a path on disk: an LFN is looked up among the torrent's
files, and only those files are ever opened.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import secrets
import signal
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import quote

from aiohttp import web

from torrents.errors import BtswarmError
from torrents.metainfo import Metainfo

from btget.swarmread.streaming import PieceMap, RangeNotSatisfiable, ReadAhead, content_range, deadlines, parse_range
from btget.swarmread.swarmpieces import PieceUnavailable, SwarmPieces
from btget.worker.spec import WorkerSpec

log = logging.getLogger("btget.serve")

DEFAULT_ADDRESS = ("127.0.0.1", 8765)
URGENT_WINDOW = 16 * 2**20  # bytes of a request given deadlines ahead of the piece being sent
READ_AHEAD_MAX = 32 * 2**20  # a streaming reader gets as much read ahead as it read in a row, up to this
READ_AHEAD_SLACK = 4096  # a request this far past the last one's end still continues it
URGENT_STEP_MS = 10  # deadline spacing of a request's pieces: first needed, first asked for
AHEAD_BASE_MS, AHEAD_STEP_MS = 2000, 20  # read-ahead: after every piece someone is waiting for
RANGE_LOG = 10_000  # ranges kept for GET / (what readers asked for)


@dataclass(frozen=True)
class ServeOptions:
    host: str = DEFAULT_ADDRESS[0]
    port: int = DEFAULT_ADDRESS[1]
    prefetch: bool = True
    piece_timeout: float = 60.0
    parent_pid: int | None = None  # stop when this process is gone (a launcher such as btget.swarmread.swarmfs)
    json_output: bool = False


class Server:
    def __init__(self, meta: Metainfo, pieces: SwarmPieces, opts: ServeOptions) -> None:
        self.meta = meta
        self.pieces = pieces
        self.opts = opts
        self.map: PieceMap = pieces.map
        self.index = {f.lfn: i for i, f in enumerate(meta.files) if not f.pad}
        self.readahead = ReadAhead(max(READ_AHEAD_MAX, meta.piece_length), slack=READ_AHEAD_SLACK)
        self.window = max(2, URGENT_WINDOW // meta.piece_length)
        self._ids = itertools.count(1)
        self.requests = 0
        self.ranges: deque[tuple[str, int, int]] = deque(maxlen=RANGE_LOG)
        self.started = time.time()

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/", self.listing)
        app.router.add_get(f"/{quote(self.meta.name)}/", self.listing)
        app.router.add_route("GET", "/{name}/{lfn:.+}", self.file)
        app.router.add_route("HEAD", "/{name}/{lfn:.+}", self.file)
        return app

    # --- GET / -----------------------------------------------------------------------
    async def listing(self, request: web.Request) -> web.Response:
        st = self.pieces.stats()
        return web.json_response({
            "dataset": self.meta.name, "info_hash": self.meta.info_hash, "piece_length": self.meta.piece_length,
            "num_pieces": self.map.num_pieces, "prefetch": self.opts.prefetch,
            "files": [{"lfn": lfn, "size": self.meta.files[i].length,
                       "url": f"/{quote(self.meta.name)}/{quote(lfn)}"} for lfn, i in self.index.items()],
            "swarm": {"downloaded": st.downloaded, "redundant": st.redundant, "pieces": st.pieces,
                      "verified": st.verified, "peers": st.peers, "seeds": st.seeds, "rate": st.rate,
                      "state": st.state, "hash_failures": self.pieces.hash_failures,
                      "waiting": len(self.pieces.demand.wanted())},
            "requests": self.requests,
            "ranges": [list(r) for r in self.ranges],
        })

    # --- GET|HEAD /NAME/LFN --------------------------------------------------------------
    async def file(self, request: web.Request) -> web.StreamResponse:
        name, lfn = request.match_info["name"], request.match_info["lfn"]
        file = self.index.get(lfn) if name == self.meta.name else None
        if file is None:
            return _text(404, f"{name}/{lfn}: no such file in dataset {self.meta.name}")
        size = self.meta.files[file].length
        try:
            asked = parse_range(request.headers.get("Range"), size)
        except RangeNotSatisfiable as exc:
            return _text(416, f"{lfn}: {exc}", {"Content-Range": f"bytes */{size}"})
        ranges = asked if asked is not None else [(0, size)]
        boundary = secrets.token_hex(12)
        status, headers, parts, length = _shape(asked, ranges, size, boundary, f'"{self.meta.info_hash}-{file}"')
        if request.method == "HEAD":
            return web.Response(status=status, headers={**headers, "Content-Length": str(length)})

        self.requests += 1
        for s, e in ranges:
            self.ranges.append((lfn, s, e))
        reader = next(self._ids)
        order, ahead_deadlines = self._wanted(file, ranges, size)
        completed = False
        try:
            self.pieces.want(reader, deadlines(order[:self.window], 0, URGENT_STEP_MS) + ahead_deadlines)
            if order:
                try:
                    await self.pieces.wait(reader, order[0])
                except PieceUnavailable as exc:
                    return _text(503, f"{lfn}: {exc}", {"Retry-After": "10"})
            resp = web.StreamResponse(status=status, headers=headers)
            resp.content_length = length
            await resp.prepare(request)
            await self._send(resp, reader, lfn, file, ranges, order, parts)
            if parts:
                await resp.write(_closing(boundary))
            await resp.write_eof()
            completed = True
            return resp
        except (_Abort, ConnectionResetError):
            # The client is gone, or we cannot go on: cut the connection (a 206 cannot be taken back).
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=503)
        finally:
            if completed and ahead_deadlines:
                # Read-ahead outlives the request that caused it: the next request
                # of this stream is what it is for. It belongs to the file now.
                self.pieces.want(-1 - file, ahead_deadlines)
            self.pieces.release(reader)

    def _wanted(self, file: int, ranges: list[tuple[int, int]], size: int) -> tuple[list[int], list[tuple[int, int]]]:
        """The pieces a request needs, in reading order, and the read-ahead it earns with their deadlines."""
        order = _ordered(self.map.pieces(file, s, e) for s, e in ranges)
        ahead: list[int] = []
        for s, e in ranges:
            a_start, a_end = self.readahead.on_request(file, s, e, size)
            ahead += [p for p in self.map.pieces(file, a_start, a_end) if p not in order]
        ahead = _ordered([ahead])
        return order, deadlines(ahead, AHEAD_BASE_MS, AHEAD_STEP_MS)

    async def _send(self, resp: web.StreamResponse, reader: int, lfn: str, file: int, ranges: list[tuple[int, int]],
                    order: list[int], parts: list[bytes]) -> None:
        """The ranges' bytes (each after its part header when multipart), each piece once it is verified; as
        each is sent, the piece a window past it is asked for."""
        position = 0  # index in `order` of the next piece to send
        for k, (s, e) in enumerate(ranges):
            if parts:
                await resp.write(parts[k])
            for piece in self.map.pieces(file, s, e):
                if position + self.window < len(order):
                    self.pieces.want(reader, [(order[position + self.window], URGENT_STEP_MS * self.window)])
                position += 1
                try:
                    await self.pieces.wait(reader, piece, 0)
                except PieceUnavailable as exc:
                    log.warning("%s: %s; closing the response after %d bytes", lfn, exc, resp.body_length)
                    raise _Abort() from exc
                lo, hi = self.map.piece_range_in_file(piece, file)
                lo, hi = max(lo, s), min(hi, e)
                await resp.write(await asyncio.to_thread(self.pieces.read, file, lo, hi))


def _shape(asked: list[tuple[int, int]] | None, ranges: list[tuple[int, int]], size: int, boundary: str,
           etag: str) -> tuple[int, dict[str, str], list[bytes], int]:
    """A file response's status, headers, multipart part headers (none for one range) and length (pure)."""
    headers = {"Accept-Ranges": "bytes", "ETag": etag}
    if asked is not None and len(ranges) > 1:
        parts = [_part_header(boundary, s, e, size) for s, e in ranges]
        length = sum(len(p) + e - s for p, (s, e) in zip(parts, ranges)) + len(_closing(boundary))
        headers["Content-Type"] = f"multipart/byteranges; boundary={boundary}"
    else:
        parts = []
        length = sum(e - s for s, e in ranges)
        headers["Content-Type"] = "application/octet-stream"
        if asked is not None:
            headers["Content-Range"] = content_range(*ranges[0], size)
    return (206 if asked is not None else 200), headers, parts, length


class _Abort(Exception):
    pass


def _ordered(groups) -> list[int]:
    """Pieces in first-needed order, each once."""
    seen: dict[int, None] = {}
    for g in groups:
        for p in g:
            seen.setdefault(p, None)
    return list(seen)


def _part_header(boundary: str, start: int, end: int, size: int) -> bytes:
    return (f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n"
            f"Content-Range: {content_range(start, end, size)}\r\n\r\n").encode()


def _closing(boundary: str) -> bytes:
    return f"\r\n--{boundary}--\r\n".encode()


def _text(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, text=message + "\n", headers=headers)


def run(meta: Metainfo, spec: WorkerSpec, opts: ServeOptions, announce: Callable[[dict[str, Any]], None]) -> int:
    """Serve until SIGINT/SIGTERM (or the parent process is gone); `announce` gets the URL once listening."""
    return asyncio.run(_serve(meta, spec, opts, announce))


async def _serve(meta: Metainfo, spec: WorkerSpec, opts: ServeOptions,
                 announce: Callable[[dict[str, Any]], None]) -> int:
    pieces = SwarmPieces(meta, spec, prefetch=opts.prefetch, piece_timeout=opts.piece_timeout)
    server = Server(meta, pieces, opts)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    pump = asyncio.create_task(pieces.pump())
    # handler_cancellation: a client that disconnects cancels its handler, whose
    # `finally` then drops the deadlines of the pieces it was waiting for.
    runner = web.AppRunner(server.app(), access_log=None, handler_cancellation=True)
    await runner.setup()
    try:
        site = web.TCPSite(runner, opts.host, opts.port)
        try:
            await site.start()
        except OSError as exc:
            raise BtswarmError("--serve", f"{opts.host}:{opts.port}: cannot listen ({exc.strerror})") from None
        port = runner.addresses[0][1]
        host = f"[{opts.host}]" if ":" in opts.host else opts.host
        announce({"dataset": meta.name, "info_hash": meta.info_hash, "url": f"http://{host}:{port}/{quote(meta.name)}/",
                  "directory": os.path.join(spec.save_path, meta.name), "peer_port": pieces.listen_port,
                  "prefetch": opts.prefetch})
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), 1.0)
            except asyncio.TimeoutError:
                pass
            if opts.parent_pid is not None and not _alive(opts.parent_pid):
                log.info("parent process %d is gone; stopping", opts.parent_pid)
                break
            if pump.done():
                pump.result()  # an error in the alert pump ends the server with it
                break
    finally:
        await runner.cleanup()
        pieces._stopping = True
        await asyncio.gather(pump, return_exceptions=True)
        pieces.close()
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def announce_line(json_output: bool) -> Callable[[dict[str, Any]], None]:
    """What bt-get prints on stdout once the server listens: a line for a person, or one JSON line."""
    def say(info: dict[str, Any]) -> None:
        if json_output:
            print(json.dumps(info), flush=True)
        else:
            print(f"serving {info['dataset']} on {info['url']} (Ctrl-C stops)", flush=True)
    return say
