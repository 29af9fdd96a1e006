"""A small Redis client for the tracker: RESP2 over one asyncio connection, pipelined, bounded in time.

Why not redis-py's asyncio client: it spends several times this module's
CPU per command (a pooled connection checked out and back per call, its
locks and encoder; valkey-glide and coredis no better), nearly as much as
the tracker's whole announce (docs/benchmarks.md "tracker"). What makes
it cheap: every command of the process goes down one connection (replies
come back in order, so a FIFO of futures matches them: pipelining for free
under load), a command is a `transport.write` and a future, and replies are
parsed by hiredis (Redis's own C parser, from PyPI). The tracker needs few
commands (EVALSHA, SET NX PX, GET, DEL, HSET, HGETALL, ZADD...), so a
generic `call(*args)` is all the API.

Bounded in time, always: a command that gets no reply within `timeout`
fails with StoreUnavailable and the connection is dropped (a reply that
arrives later could no longer be matched); a connect that fails marks the
server down for `retry_after` seconds, during which calls fail at once
instead of each waiting for a timeout; the next call after that tries
again, so the client recovers by itself when Redis is back.

With Redis Sentinel (`sentinels`, `master`) every connect first asks the
sentinels, in turn, where the master is (SENTINEL get-master-addr-by-name)
and then checks with ROLE that the server it reached is the master: during a
failover the sentinels still name the old, hung master until they have
agreed on a new one, and an old master that comes back calls itself master
until they demote it. A connection of ours is also dropped at once when a
sentinel announces `+switch-master` (a subscription kept to one sentinel), or
when a command is answered READONLY: a process whose connection to the old
master stayed open over the hang (it sent nothing then) would otherwise write
to it after SIGCONT, before its demotion (up to 8 s later), and those writes
would be lost when it resyncs as a replica. docs/reliability.md has the failure
modes. `rediss://` is TLS to the data server and the sentinels alike.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import logging
import ssl
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Sequence
from urllib.parse import parse_qs, unquote, urlsplit

import hiredis

from torrents.errors import BtswarmError, ConfigError
from torrents.hostport import parse_hostport
from torrents.servicekit import tls

log = logging.getLogger("btswarm.tracker.resp")

Arg = bytes | str | int | float


class StoreUnavailable(BtswarmError):
    """The shared store (Redis) cannot be reached, or did not answer in time."""


class RedisError(BtswarmError):
    """Redis answered a command with an error reply."""


@dataclass(frozen=True)
class Endpoint:
    """Where the server is: host and port, or a unix socket path; database and password."""
    host: str = "127.0.0.1"
    port: int = 6379
    path: str | None = None
    db: int = 0
    password: str | None = None
    username: str | None = None
    tls: bool = False  # rediss://

    @property
    def label(self) -> str:
        return f"redis {self.path}" if self.path else f"redis {self.host}:{self.port}"


def parse_url(url: str) -> Endpoint:
    """`redis[s]://[[user]:password@]host[:port][/db]` (rediss: TLS) or `unix:///path/to/socket[?db=N]`."""
    parts = urlsplit(url)
    try:
        if parts.scheme == "unix":
            if not parts.path:
                raise ValueError("no socket path")
            db = int(parse_qs(parts.query).get("db", ["0"])[0])
            return Endpoint(path=parts.path, db=db, password=unquote(parts.password) if parts.password else None)
        if parts.scheme not in ("redis", "rediss"):
            raise ValueError("expected redis://host:port/db, rediss://host:port/db or unix:///path")
        db = int(parts.path.strip("/") or 0)
        return Endpoint(host=parts.hostname or "127.0.0.1", port=parts.port or 6379, db=db,
                        password=unquote(parts.password) if parts.password else None,
                        username=unquote(parts.username) if parts.username else None,
                        tls=parts.scheme == "rediss")
    except ValueError as exc:
        raise ConfigError("redis_url", f"{url!r}: {exc}") from None


def pack(args: Sequence[Arg]) -> bytes:
    """One command in RESP: an array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif not isinstance(a, bytes):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Script:
    """A Lua script run with EVALSHA (loaded on first NOSCRIPT)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest().encode()


class _Connection(asyncio.Protocol):
    def __init__(self, client: RedisClient) -> None:
        self.client = client
        self.reader = hiredis.Reader()
        self.pending: collections.deque[tuple[float, asyncio.Future]] = collections.deque()
        self.transport: asyncio.Transport | None = None
        self.lost: asyncio.Future = asyncio.get_running_loop().create_future()
        self._watch: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, data: bytes, timeout: float) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self.pending.append((time.monotonic() + timeout, fut))
        self.transport.write(data)  # type: ignore[union-attr]
        if self._watch is None:
            self._watch = asyncio.get_running_loop().call_later(timeout, self._check)
        return fut

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        pending = self.pending
        while True:
            try:
                reply = self.reader.gets()
            except hiredis.ProtocolError as exc:
                return self._abort(StoreUnavailable(self.client.label, f"protocol error: {exc}"))
            if reply is False:
                break
            if not pending:
                return self._abort(StoreUnavailable(self.client.label, "a reply nobody asked for"))
            _, fut = pending.popleft()
            if fut.done():
                continue
            if isinstance(reply, hiredis.ReplyError):
                if str(reply).startswith("READONLY"):
                    # A replica now: a failover demoted the server this connection reached. Find the master.
                    gone = StoreUnavailable(self.client.label, "the server is a read-only replica now")
                    fut.set_exception(gone)
                    return self._abort(gone)
                fut.set_exception(RedisError(self.client.label, str(reply)))
            else:
                fut.set_result(reply)
        if not pending and self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def _check(self) -> None:
        # One timer per connection, for its oldest outstanding command.
        self._watch = None
        if not self.pending:
            return
        deadline = self.pending[0][0]
        now = time.monotonic()
        if deadline <= now:
            self._abort(StoreUnavailable(self.client.label,
                                         f"no answer within {self.client.timeout:g} s"))
        else:
            self._watch = asyncio.get_running_loop().call_later(deadline - now, self._check)

    def _abort(self, exc: Exception) -> None:
        self._fail(exc)
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, exc: Exception) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        while self.pending:
            _, fut = self.pending.popleft()
            if not fut.done():
                fut.set_exception(exc)
        self.client._lost(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(StoreUnavailable(self.client.label, f"connection lost ({exc or 'closed'})"))
        if not self.lost.done():
            self.lost.set_result(None)


class RedisClient:
    """One pipelined connection to Redis, (re)made on demand; every call bounded by `timeout`.

    With `sentinels` ((host, port) pairs) and `master` (the name they monitor), the connection
    goes to whichever server the sentinels name master; `url` then gives only the scheme, the
    credentials and the database. `ca_file`: a PEM bundle trusted for rediss:// besides the system's CAs.
    """

    def __init__(self, url: str, *, timeout: float = 1.0, retry_after: float = 0.5,
                 sentinels: Sequence[tuple[str, int]] = (), master: str = "", ca_file: str = "") -> None:
        self.url = url
        self.endpoint = parse_url(url)
        self.timeout = timeout
        self.retry_after = retry_after
        self.sentinels = tuple(sentinels)
        self.master = master
        if self.sentinels and not master:
            raise ConfigError("redis_master", "needed with redis_sentinels: the name the sentinels monitor")
        self._ssl: ssl.SSLContext | None = tls.client_context(ca_file, "redis_ca_file") if self.endpoint.tls else None
        self.label = (f"redis master {master!r} (sentinels {', '.join(f'{h}:{p}' for h, p in self.sentinels)})"
                      if self.sentinels else self.endpoint.label)
        self._conn: _Connection | None = None
        self._connecting: asyncio.Future | None = None
        self._down_until = 0.0
        self._down_reason = ""
        self._closed = False
        self._sentinel = 0  # the sentinel that answered last: asked first next time
        self._watcher: asyncio.Task | None = None
        self.address = ""  # where the connection goes (host:port of the master with sentinels)

    @property
    def connected(self) -> bool:
        return self._conn is not None

    def call(self, *args: Arg) -> Awaitable[Any]:
        """Send a command; await its reply. A Future when connected (no coroutine on the hot path)."""
        conn = self._conn
        if conn is not None:
            return conn.send(pack(args), self.timeout)
        return self._call_connecting(pack(args))

    def call_packed(self, data: bytes) -> Awaitable[Any]:
        conn = self._conn
        if conn is not None:
            return conn.send(data, self.timeout)
        return self._call_connecting(data)

    async def _call_connecting(self, data: bytes) -> Any:
        conn = await self._connect()
        return await conn.send(data, self.timeout)

    def evalsha_nowait(self, script: Script, keys: Sequence[Arg], args: Sequence[Arg]) -> Awaitable[Any]:
        """EVALSHA as a Future when connected (a NOSCRIPT reply then is the caller's to retry with `evalsha`)."""
        return self.call_packed(pack([b"EVALSHA", script.sha, len(keys), *keys, *args]))

    async def evalsha(self, script: Script, keys: Sequence[Arg], args: Sequence[Arg]) -> Any:
        command = pack([b"EVALSHA", script.sha, len(keys), *keys, *args])
        try:
            return await self.call_packed(command)
        except RedisError as exc:
            if not exc.problem.startswith("NOSCRIPT"):
                raise
        await self.call(b"SCRIPT", b"LOAD", script.source)
        return await self.call_packed(command)

    async def _connect(self) -> _Connection:
        if self._closed:
            raise StoreUnavailable(self.label, "client closed")
        if self._conn is not None:
            return self._conn
        if self._connecting is None:
            if time.monotonic() < self._down_until:
                raise StoreUnavailable(self.label, self._down_reason)
            self._connecting = asyncio.ensure_future(self._open())
            # Its caller may time out and go (the task is shielded): the failure is logged in _open.
            self._connecting.add_done_callback(lambda task: task.cancelled() or task.exception())
        return await asyncio.shield(self._connecting)

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        ep = self.endpoint
        try:
            try:
                if self.sentinels:
                    if self._watcher is None:
                        self._watcher = asyncio.ensure_future(self._watch_sentinels())
                    host, port = await self._master_address()
                else:
                    host, port = ep.host, ep.port
                if ep.path:
                    coro = loop.create_unix_connection(lambda: _Connection(self), ep.path)
                else:
                    coro = loop.create_connection(lambda: _Connection(self), host, port, ssl=self._ssl,
                                                  server_hostname=host if self._ssl else None)
                _, conn = await asyncio.wait_for(coro, self.timeout)
                # Before any other command on this connection (replies come in order).
                setup = []
                if ep.password:
                    setup.append(conn.send(pack([b"AUTH", *([ep.username] if ep.username else []), ep.password]),
                                           self.timeout))
                if ep.db:
                    setup.append(conn.send(pack([b"SELECT", ep.db]), self.timeout))
                if self.sentinels:
                    setup.append(conn.send(pack([b"ROLE"]), self.timeout))
                self._conn = conn
                replies = await asyncio.gather(*setup)
                if self.sentinels and replies[-1][0] != b"master":
                    raise StoreUnavailable(self.label, f"{host}:{port}, which the sentinels name master, is a "
                                                       f"{replies[-1][0].decode(errors='replace')} (a failover "
                                                       "under way)")
                self.address = f"{host}:{port}"
            except (OSError, asyncio.TimeoutError) as exc:
                problem = (tls.certificate_problem(exc, "[tracker] redis_ca_file")
                           if isinstance(exc, ssl.SSLError) else None)
                reason = problem or ("cannot connect (" + (exc.strerror if isinstance(exc, OSError) and exc.strerror
                                                           else str(exc) or type(exc).__name__) + ")")
                raise StoreUnavailable(self.label, reason) from None
            except RedisError as exc:
                raise StoreUnavailable(self.label, f"refused the connection ({exc.problem})") from None
            if self._down_reason:
                log.warning("%s: reachable again (%s)", self.label, self.address)
            self._down_reason = ""
            return conn
        except StoreUnavailable as exc:
            if self._conn is not None and self._conn.transport is not None:
                self._conn.transport.abort()
            self._conn = None
            if not self._down_reason:
                log.warning("%s: %s; announces fail until it is back", self.label, exc.problem)
            self._down_reason = exc.problem
            self._down_until = time.monotonic() + self.retry_after
            raise
        finally:
            self._connecting = None

    async def _master_address(self) -> tuple[str, int]:
        """Where the sentinels say the master is: each asked in turn, the last one that answered first."""
        problems = []
        n = len(self.sentinels)
        for k in range(n):
            i = (self._sentinel + k) % n
            host, port = self.sentinels[i]
            try:
                reply = await asyncio.wait_for(
                    self._sentinel_command(host, port, b"SENTINEL", b"get-master-addr-by-name", self.master),
                    self.timeout)
            except (OSError, asyncio.TimeoutError, RedisError) as exc:
                problems.append(f"sentinel {host}:{port}: {getattr(exc, 'problem', '') or exc or 'no answer'}")
                continue
            if isinstance(reply, list) and len(reply) == 2:
                self._sentinel = i
                return reply[0].decode(), int(reply[1])
            problems.append(f"sentinel {host}:{port} monitors no master {self.master!r}")
        raise StoreUnavailable(self.label, "; ".join(problems))

    async def _open_sentinel(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(host, port, ssl=self._ssl, server_hostname=host if self._ssl else None)

    async def _sentinel_command(self, host: str, port: int, *args: Arg) -> Any:
        reader, writer = await self._open_sentinel(host, port)
        try:
            writer.write(pack(args))
            parser = hiredis.Reader()
            while (reply := parser.gets()) is False:
                data = await reader.read(65536)
                if not data:
                    raise ConnectionResetError("closed the connection")
                parser.feed(data)
            if isinstance(reply, hiredis.ReplyError):
                raise RedisError(f"sentinel {host}:{port}", str(reply))
            return reply
        finally:
            writer.close()

    async def _watch_sentinels(self) -> None:
        """Subscribed to +switch-master at one sentinel (the next one when it goes): a failover drops our
        connection at once, wherever it goes (see the module's docstring)."""
        k = 0
        while not self._closed:
            host, port = self.sentinels[(self._sentinel + k) % len(self.sentinels)]
            k += 1
            try:
                reader, writer = await asyncio.wait_for(self._open_sentinel(host, port), self.timeout)
                try:
                    writer.write(pack([b"SUBSCRIBE", b"+switch-master"]))
                    parser = hiredis.Reader()
                    while data := await reader.read(65536):
                        parser.feed(data)
                        while (msg := parser.gets()) is not False:
                            # ["message", "+switch-master", "NAME OLD_IP OLD_PORT NEW_IP NEW_PORT"]
                            if (isinstance(msg, list) and len(msg) == 3 and msg[0] == b"message"
                                    and msg[2].split(b" ", 1)[0] == self.master.encode()):
                                self._switched(msg[2].decode(errors="replace"))
                finally:
                    writer.close()
            except (OSError, asyncio.TimeoutError, hiredis.ProtocolError):
                pass
            await asyncio.sleep(self.retry_after)

    def _switched(self, news: str) -> None:
        _, old_host, old_port, new_host, new_port = (news.split() + [""] * 5)[:5]
        log.warning("%s: failover: the master moved from %s:%s to %s:%s", self.label, old_host, old_port,
                    new_host, new_port)
        conn, self._conn = self._conn, None
        self._down_until = 0.0  # the next call connects to the new master at once
        if conn is not None:
            conn._abort(StoreUnavailable(self.label, "the master moved (failover)"))

    def _lost(self, conn: _Connection) -> None:
        if self._conn is conn:
            self._conn = None
            if not self._closed:
                self._down_reason = "connection lost"
                log.warning("%s: connection lost; reconnecting on the next call", self.label)

    async def close(self) -> None:
        self._closed = True
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
        conn, self._conn = self._conn, None
        if conn is not None and conn.transport is not None:
            conn.transport.close()
            try:
                await asyncio.wait_for(asyncio.shield(conn.lost), 1.0)
            except asyncio.TimeoutError:
                conn.transport.abort()


def sentinel_addresses(entries: Sequence[str]) -> tuple[tuple[str, int], ...]:
    """`redis_sentinels` entries (host:port) → (host, port) pairs."""
    return tuple(parse_hostport(e) for e in entries)
