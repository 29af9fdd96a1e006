"""bt-server's web seed (BEP 19) on a real listener: bytes, ranges, confinement, caps, accounting, metrics.

A real bt-server app (real libtorrent session, real farms on disk) whose
web listener is a second aiohttp server on 127.0.0.2; requests are real HTTP
over loopback, some written by hand (paths a client library would tidy up).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import aiohttp
import pytest

from btserver.app import DAEMON, create_app
from btserver.config import ServerConfig
from btserver.ratelimit import TokenBucket
from torrents import urls
from torrents.errors import ConfigError
from torrents.sample import generate

from tests.support import until

SITE, SECRET = "site1", "test-secret"


def config(tmp_path: Path, **kw) -> ServerConfig:
    root = tmp_path / "root"
    if not root.exists():
        for name in ("ds.one", "ds two#?"):
            generate(root, name=name, files=3, total_size=600_000, seed=len(name))
    return ServerConfig(site=SITE, secret=SECRET, listen="127.0.0.1:0", peer_listen="127.0.0.2:0",
                        web_listen="127.0.0.2:0", state=str(tmp_path / "state"), roots=(str(root),), tracker="",
                        repo="", **kw)


@pytest.fixture
async def site(aiohttp_client, tmp_path):
    """A bt-server app with its web seed up and both datasets prepared → (control client, web base URL, root)."""
    async def make(**kw):
        client = await aiohttp_client(create_app(config(tmp_path, **kw)))

        async def ready():
            doc = await (await client.get("/api/status")).json()
            return doc if len(doc["datasets"]) == 2 else None
        doc = await until(ready, what="datasets prepared")
        assert doc["web"]["url"].startswith("http://127.0.0.2:")
        assert doc["web_seeds"][0] == doc["web"]["url"] + "/data/"
        return client, doc["web_seeds"][0], tmp_path / "root"
    return make


def file_url(base: str, name: str, lfn: str) -> str:
    return base + urls.web_seed_path(name, lfn)


async def raw_get(url_base: str, target: str, headers: str = "") -> tuple[int, bytes]:
    """One HTTP/1.1 request with `target` sent exactly as written → (status, body)."""
    host, port = url_base.split("//")[1].split("/")[0].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n{headers}\r\n".encode())
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


async def test_whole_files_and_byte_ranges_are_the_files_bytes(site):
    _, base, root = await site()
    async with aiohttp.ClientSession() as http:
        for name in ("ds.one", "ds two#?"):
            for path in sorted((root / name).iterdir()):
                data = path.read_bytes()
                async with http.get(file_url(base, name, path.name)) as r:
                    assert (r.status, await r.read()) == (200, data)
                    assert r.headers["Accept-Ranges"] == "bytes"
                async with http.get(file_url(base, name, path.name), headers={"Range": "bytes=1000-20999"}) as r:
                    assert (r.status, await r.read()) == (206, data[1000:21000])
                    assert r.headers["Content-Range"] == f"bytes 1000-20999/{len(data)}"
        path = sorted((root / "ds.one").iterdir())[0]
        data, url = path.read_bytes(), file_url(base, "ds.one", path.name)
        async with http.get(url, headers={"Range": "bytes=-100"}) as r:
            assert (r.status, await r.read()) == (206, data[-100:])
        async with http.get(url, headers={"Range": f"bytes=100-{len(data) + 50}"}) as r:  # clipped to the end
            assert (r.status, await r.read()) == (206, data[100:])
        async with http.get(url, headers={"Range": f"bytes={len(data)}-"}) as r:
            assert r.status == 416 and r.headers["Content-Range"] == f"bytes */{len(data)}"
        for bad in ("bytes=5-1", "bytes=0-1,5-6", "bytes=x"):  # backwards, several ranges, malformed
            async with http.get(url, headers={"Range": bad}) as r:
                assert r.status == 416 and r.headers["Content-Range"] == f"bytes */{len(data)}", bad
        async with http.get(url, headers={"Range": "bytes=100-"}) as r:
            assert (r.status, await r.read()) == (206, data[100:])
        async with http.head(url) as r:
            assert r.status == 200 and int(r.headers["Content-Length"]) == len(data) and await r.read() == b""


async def test_paths_outside_the_farm_are_404_and_nothing_outside_the_roots_is_served(site, tmp_path):
    client, base, root = await site()
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"not a dataset file\n")
    lfn = sorted(p.name for p in (root / "ds.one").iterdir())[0]
    prefix = "/" + base.split("//")[1].split("/", 1)[1]  # /data/
    for target in (f"{prefix}ds.one/../../../{secret}", f"{prefix}ds.one/%2e%2e/%2e%2e/secret.txt",
                   f"{prefix}..%2f..%2fsecret.txt/x", f"{prefix}ds.one/{lfn}/..", f"{prefix}ds.one/.bt-get",
                   f"{prefix}ds.one/nonexistent", f"{prefix}no.such.dataset/{lfn}", f"{prefix}ds.one/",
                   f"{prefix}ds.one/{'%00'}"):
        status, body = await raw_get(base, target)
        assert status in (400, 404) and b"not a dataset" not in body, (target, status, body)

    # The farm's link swapped behind the site's back: to a file outside the roots (of the same size), to a
    # directory, to a file of another size. Each is refused; the file next to it is still served.
    d = client.server.app[DAEMON]
    farm = d.inventory.by_name("ds.one").farm
    victim = farm / lfn
    size = victim.stat().st_size
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"x" * size)
    for target in (outside, tmp_path, root / "ds.one" / sorted(p.name for p in (root / "ds.one").iterdir())[1]):
        victim.unlink()
        os.symlink(target, victim)
        status, body = await raw_get(base, f"{prefix}ds.one/{lfn}")
        assert status == 404 and b"xxxx" not in body, (target, status)
    other = sorted((root / "ds.one").iterdir())[2]
    status, body = await raw_get(base, f"{prefix}ds.one/{other.name}")
    assert status == 200 and body == other.read_bytes()


async def test_concurrent_requests_beyond_the_cap_wait_then_get_503(site):
    # 1 request at a time, at 200 kB/s: one whole file (~200 kB) keeps the only slot for about a second.
    control, base, root = await site(web_max_requests=1, web_queue_timeout=0.3, web_rate_limit=200_000)
    path, other = sorted((root / "ds.one").iterdir())[:2]
    async with aiohttp.ClientSession() as http:
        first = asyncio.ensure_future(http.get(file_url(base, "ds.one", path.name)))

        async def holding_the_slot():
            doc = await (await control.get("/api/status")).json()
            return any(s["active_requests"] for s in doc["web"]["serving"])
        await until(holding_the_slot, what="the first request to hold the only slot")
        async with http.get(file_url(base, "ds.one", other.name)) as r:
            assert r.status == 503 and r.headers["Retry-After"] == "5"
            assert "1 requests in flight" in await r.text()
        async with await first as r:
            assert (r.status, await r.read()) == (200, path.read_bytes())
        async with http.get(file_url(base, "ds.one", other.name)) as r:  # the slot is free again
            assert (r.status, await r.read()) == (200, other.read_bytes())


async def test_the_rate_cap_holds_every_response_together_below_it(site):
    rate = 400_000
    _, base, root = await site(web_rate_limit=rate)
    paths = sorted((root / "ds.one").iterdir())
    total = sum(p.stat().st_size for p in paths)
    burst = max(64 * 1024, rate // 4)
    async with aiohttp.ClientSession() as http:
        async def fetch(p):
            async with http.get(file_url(base, "ds.one", p.name)) as r:
                return await r.read()
        t = time.monotonic()
        bodies = await asyncio.gather(*(fetch(p) for p in paths))
        elapsed = time.monotonic() - t
    assert bodies == [p.read_bytes() for p in paths]
    # A lower bound only (a slow machine cannot make it fail): all three at once went no faster than the cap.
    assert elapsed >= (total - burst) / rate * 0.95, (elapsed, total)


async def test_web_use_counts_in_the_load_and_takes_a_free_slot_like_a_seed(site):
    client, base, root = await site(max_seeds=1)
    d = client.server.app[DAEMON]
    one = sorted((root / "ds.one").iterdir())[0]
    two = sorted((root / "ds two#?").iterdir())[0]
    async with aiohttp.ClientSession() as http:
        async with http.get(file_url(base, "ds.one", one.name)) as r:
            assert r.status == 200 and await r.read() == one.read_bytes()
        # ds.one now holds the only slot (busy until idle_ttl passes without a request): ds two#? waits.
        async with http.get(file_url(base, "ds two#?", two.name)) as r:
            assert r.status == 503 and "at capacity" in await r.text()
        async with http.get(file_url(base, "ds.one", one.name), headers={"Range": "bytes=0-9"}) as r:
            assert r.status == 206  # a busy dataset is served on
    body = d.heartbeat_body()
    assert body["load"] == 1 and body["seeding"] == []
    doc = await (await client.get("/api/status")).json()
    [served] = doc["web"]["serving"]
    assert served["name"] == "ds.one" and served["requests"] == 2 and served["sent"] == one.stat().st_size + 10
    metrics = await (await client.get("/metrics")).text()
    assert f'btswarm_server_web_sent_bytes_total{{dataset="ds.one"}} {float(one.stat().st_size + 10)}' in metrics
    assert 'btswarm_server_web_requests_total{code="503"} 1.0' in metrics
    assert 'btswarm_server_web_requests_total{code="200"} 1.0' in metrics


async def test_the_idle_slot_is_freed_after_idle_ttl(site):
    client, base, root = await site(max_seeds=1, idle_ttl=0.5)
    one = sorted((root / "ds.one").iterdir())[0]
    two = sorted((root / "ds two#?").iterdir())[0]
    async with aiohttp.ClientSession() as http:
        async with http.get(file_url(base, "ds.one", one.name)) as r:
            assert r.status == 200
        d = client.server.app[DAEMON]
        await until(lambda: _async(not d.web.load.busy()), what="ds.one idle")
        async with http.get(file_url(base, "ds two#?", two.name)) as r:
            assert r.status == 200 and await r.read() == two.read_bytes()
    # What the web seed sent stays in the heartbeat after ds.one's entry was forgotten.
    hashes = {x["name"]: x["info_hash"] for x in (await (await client.get("/api/status")).json())["datasets"]}
    assert d.heartbeat_body()["uploaded"] == {hashes["ds.one"]: one.stat().st_size,
                                              hashes["ds two#?"]: two.stat().st_size}


async def _async(value):
    return value


async def test_door_templates_are_listed_as_bases_beside_the_own_listener(site):
    door = "https://door.example:2880/pnfs/example.org/atlas/{dataset}/{lfn}"
    client, base, root = await site(web_seed_urls=(door,))
    doc = await (await client.get("/api/status")).json()
    assert doc["web_seeds"] == [base, "https://door.example:2880/pnfs/example.org/atlas/"]


def test_door_templates_are_checked_when_the_config_is_read(tmp_path):
    with pytest.raises(ConfigError, match=r"web_seed_urls: 'ftp://door/\{lfn\}' is not an http"):
        config(tmp_path, web_seed_urls=("ftp://door/{lfn}",))
    for bad in ("https://door/{dataset}/", "https://door/flat/{lfn}", "https://door/{dataset}/{lfn}?x=1"):
        with pytest.raises(ConfigError, match=r"does not end in /\{dataset\}/\{lfn\} \(a BEP 19 client appends"):
            config(tmp_path, web_seed_urls=(bad,))
    with pytest.raises(ConfigError, match=r"the part before /\{dataset\}/\{lfn\} may hold no placeholder"):
        config(tmp_path, web_seed_urls=("https://door/{scope}/{dataset}/{lfn}",))
    ServerConfig(web_seed_urls=("https://door/x/{dataset}/{lfn}",))  # a door alone, without a listener of ours


def test_token_bucket_keeps_the_rate_over_concurrent_reservations():
    now = [100.0]
    bucket = TokenBucket(1000, burst=500, clock=lambda: now[0])
    assert bucket.reserve(500) == 0.0  # the burst goes at once
    assert bucket.reserve(500) == pytest.approx(0.5)  # then the rate: two senders interleave
    assert bucket.reserve(500) == pytest.approx(1.0)
    now[0] += 1.0
    assert bucket.reserve(1000) == pytest.approx(1.0)
    now[0] += 60.0  # a quiet spell refills the burst, no more
    assert bucket.reserve(500) == 0.0
    assert bucket.reserve(1) == pytest.approx(0.001)
