"""bt-get's HTTP through a real squid (Debian's, on loopback): the aiohttp sessions (torrents/servicekit/httpclient.py)
and the web-seed relay (btget/worker/doorrelay.py) go where http_proxy and no_proxy say, and squid's log shows it."""

from __future__ import annotations

import asyncio
import os
import subprocess

import pytest
from aiohttp import web

from btget.worker.doorrelay import Relays
from btswarm.testbed.squid import Squid
from torrents.procs import free_port
from torrents.proxyenv import from_environ
from torrents.servicekit.httpclient import client_session

from tests.btget.test_doorrelay import BODY, ask, get
from tests.support import command, until

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
    async def datasets(request: web.Request) -> web.Response:
        return web.json_response({"datasets": [], "total": 0})

    app.router.add_get("/api/datasets", datasets)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, DOOR, 0)
    await site.start()
    yield f"http://{DOOR}:{runner.addresses[0][1]}"
    await runner.cleanup()


def lines_for(squid: Squid, url: str) -> list[str]:
    return [line for line in squid.access_log() if f" {url}" in line]


async def logged(squid: Squid, url: str, count: int) -> list[str]:
    """squid's log lines for `url` once there are `count` of them: squid logs a request as it ends, which can be
    just after the client has the whole answer (on a loaded machine the line was not there yet)."""
    await until(lambda: len(lines_for(squid, url)) >= count, timeout=10, what=f"{count} lines for {url} in squid's log")
    return lines_for(squid, url)


async def test_a_session_goes_through_the_proxy_unless_no_proxy_says_otherwise(squid, door):
    proxies = from_environ({"http_proxy": squid.url})
    async with client_session(proxies=proxies) as s:
        async with s.get(f"{door}/api/datasets?via=proxy") as resp:
            assert resp.status == 200 and "squid" in resp.headers.get("Via", "")
    assert len(await logged(squid, f"{door}/api/datasets?via=proxy", 1)) == 1
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
    assert len(await logged(squid, f"{door}/store/ds/f", 3)) == 3, squid.access_log()


def bt_get(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "no_proxy")}
    return subprocess.run([command("bt-get"), *args], env={**environ, **env}, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("off", [("--no-proxy",), ("BTSWARM_GET_PROXY=off",)])
async def test_bt_get_asks_the_repository_through_the_proxy_and_not_with_no_proxy(squid, door, off):
    env = {"http_proxy": squid.url}
    word = f"w{len(squid.access_log())}"
    done = await asyncio.to_thread(bt_get, "--search", word, "--repo", door, env=env)
    assert done.returncode == 3, done.stderr  # the stand-in repository has no dataset: no match
    assert len(await logged(squid, f"{door}/api/datasets?q={word}", 1)) == 1, squid.access_log()
    flag, *_ = off
    args, more = ((flag,), {}) if flag.startswith("--") else ((), dict([flag.split("=")]))
    done = await asyncio.to_thread(bt_get, "--search", word + "x", "--repo", door, *args, env={**env, **more})
    assert done.returncode == 3, done.stderr
    assert lines_for(squid, f"{door}/api/datasets?q={word}x") == []


def test_a_proxy_bt_get_cannot_use_is_a_one_line_error():
    done = bt_get("--search", "x", "--repo", "http://127.0.0.2:9", env={"https_proxy": "socks5://127.0.0.1:1080",
                                                                        "http_proxy": "127.0.0.1:3128"})
    assert done.returncode == 2
    assert done.stderr.strip() == ("bt-get: error: https_proxy: socks5:// proxies are not supported, only http:// "
                                   "('socks5://127.0.0.1:1080')")


@pytest.fixture(scope="module")
def squid_with_users():
    proxy = Squid("127.0.0.1", free_port("127.0.0.1"), users={"atlas": "s3cr:t@pw"}).start()
    yield proxy
    proxy.stop()


async def test_a_proxy_that_wants_credentials_gets_those_of_the_variable(squid_with_users, door):
    squid = squid_with_users
    address = squid.url.split("//")[1]
    good = from_environ({"http_proxy": f"http://atlas:s3cr%3At%40pw@{address}"})
    bad = from_environ({"http_proxy": f"http://atlas:wrong@{address}"})
    async with client_session(proxies=good) as s:
        async with s.get(f"{door}/api/datasets?who=atlas") as resp:
            assert resp.status == 200
    async with client_session(proxies=bad) as s:
        async with s.get(f"{door}/api/datasets?who=wrong") as resp:
            assert resp.status == 407
    relays = Relays(good)
    try:
        local = await asyncio.to_thread(relays.local, f"{door}/store/")
        host, port = local.split("//")[1].split("/")[0].split(":")
        got = await asyncio.to_thread(ask, (host, int(port)), get("/store/ds/f", 0, 999))
    finally:
        await asyncio.to_thread(relays.close)
    assert got.startswith(b"HTTP/1.1 206") and got.endswith(BODY[:1000])
    assert any(" atlas " in line for line in await logged(squid, f"{door}/store/ds/f", 1)), squid.access_log()


async def test_libtorrent_announces_through_the_proxy_with_its_credentials(squid_with_users, door, tmp_path):
    """ltsession.proxy_settings: a session's announces go through the proxy (here with a user); the door
    stands in for the tracker (its 404 is no matter: squid's log line is)."""
    import libtorrent as lt

    from torrents import metainfo
    from torrents.servicekit import ltsession
    from tests.support import wait_for

    squid = squid_with_users
    address = squid.url.split("//")[1]
    proxy = from_environ({"http_proxy": f"http://atlas:s3cr%3At%40pw@{address}"}).for_url(door)
    info = metainfo.info_dict("ds", [("f", 16384)], 16384, b"\x01" * 20)
    ses = ltsession.session("127.0.0.1", 0, **ltsession.proxy_settings(proxy))
    atp = ltsession.torrent_params(ltsession.torrent_info(metainfo.dump(info, f"{door}/announce")), str(tmp_path), {})
    atp.flags &= ~lt.torrent_flags.paused & ~lt.torrent_flags.auto_managed
    ses.add_torrent(atp)
    try:
        await asyncio.to_thread(wait_for, lambda: any(" atlas " in line and f"GET {door}/announce?" in line
                                                      for line in squid.access_log()),
                                timeout=30, what="an announce in squid's log")
    finally:
        del ses
