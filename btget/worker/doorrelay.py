"""A loopback relay in front of each plain-http web seed: libtorrent's pipelined requests sent on one at a time.

libtorrent writes a web seed several requests at once (`urlseed_pipeline_size`,
and one per file for a piece that spans files) and reads the answers in
order. A door that answers only the first of them stalls the web seed until
`urlseed_timeout` (20 s): Debian's XRootD 5.5.3 (XrdHttp) answers the first
of two requests in one write and holds the second until more bytes arrive,
which made a dataset many times slower from a door than from nginx
(docs/webseeds.md). Whether a door pipelines
cannot be told before it stalls, so every http web seed goes through the
relay: libtorrent talks to 127.0.0.1:PORT (one port per door, so its
connections still name one door each), the relay sends each request to the
door on a connection with nothing else in flight (up to `PARALLEL` at once,
kept alive) and writes the answers back in the order they were asked. An
https door is left direct: the relay would have to hold the T3's trust for
it.

Behind an HTTP proxy (`http_proxy`, torrents/proxyenv.py) the relay is where
the web seeds go through it: it connects to the proxy instead of the door and
asks for the door's absolute URL, as a proxy is asked; libtorrent's own
connections stay on loopback (torrents/servicekit/ltsession.proxy_settings).

For a members-only dataset the relay also puts the user's bearer token on
every request (`Authorization: Bearer`, btget/resolve/bearer.py), read anew for each
one: a token file renewed during a long fetch is used from the next request
on, which a header fixed when libtorrent was given the web seed could not do.
The token must not cross a network in clear: it goes only to https doors,
which the relay then reaches over TLS itself (verified with `tls`, the T3's
trust; straight to the door, never through a proxy), and to doors on
loopback; a plain-http door elsewhere is asked without it.


The relay runs an asyncio loop in a thread of the worker process; `Relays`
is its whole interface (`local(url)`, `door_of(endpoint)`, `close()`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import threading
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import urlsplit

from torrents.proxyenv import NONE, Proxies, Proxy

from btget.resolve.bearer import carries_token


log = logging.getLogger("btget.doorrelay")

PARALLEL = 4  # requests of one libtorrent connection in flight to the door at once
HEAD_LIMIT = 64 * 1024  # a request's or an answer's head beyond this is refused
CHUNK = 256 * 1024
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 30.0  # a door silent this long in the middle of an answer has failed it
# A door silent this long within an answer is asked again, on another connection, for what is still due
# (up to ASK_AGAIN times): one TCP flow among several on a small shaped link can sit in retransmission
# backoff for half a minute while the others flow, and the answers behind it wait with it (a site's web
# seed at 8 Mbit/s: 22-30 s without a byte, twice in one run; tests/e2e/test_webseeds).
STALL = 5.0
ASK_AGAIN = 3


@dataclass
class Door:
    """One web seed's door: where its requests go, and its idle connections."""

    host: str
    port: int
    path: str  # the base's path, ending in '/'
    netloc: str
    proxy: Proxy | None = None  # the HTTP proxy its requests go through (None: straight to the door)
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = field(default_factory=list)
    credentials: Callable[[], dict[str, str]] = dict  # headers each request carries (the current bearer token)
    tls: ssl.SSLContext | None = None  # an https door: the relay speaks TLS to it

    @classmethod
    def of(cls, base: str, proxy: Proxy | None = None, credentials: Callable[[], dict[str, str]] = dict,
           tls: ssl.SSLContext | None = None) -> Door:
        parts = urlsplit(base)
        path = parts.path if parts.path.endswith("/") else parts.path + "/"
        secure = parts.scheme == "https"
        if not carries_token(base):
            credentials = dict  # a bearer token is not sent in clear across a network
        # An https door is reached over TLS by the relay itself: a proxy would need CONNECT (not spoken here).
        return cls(parts.hostname or "", parts.port or (443 if secure else 80), path, parts.netloc,
                   None if secure else proxy, credentials=credentials, tls=tls if secure else None)

    @property
    def address(self) -> tuple[str, int]:
        """Where its connections go: the proxy, or the door."""
        return (self.proxy.host, self.proxy.port) if self.proxy else (self.host, self.port)



