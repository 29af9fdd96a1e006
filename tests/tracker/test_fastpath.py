"""The fast path in front of the app (tracker/fastpath.py), on a real socket.

Every app-level test of this folder runs again here with `make_client`
serving through FastPathServer, so announces and scrapes go through the
fast path and everything else through the hand-over to aiohttp: same
assertions, same contract. The tests below add what only raw HTTP shows:
keep-alive and pipelining, HTTP/1.0, limits, malformed heads.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
from typing import Any
from urllib.parse import quote_from_bytes

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, settings, strategies as st
from yarl import URL

from torrents import bencoding
from tracker.config import TrackerConfig
from tracker.app import create_app
from tracker.fastpath import MAX_HEAD, FastPathServer

from tests.tracker import test_on_demand, test_protocol, test_seeding, test_sites
from tests.tracker.conftest import client_factory
from tests.tracker.helpers import SECRETS, query

OPEN = TrackerConfig(open=True, site_secrets=SECRETS)

for _module in (test_protocol, test_seeding, test_sites, test_on_demand):
    for _name, _test in vars(_module).items():
        if _name.startswith("test_") and "make_client" in inspect.signature(_test).parameters:
            globals()[_name] = _test


class FastPathTestServer(TestServer):
    """TestServer whose socket is served by FastPathServer, as `bt-tracker run` serves it."""

    async def start_server(self, loop: Any = None, **kwargs: Any) -> None:
        self.runner = web.AppRunner(self.app, handler_cancellation=True)
        await self.runner.setup()
        self.fast = FastPathServer(self.runner, self.host, 0)
        self.port, self.scheme = await self.fast.start(), "http"
        self._root = URL(f"http://{self.host}:{self.port}")  # what make_url joins onto

    async def close(self) -> None:
        if getattr(self, "fast", None) is not None:
            await self.fast.stop()
        await super().close()


@pytest.fixture
async def make_client(store_kind, redis_url):
    async for make in client_factory(FastPathTestServer, store=store_kind, redis_url=redis_url):
        yield make


# --- raw HTTP ----------------------------------------------------------------

class Response:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


async def read_response(reader: asyncio.StreamReader) -> Response:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
    body = await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), 10)
    return Response(status, headers, body)


async def exchange(port: int, data: bytes, answers: int) -> tuple[list[Response], bool]:
    """Send raw bytes, read `answers` responses → (responses, whether the server then closed)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        responses = [await read_response(reader) for _ in range(answers)]
        try:
            closed = await asyncio.wait_for(reader.read(1), 0.5) == b""
        except asyncio.TimeoutError:
            closed = False
        return responses, closed
    finally:
        writer.close()


def get(target: str, *headers: str, version: str = "1.1") -> bytes:
    lines = [f"GET {target} HTTP/{version}", *headers]
    if version == "1.1" and not any(h.lower().startswith("host:") for h in headers):
        lines.insert(1, "Host: 127.0.0.1")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


H = hashlib.sha1(b"fast").digest()


async def test_keep_alive_and_pipelined_requests_answered_in_order(make_client):
    client = await make_client(OPEN)
    data = (get("/announce?" + query(H, b"-TT0001-aaaaaaaaaaaa", port=7001))
            + get("/announce?" + query(H, b"-TT0001-bbbbbbbbbbbb", port=7002))
            + get("/scrape?info_hash=" + quote_from_bytes(H)))
    responses, closed = await exchange(client.port, data, 3)
    assert [r.status for r in responses] == [200, 200, 200] and not closed
    assert all(r.headers["content-type"] == "text/plain" and "connection" not in r.headers for r in responses)
    assert bencoding.decode(responses[1].body)[b"peers"] == b"\x7f\x00\x00\x01" + (7001).to_bytes(2, "big")
    assert bencoding.decode(responses[2].body)[b"files"][H][b"incomplete"] == 2


