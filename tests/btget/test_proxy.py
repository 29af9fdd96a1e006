"""bt-get's HTTP through a real squid (Debian's, on loopback): the aiohttp sessions (torrents/servicekit/httpclient.py)
and the web-seed relay (btget/doorrelay.py) go where http_proxy and no_proxy say, and squid's log shows it."""

from __future__ import annotations

import asyncio
import os

import pytest
from aiohttp import web

from btget.doorrelay import Relays
from btswarm.testbed.squid import Squid
from torrents.procs import free_port
from torrents.proxyenv import from_environ
from torrents.servicekit.httpclient import client_session

from tests.btget.test_doorrelay import BODY, ask, get

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/sbin/squid"),
                                reason="squid not installed (scripts/install-system-deps.sh)")
DOOR = "127.0.0.2"


@pytest.fixture(scope="module")
def squid():
    proxy = Squid("127.0.0.1", free_port("127.0.0.1")).start()
    yield proxy
    proxy.stop()


@pytest.fixture
async def door():
    """A web seed's door: BODY at /store/ds/f, ranges answered."""
    async def f(request: web.Request) -> web.StreamResponse:
        rng = request.http_range
        part = BODY[rng.start or 0:rng.stop]
        status = 206 if request.headers.get("Range") else 200
        return web.Response(body=part, status=status, headers={"Content-Range": f"bytes {rng.start or 0}-"
                                                                f"{(rng.start or 0) + len(part) - 1}/{len(BODY)}"}
                            if status == 206 else {})

    app = web.Application()
    app.router.add_get("/store/ds/f", f)
    app.router.add_get("/api/datasets", lambda r: web.json_response({"datasets": []}))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, DOOR, 0)
    await site.start()
    yield f"http://{DOOR}:{runner.addresses[0][1]}"
    await runner.cleanup()


def lines_for(squid: Squid, url: str) -> list[str]:
    return [line for line in squid.access_log() if f" {url}" in line]


async def test_a_session_goes_through_the_proxy_unless_no_proxy_says_otherwise(squid, door):
    proxies = from_environ({"http_proxy": squid.url})
    async with client_session(proxies=proxies) as s:
        async with s.get(f"{door}/api/datasets?via=proxy") as resp:
            assert resp.status == 200 and "squid" in resp.headers.get("Via", "")
    assert len(lines_for(squid, f"{door}/api/datasets?via=proxy")) == 1
    for bypass in (DOOR, "127.0.0.0/24", f"{DOOR}:{door.rsplit(':', 1)[1]}"):
        proxies = from_environ({"http_proxy": squid.url, "no_proxy": bypass})
        async with client_session(proxies=proxies) as s:
            async with s.get(f"{door}/api/datasets?via={bypass}") as resp:
                assert resp.status == 200 and "Via" not in resp.headers, bypass
        assert lines_for(squid, f"{door}/api/datasets?via={bypass}") == [], bypass


async def test_the_web_seed_relay_asks_the_door_through_the_proxy(squid, door):
    relays = Relays(from_environ({"http_proxy": squid.url}))
    try:
        local = await asyncio.to_thread(relays.local, f"{door}/store/")
        host, port = local.split("//")[1].split("/")[0].split(":")
        assert host == "127.0.0.1" and relays.door_of((host, int(port))) == (DOOR, int(door.rsplit(":", 1)[1]))
        ranges = [(0, 99), (100_000, 200_000), (250_000, 262_143)]
        # libtorrent with a proxy for its announces asks its web seeds in the absolute form, as a proxy is asked
        paths = ["/store/ds/f", f"http://{host}:{port}/store/ds/f", "/store/ds/f"]
        got = await asyncio.to_thread(ask, (host, int(port)), *(get(p, lo, hi) for p, (lo, hi) in zip(paths, ranges)))
    finally:
        await asyncio.to_thread(relays.close)
    for lo, hi in ranges:
        assert BODY[lo:hi + 1] in got
    assert got.count(b"HTTP/1.1 206") == 3
    assert len(lines_for(squid, f"{door}/store/ds/f")) == 3, squid.access_log()
