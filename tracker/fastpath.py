"""The tracker's listening socket: announces and scrapes answered by a lean HTTP/1.x front,
every other request handed to the aiohttp app on the same connection.

Why it exists: BitTorrent clients announce on a fresh connection each time.
Measured with scripts/bench_tracker.py (wrk, `Connection: close`, beside
Debian's opentracker, 2 shared cores), the app alone spent ~220 CPU µs per
announce, ~35-50 of them deciding the announce and the rest in aiohttp's
per-connection and per-request machinery (transport, request and response
objects, middleware, router, a task per request): 0.28x opentracker's
announces/s. Behind this front an announce costs ~105-120 µs: ~35-40 in the
kernel (accept, read, write, close), ~20 in uvloop and this module, and the
rest (~45-60) in the announce itself, which grows with the swarm because the
handout looks at every peer. That is 0.4-0.6x opentracker's announces/s,
depending on the load on the machine; opentracker spends ~30 µs, nearly all
of it in the kernel.

The front parses just what an announce needs (the request line, `Host`,
`Connection`, and that there is no body) and answers through the same
`Announcer` as the app's `/announce` and `/scrape` routes, so the two
cannot disagree. Anything it is not sure of (another method or path, a
body, an absolute-form target, bytes outside printable ASCII in the target,
a malformed header) is not answered here: the connection, with the bytes
already read, goes to aiohttp's own protocol for the app, which answers it
exactly as it would have without this front (404, 400, the JSON API,
/metrics). A connection handed over stays with aiohttp for the rest of its life.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import ssl
from typing import Callable

from aiohttp import web

from torrents.servicekit.web import serve_until_stopped
from tracker import membership, protocol
from tracker.announcer import Announcer
from tracker.app import ANNOUNCER, BENCODED

log = logging.getLogger("btswarm.tracker.fastpath")

MAX_HEAD = 16 * 1024  # request line and headers; a real announce is under 1 KiB
KEEPALIVE = 75.0  # an idle kept-alive connection is closed after this many seconds
_SWEEP_EVERY = 15.0

# Origin-form target only, printable ASCII without '#'; HTTP/1.0 or 1.1.
_REQUEST_LINE = re.compile(rb"GET (/announce|/scrape)(?:\?([\x21\x22\x24-\x7e]*))? HTTP/1\.([01])")
_HEADER_NAME = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # CR and LF are checked per line
_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: " + BENCODED.encode() + b"\r\nContent-Length: %d\r\n"
_KEEP = b"\r\n"
_KEEP_10 = b"Connection: keep-alive\r\n\r\n"  # an HTTP/1.0 client keeps the connection only when told
_CLOSE = b"Connection: close\r\n\r\n"
_TOO_LARGE_BODY = b"request head longer than %d bytes" % MAX_HEAD
_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain\r\n"
              b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_TOO_LARGE_BODY), _TOO_LARGE_BODY))
_INTERNAL = protocol.failure_answer("tracker: internal error")


def _internal_error(what: bytes, target: bytes | None) -> bytes:
    # As in the app: clients get a bencoded failure, never a 5xx they cannot parse.
    log.exception("%s %r: internal error", what.decode(), (target or b"")[:200])
    return _INTERNAL


class FastPathProtocol(asyncio.Protocol):
    """One connection: announces and scrapes answered here, anything else delegated to aiohttp."""

    __slots__ = ("_announcer", "_delegate", "_live", "_transport", "_ip", "_buf", "_waiting", "_eof", "idle_since")

    def __init__(self, announcer: Announcer, delegate: Callable[[], asyncio.Protocol],
                 live: dict[FastPathProtocol, None]) -> None:
        self._announcer = announcer
        self._delegate = delegate  # aiohttp's protocol factory for the app (web.Server)
        self._live = live
        self._transport: asyncio.Transport | None = None
        self._ip = ""
        self._buf = b""
        self._waiting: asyncio.Future[bytes] | None = None  # an answer not decided yet (Redis, seed starts)
        self._eof = False
        self.idle_since = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self._ip = peer[0] if peer else ""
        self.idle_since = asyncio.get_running_loop().time()
        self._live[self] = None

    def connection_lost(self, exc: Exception | None) -> None:
        self._live.pop(self, None)
        self._transport = None
        self._buf = b""

    def data_received(self, data: bytes) -> None:
        self._buf = self._buf + data if self._buf else data
        if self._waiting is None:
            self._serve()
        elif len(self._buf) > MAX_HEAD:
            self._transport.pause_reading()  # type: ignore[union-attr]  # pipelined while waiting: bounded

    def eof_received(self) -> bool:
        # A client that half-closes after its request still gets a pending
        # answer, and then the connection closes.
        self._eof = True
        return self._waiting is not None

    def close(self) -> None:
        if self._waiting is not None:
            self._waiting.cancel()
        if self._transport is not None:
            self._transport.close()

    def _serve(self) -> None:
        """Answer every complete request in the buffer, in order; stop at one that must wait.

        `pos` walks the buffer and the rest is kept once at the end: slicing
        after each of many pipelined requests would copy the buffer each time.
        """
        transport, buf, pos = self._transport, self._buf, 0
        while pos < len(buf) and transport is not None and not transport.is_closing():
            line_end = buf.find(b"\r\n", pos)
            if line_end < 0:
                if len(buf) - pos > MAX_HEAD:
                    return self._reply_and_close(_TOO_LARGE)
                if buf.find(b"\n", pos) >= 0:  # lines ended by a bare LF: not for this front
                    return self._hand_over(buf[pos:])
                break  # wait for the rest of the request line
            m = _REQUEST_LINE.fullmatch(buf, pos, line_end)
            if m is None:
                return self._hand_over(buf[pos:])
            end = buf.find(b"\r\n\r\n", line_end)
            if end < 0:
                if len(buf) - pos > MAX_HEAD:
                    return self._reply_and_close(_TOO_LARGE)
                if buf.find(b"\n\n", pos) >= 0:
                    return self._hand_over(buf[pos:])
                break  # wait for the rest of the head
            if end - pos > MAX_HEAD:
                return self._reply_and_close(_TOO_LARGE)
            http10 = m.group(3) == b"0"
            keep = self._keep_alive(buf, line_end, end, not http10)
            if keep is None:
                return self._hand_over(buf[pos:])
            pos = end + 4
            path, query = m.group(1), m.group(2) or b""
            try:
                if path == b"/announce":
                    answer = self._announcer.announce_nowait(query, self._ip, membership.of_transport(self._transport))
                else:
                    answer = self._announcer.scrape(query)
            except Exception:
                answer = _internal_error(path, query)
            if not isinstance(answer, bytes):
                # A Future (the store's reply) is waited on as it is; a coroutine needs a task.
                self._waiting = answer if isinstance(answer, asyncio.Future) else \
                    asyncio.get_running_loop().create_task(answer)
                self._waiting.add_done_callback(functools.partial(self._answered, keep=keep, http10=http10))
                break
            self._send(answer, keep, http10)
        if self._transport is not None:
            self._buf = buf[pos:] if pos else buf

    @staticmethod
    def _keep_alive(buf: bytes, line_end: int, end: int, http11: bool) -> bool | None:
        """Whether the connection stays open after this request; None: not a request for the fast path."""
        keep = http11
        host = not http11  # HTTP/1.1 requires Host (RFC 9112 3.2); aiohttp answers 400 without one
        if _CONTROL.search(buf, line_end + 2, end):
            return None  # control characters in a header: aiohttp answers 400
        for line in buf[line_end + 2:end].split(b"\r\n") if end > line_end else ():
            name, sep, value = line.partition(b":")
            if not sep or not _HEADER_NAME.fullmatch(name) or b"\n" in line or b"\r" in line:
                return None  # malformed: aiohttp answers 400
            name = name.lower()
            if name == b"host":
                host = True
            elif name == b"connection":
                tokens = {t.strip() for t in value.lower().split(b",")}
                if b"close" in tokens:
                    keep = False
                elif b"keep-alive" in tokens:
                    keep = True
            elif name in (b"content-length", b"transfer-encoding", b"upgrade", b"expect"):
                if name != b"content-length" or value.strip() != b"0":
                    return None  # a body or a protocol switch: aiohttp's business
        return keep if host else None

    def _send(self, body: bytes, keep: bool, http10: bool) -> None:
        transport = self._transport
        if transport is None:
            return
        transport.write(_HEAD % len(body) + (_CLOSE if not keep else _KEEP_10 if http10 else _KEEP) + body)
        if not keep:
            transport.close()
        else:
            self.idle_since = asyncio.get_running_loop().time()

    def _answered(self, task: asyncio.Future[bytes], keep: bool, http10: bool) -> None:
        self._waiting = None
        if task.cancelled():
            return
        try:
            body = task.result()
        except Exception:
            body = _internal_error(b"/announce", None)
        keep = keep and not self._eof
        self._send(body, keep, http10)
        if keep and self._transport is not None:
            self._transport.resume_reading()
            self._serve()

    def _reply_and_close(self, response: bytes) -> None:
        self._buf = b""
        if self._transport is not None:
            self._transport.write(response)
            self._transport.close()

    def _hand_over(self, data: bytes) -> None:
        """Give the connection, and `data` it sent that is not answered yet, to aiohttp."""
        transport = self._transport
        assert transport is not None
        self._live.pop(self, None)
        self._transport, self._buf = None, b""
        handler = self._delegate()
        handler.connection_made(transport)
        transport.set_protocol(handler)
        handler.data_received(data)


class FastPathServer:
    """The listening socket whose connections meet FastPathProtocol first (see the module docstring).

    Beside an AppRunner, of which only the public `server` (the protocol factory for
    the app) is used: what the fast path does not answer goes there. Not a `web.BaseSite`:
    a site would bind aiohttp's own factory, and making one bind ours takes aiohttp's
    private parts; so this server is stopped by its owner, before the runner's cleanup.
    """

    def __init__(self, runner: web.AppRunner, host: str, port: int, *, reuse_port: bool = False,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.runner = runner
        self.host, self.port = host, port
        self.reuse_port = reuse_port
        self.ssl_context = ssl_context  # TLS: the fast path and aiohttp see the decrypted bytes alike
        self._live: dict[FastPathProtocol, None] = {}
        self._server: asyncio.AbstractServer | None = None
        self._sweeper: asyncio.Task[None] | None = None

    async def start(self) -> int:
        """Listen; the port bound (a free one when asked for 0)."""
        runner = self.runner
        if runner.server is None:
            raise RuntimeError("AppRunner.setup() first")
        announcer, delegate, live = runner.app[ANNOUNCER], runner.server, self._live
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: FastPathProtocol(announcer, delegate, live),
                                                self.host, self.port, reuse_address=True,
                                                reuse_port=self.reuse_port or None, ssl=self.ssl_context)
        self.port = self._server.sockets[0].getsockname()[1]
        self._sweeper = loop.create_task(self._sweep())
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
        for conn in list(self._live):
            conn.close()
        if self._server is not None:
            await self._server.wait_closed()

    async def _sweep(self) -> None:
        # One timer for all connections, not one per connection: the usual
        # connection lives for one request and would pay to arm and cancel it.
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(_SWEEP_EVERY)
            cutoff = loop.time() - KEEPALIVE
            for conn in [c for c in self._live if c.idle_since < cutoff]:
                conn.close()


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop where it is installed, else asyncio's.

    Behind this front uvloop's C transports took an announce from ~177 to
    ~127 CPU µs; under aiohttp alone it made no measurable difference.
    """
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run(app: web.Application, host: str, port: int, *, name: str, reuse_port: bool = False,
        ssl_context: ssl.SSLContext | None = None) -> None:
    """Serve `app` behind the fast path (with TLS when `ssl_context`) until SIGINT/SIGTERM, then shut down cleanly.

    `reuse_port`: bind with SO_REUSEPORT, beside other processes on the same port (torrents.servicekit.prefork).
    Once listening, systemd hears READY=1 (torrents.servicekit.sdnotify).
    """
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(_serve(app, host, port, name, reuse_port, ssl_context))


async def _serve(app: web.Application, host: str, port: int, name: str, reuse_port: bool = False,
                 ssl_context: ssl.SSLContext | None = None) -> None:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    server = FastPathServer(runner, host, port, reuse_port=reuse_port, ssl_context=ssl_context)
    await serve_until_stopped(runner, server, name=name, host=host, secure=ssl_context is not None)