async def test_hundreds_of_pipelined_announces_in_one_write(make_client):
    client = await make_client(OPEN)
    n = 300
    data = b"".join(get("/announce?" + query(H, b"-TT0001-%012d" % i, port=10000 + i, numwant=0)) for i in range(n))
    responses, closed = await exchange(client.port, data + get("/scrape?info_hash=" + quote_from_bytes(H),
                                                                "Connection: close"), n + 1)
    assert all(r.status == 200 for r in responses) and closed
    assert [bencoding.decode(r.body)[b"incomplete"] for r in responses[:n]] == list(range(1, n + 1))
    assert bencoding.decode(responses[n].body)[b"files"][H][b"incomplete"] == n


async def test_connection_close_is_honoured_and_later_bytes_ignored(make_client):
    client = await make_client(OPEN)
    data = get("/announce?" + query(H), "Connection: close") + get("/healthz")
    responses, closed = await exchange(client.port, data, 1)
    assert responses[0].status == 200 and responses[0].headers["connection"] == "close" and closed


async def test_http10_closes_unless_keep_alive_is_asked(make_client):
    client = await make_client(OPEN)
    responses, closed = await exchange(client.port, get("/announce?" + query(H), version="1.0"), 1)
    assert responses[0].status == 200 and responses[0].headers["connection"] == "close" and closed
    data = get("/scrape", "Connection: keep-alive", version="1.0") + get("/scrape", version="1.0")
    responses, closed = await exchange(client.port, data, 2)
    assert [r.headers["connection"] for r in responses] == ["keep-alive", "close"] and closed


async def test_other_routes_are_served_by_the_app_on_the_same_connection(make_client):
    client = await make_client(OPEN)
    data = (get("/announce?" + query(H, port=7001)) + get("/healthz") + get("/api/swarms/" + H.hex())
            + get("/announce?" + query(H, port=7002)) + get("/nowhere", "Connection: close"))
    responses, closed = await exchange(client.port, data, 5)
    assert [r.status for r in responses] == [200, 200, 200, 200, 404] and closed
    assert responses[1].body == b'{"ok": true}'
    assert b'"leechers": 1' in responses[2].body
    assert bencoding.decode(responses[3].body)[b"incomplete"] == 2  # the app's /announce, same announcer
    async with client.session.get(client.make_url("/metrics")) as resp:
        assert resp.status == 200 and "btswarm_tracker_announces_total" in await resp.text()


async def test_announce_with_a_body_is_left_to_the_app(make_client):
    client = await make_client(OPEN)
    data = get("/announce?" + query(H), "Content-Length: 5")[:-4] + b"\r\n\r\nhello" + get("/healthz")
    responses, _ = await exchange(client.port, data, 2)
    assert [r.status for r in responses] == [200, 200] and b"interval" in responses[0].body


@pytest.mark.parametrize("extra", [0, MAX_HEAD])
async def test_head_over_the_limit_is_431_and_closed(make_client, extra):
    client = await make_client(OPEN)
    if extra:  # a huge header
        data = get("/announce?" + query(H), "X-Padding: " + "a" * (MAX_HEAD + 1))
    else:  # a huge target, never finished
        data = b"GET /announce?" + b"a" * (MAX_HEAD + 1)
    responses, closed = await exchange(client.port, data, 1)
    assert responses[0].status == 431 and closed


@pytest.mark.parametrize("head", [
    b"GET /announce?a=1 HTTP/1.1 extra\r\nHost: x\r\n\r\n",
    b"GET  /announce?a=1 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"get /announce?a=1 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /announce?a=1\r\nHost: x\r\n\r\n",
    b"GET /announce?a=1 HTTP/1.1\r\n\r\n",  # HTTP/1.1 without Host
    b"GET /announce?a=1 HTTP/1.1\r\nHost x\r\n\r\n",
    b"GET /announce?a=1 HTTP/1.1\r\n Host: x\r\n\r\n",
    b"GET /announce?a=1 HTTP/1.1\r\nHost : x\r\n\r\n",
    b"GET /announce?a=1 HTTP/1.1\nHost: x\n\n",
    b"GET /announce?a=\x00 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /announce?a=1 HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
    b"GET /announce?a=1 HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n",
    b"GET /announce?a=1 HTTP/1.1\r\nHost: x\r\nX-A: a\x7fb\r\n\r\n",
    b"GET /announce?a=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 3\r\n\r\nabc",
    b"GET /announce?a=1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"GET /announce?a=\xff HTTP/1.1\r\nHost: x\r\n\r\n",
    b"BLAH\r\n\r\n",
])
async def test_odd_heads_are_answered_as_the_app_alone_answers_them(make_client, head):
    fast = await make_client(OPEN)
    plain = TestServer(create_app(OPEN), host="127.0.0.1", port=0)
    await plain.start_server()
    try:
        (expected,), _ = await exchange(plain.port, head, 1)
    finally:
        await plain.close()
    (answer,), _ = await exchange(fast.port, head, 1)
    assert answer.status == expected.status < 500