class Relays:
    """The relays of one worker, started on first use; `local` and `close` may be called from any thread."""

    def __init__(self, proxies: Proxies = NONE, credentials: Callable[[], dict[str, str]] = dict,
                 tls: ssl.SSLContext | None = None) -> None:
        self._proxies = proxies
        self.credentials = credentials  # called for each request: the headers it carries to the door
        self.tls = tls  # given (a members-only dataset): https doors are relayed too, over TLS verified with it

        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._local: dict[str, str] = {}  # door base URL → the relay's base URL
        self._doors: dict[tuple[str, int], tuple[str, int]] = {}  # relay endpoint → door endpoint
        self._servers: list[asyncio.base_events.Server] = []
        # asyncio keeps only weak references to tasks, and a stream server's protocol drops its task when the
        # client goes: a serve() still sending answers would be collected mid-way, by whichever thread
        # collects, outside its loop.
        self._serving: set[asyncio.Task] = set()

    def local(self, url: str) -> str:
        """The URL libtorrent is given for web seed `url` (itself, for an https door without `tls`, or if no relay
        could start)."""
        schemes = ("http://", "https://") if self.tls else ("http://",)
        if not url.startswith(schemes) or not urlsplit(url).hostname:
            return url
        if url not in self._local:
            door = Door.of(url, self._proxies.for_url(url), self.credentials, self.tls)

            try:
                port = self._call(self._listen(door))
            except OSError as exc:
                log.warning("%s: no relay (%s): libtorrent asks the door directly", url, exc.strerror)
                return url
            self._local[url] = f"http://127.0.0.1:{port}{door.path}"
            self._doors[("127.0.0.1", port)] = (door.host, door.port)
        return self._local[url]

    def original(self, url: str) -> str:
        """The web seed a URL given to libtorrent stands for."""
        return next((door for door, mine in self._local.items() if mine == url), url)

    def door_of(self, endpoint: tuple[str, int]) -> tuple[str, int]:
        """The door behind a connection's endpoint (the endpoint itself if it is no relay)."""
        return self._doors.get(endpoint, endpoint)

    @property
    def endpoints(self) -> set[tuple[str, int]]:
        return set(self._doors)

    @property
    def serving(self) -> int:
        """How many of libtorrent's connections the relays are serving (a client gone is served no longer)."""
        return len(self._serving)

    def close(self) -> None:
        if self._loop is None:
            return
        with contextlib.suppress(Exception):
            self._call(self._shutdown(), timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        self._loop = None

    # --- the loop's side ------------------------------------------------------------------
    def _call(self, coro, timeout: float = 10.0):
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, name="web seed relay", daemon=True)
            self._thread.start()
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _listen(self, door: Door) -> int:
        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.get_running_loop().create_task(serve(door, reader, writer))
            self._serving.add(task)
            task.add_done_callback(self._serving.discard)

        server = await asyncio.start_server(accepted, "127.0.0.1", 0, limit=HEAD_LIMIT)
        self._servers.append(server)
        return server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        for server in self._servers:
            server.close()
        tasks = asyncio.all_tasks() - {asyncio.current_task()}
        for task in tasks:
            task.cancel()
        if tasks:  # their cancellation runs before the loop stops: none is left pending for the collector
            await asyncio.wait(tasks, timeout=1)


# --- HTTP/1.1, as much of it as a web seed's GETs need --------------------------------------
FAILED = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, ValueError)
END, CLOSE = object(), object()  # an answer's last item: the connection goes on / ends after it


async def serve(door: Door, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
    """One libtorrent connection: its requests read as they come, fetched up to PARALLEL at once, answered in
    order; the answer at the head of the line is streamed as it arrives (a whole-file range from a slow door
    must not wait whole in the relay: libtorrent drops a web seed silent for urlseed_timeout)."""
    answers: asyncio.Queue = asyncio.Queue(PARALLEL)  # (task, its items), in the order asked
    writer = asyncio.create_task(_write_back(answers, client_w))
    try:
        while not writer.done():
            try:
                head = await client_r.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                break
            items: asyncio.Queue = asyncio.Queue()
            request = _forwarded(head, door)
            if request is None:
                items.put_nowait(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                items.put_nowait(CLOSE)
                await _queued(answers, (None, items), writer)
                break
            fetch = asyncio.create_task(_fetch(door, request, items))
            if not await _queued(answers, (fetch, items), writer):
                fetch.cancel()
                break
    except asyncio.CancelledError:
        pass  # the relay is closing
    finally:
        current = asyncio.current_task()
        if writer.done() or (current is not None and current.cancelling()):  # what was asked is not wanted
            while not answers.empty():
                task, _ = answers.get_nowait()
                if task is not None:
                    task.cancel()
            writer.cancel()
        else:  # libtorrent said all it will: the answers still due go out first
            with contextlib.suppress(asyncio.CancelledError):
                await _queued(answers, None, writer)
                await writer
        client_w.close()


async def _queued(answers: asyncio.Queue, entry: object, writer: asyncio.Task) -> bool:
    """Put `entry` in line for `writer` (_write_back) once there is room; False if the writer ends first. It
    ends when the client is gone, and then nobody makes room: a relay whose client left with PARALLEL answers
    due waited here for ever."""
    put = asyncio.ensure_future(answers.put(entry))
    try:
        await asyncio.wait((put, writer), return_when=asyncio.FIRST_COMPLETED)
        return put.done()
    finally:
        put.cancel()


async def _write_back(answers: asyncio.Queue, client_w: asyncio.StreamWriter) -> None:
    """Write each answer as its items come, in the order asked; an answer that failed ends the connection
    (with 502 when nothing of it was sent yet)."""
    while (entry := await answers.get()) is not None:
        _, items = entry
        sent = False
        while (item := await items.get()) is not END:
            if item is CLOSE or isinstance(item, BaseException):
                if isinstance(item, BaseException) and not sent:
                    with contextlib.suppress(ConnectionError):
                        client_w.write(_bad_gateway())
                        await client_w.drain()
                return
            try:
                client_w.write(item)
                await client_w.drain()
            except ConnectionError:
                return
            sent = True


def _forwarded(head: bytes, door: Door) -> bytes | None:
    """The request as the door is sent it: its path under the door's base, its Host the door's."""
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ")
    except ValueError:
        return None
    if target.lower().startswith("http://"):
        # The absolute form, as libtorrent writes its web seeds' requests when it has an HTTP proxy for its
        # announces: a server must take it (RFC 9112 3.2.2) when it names the server, the relay (on
        # 127.0.0.1); another host's URL is refused (the relay is nobody's proxy).
        parts = urlsplit(target)
        if parts.hostname != "127.0.0.1":
            return None
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if method not in ("GET", "HEAD") or not target.startswith("/") or not version.startswith("HTTP/1."):
        return None
    headers = [line for line in lines[1:] if line and not line.lower().startswith(
        ("host:", "connection:", "proxy-authorization:", "authorization:"))]
    own = [f"{name}: {value}" for name, value in door.credentials().items()]
    # The relay's base has the door's path: the target is the door's as it stands (a proxy is asked for the
    # absolute URL, RFC 9112 3.2.2).
    if door.proxy is not None:
        target = f"http://{door.netloc}{target}"
        if door.proxy.authorization:
            own.append(f"Proxy-Authorization: {door.proxy.authorization}")

    return "\r\n".join([f"{method} {target} HTTP/1.1", f"Host: {door.netloc}", "Connection: keep-alive",
                        *headers, *own, "", ""]).encode("latin-1")


async def _fetch(door: Door, request: bytes, items: asyncio.Queue) -> None:
    """Send `request` alone on a connection to the door; put its answer in `items` as it arrives (head, body
    chunks, then END), or the error that ended it. A GET whose answer stalls is asked again for the rest."""
    writer = None  # the connection to the door, closed at the end unless it goes back to the door's idle ones
    try:
        reader, writer, head = await _ask(door, request)
        status, fields = _parse_head(head)
        keep = fields.get("connection", "").lower() != "close"
        no_body = request.startswith(b"HEAD ") or status in (204, 304) or 100 <= status < 200
        if no_body:
            items.put_nowait(head)
        elif "content-length" in fields:
            items.put_nowait(head)
            left = int(fields["content-length"])
            offset = _body_offset(status, fields) if request.startswith(b"GET ") else None
            again = ASK_AGAIN
            while left:
                try:
                    chunk = await asyncio.wait_for(reader.read(min(CHUNK, left)), STALL)
                except asyncio.TimeoutError:
                    if offset is None or not again:
                        raise
                    again -= 1
                    writer.close()
                    log.info("%s: no byte for %.0f s within an answer: asking again for its last %d bytes",
                             door.netloc, STALL, left)
                    reader, writer = await _rest(door, request, offset, left)
                    continue
                if not chunk:
                    raise asyncio.IncompleteReadError(b"", left)
                left -= len(chunk)
                if offset is not None:
                    offset += len(chunk)
                items.put_nowait(chunk)
        elif fields.get("transfer-encoding", "").lower() == "chunked":
            items.put_nowait(head + await _chunked(reader))
        else:  # to the end of the connection: its length is known only then
            body, keep = await reader.read(), False
            items.put_nowait(_with_length(head, len(body)) + body)
        if keep:
            door.idle.append((reader, writer))
            writer = None
        items.put_nowait(END)
    except FAILED as exc:
        items.put_nowait(exc)
    finally:
        # Closed here, in the loop's thread: a connection left to the collector is closed in whichever thread
        # collects, outside the loop.
        if writer is not None:
            writer.close()


async def _ask(door: Door, request: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    """`request` sent on a connection of its own; the answer's head. A head that does not come within STALL
    is asked for again on another connection (READ_TIMEOUT in all)."""
    for attempt in range(ASK_AGAIN + 1):
        reader, writer = await _connection(door)
        try:
            writer.write(request)
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), STALL if attempt < ASK_AGAIN else READ_TIMEOUT - ASK_AGAIN * STALL)
            return reader, writer, head
        except asyncio.TimeoutError:
            writer.close()
            if attempt == ASK_AGAIN:
                raise
        except BaseException:
            writer.close()
            raise
    raise AssertionError("unreachable")


async def _rest(door: Door, request: bytes, offset: int, left: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The last `left` bytes of an answer whose body continues at file offset `offset`, asked for as a range
    on another connection; the reader is left at the first of them."""
    lines = [line for line in request.split(b"\r\n")[:-2] if not line.lower().startswith(b"range:")]
    again = b"\r\n".join([*lines, f"Range: bytes={offset}-{offset + left - 1}".encode(), b"", b""])
    reader, writer, head = await _ask(door, again)
    status, fields = _parse_head(head)
    if status != 206 or _body_offset(status, fields) != offset or int(fields.get("content-length", -1)) != left:
        writer.close()
        first_line = head.split(b"\r\n")[0]
        raise ValueError(f"{door.netloc}: the rest of an answer came back as {first_line!r}")
    return reader, writer


def _body_offset(status: int, fields: dict[str, str]) -> int | None:
    """Where in the file an answer's body starts: 0 for a whole file (200), the Content-Range's first byte
    for a part (206); None when unknown."""
    if status == 200:
        return 0
    if status != 206:
        return None
    unit, _, spec = fields.get("content-range", "").partition(" ")
    first = spec.split("-", 1)[0]
    return int(first) if unit == "bytes" and first.isdigit() else None


async def _connection(door: Door) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    while door.idle:
        reader, writer = door.idle.pop()
        if not reader.at_eof() and not writer.is_closing():
            return reader, writer
        writer.close()
    host, port = door.address
    return await asyncio.wait_for(asyncio.open_connection(host, port, limit=HEAD_LIMIT, ssl=door.tls,
                                                          server_hostname=door.host if door.tls else None),
                                  CONNECT_TIMEOUT)



def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ValueError(f"not an HTTP answer: {lines[0][:80]!r}")
    fields = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            fields[name.strip().lower()] = value.strip()
    return int(parts[1]), fields


async def _chunked(reader: asyncio.StreamReader) -> bytes:
    """A chunked body as sent (sizes, data and trailer), read to its end."""
    out = bytearray()
    while True:
        size_line = await reader.readuntil(b"\r\n")
        out += size_line
        size = int(size_line.split(b";")[0].strip(), 16)
        if size == 0:
            while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
                out += line
            return bytes(out + b"\r\n")
        out += await reader.readexactly(size + 2)


def _with_length(head: bytes, length: int) -> bytes:
    return head[:-2] + f"Content-Length: {length}\r\n\r\n".encode()


def _bad_gateway() -> bytes:
    return b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