async def test_idle_and_half_closed_connections(make_client):
    client = await make_client(OPEN)
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    writer.write(get("/announce?" + query(H)))
    writer.write_eof()  # the client half-closes after its request: it still gets the answer
    assert (await read_response(reader)).status == 200
    assert await asyncio.wait_for(reader.read(), 10) == b""
    writer.close()


_target = st.binary(max_size=600)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=_target, path=st.sampled_from([b"/announce?", b"/scrape?", b"/announce", b"/healthz?"]))
async def test_raw_request_lines_always_get_an_answer_below_500(make_client, raw, path):
    """Any bytes after the path, CR, LF and spaces included: an HTTP answer < 500, never a silent close."""
    client = getattr(make_client, "client", None)
    if client is None:
        client = make_client.client = await make_client(OPEN)
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    try:
        writer.write(b"GET " + path + raw + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1."), answer[:200]
    status = int(answer.split(b" ", 2)[1])
    assert status < 500, answer[:300]
    if status == 200 and path.startswith((b"/announce", b"/scrape")):
        bencoding.decode(answer.partition(b"\r\n\r\n")[2])


async def test_requests_pipelined_behind_an_announce_that_waits_for_a_seed(make_client):
    client = await make_client()
    async with test_seeding.StandInSite("site1", "127.0.0.2", delay=0.3) as site:
        await test_seeding.publish(client, site)
        h = test_seeding.H
        data = (get("/announce?" + query(h, port=7001)) + get("/healthz")
                + get("/announce?" + query(h, b"-TT0001-000000000002", port=7002), "Connection: close"))
        responses, closed = await exchange(client.port, data, 3)
    assert [r.status for r in responses] == [200, 200, 200] and closed
    first, last = bencoding.decode(responses[0].body), bencoding.decode(responses[2].body)
    assert first[b"peers"] == bytes([127, 0, 0, 2]) + (6881).to_bytes(2, "big")  # waited for the start
    assert last[b"complete"] == 1 and last[b"incomplete"] == 2 and site.posts == [h.hex()]


def test_bt_tracker_run_serves_both_paths_on_one_port(procs):
    """The real command (uvloop's transports, where installed): pipelined announces and API calls."""
    from tests.support import command, free_port, http_ok, wait_for

    port = free_port()
    procs.start("bt-tracker", [command("bt-tracker"), "run", "--listen", f"127.0.0.1:{port}", "--open"])
    wait_for(lambda: http_ok(f"http://127.0.0.1:{port}/healthz"), timeout=20, what="bt-tracker /healthz")
    data = (get("/announce?" + query(H, port=7001)) + get("/announce?" + query(H, b"-TT0001-bbbbbbbbbbbb", port=7002))
            + get("/api/swarms/" + H.hex()) + get("/metrics", "Connection: close"))
    responses, closed = asyncio.run(exchange(port, data, 4))
    assert [r.status for r in responses] == [200, 200, 200, 200] and closed
    assert bencoding.decode(responses[1].body)[b"peers"] == b"\x7f\x00\x00\x01" + (7001).to_bytes(2, "big")
    assert b'"leechers": 2' in responses[2].body and b"btswarm_tracker_announces_total" in responses[3].body
