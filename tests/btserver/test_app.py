"""The control API on a real aiohttp server with a real libtorrent session."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from aiohttp import ClientSession

from tests.support import until
from torrents import auth
from btserver.config import ServerConfig
from torrents.sample import generate
from torrents.servicekit.web import signed_request

from btserver.app import Deps, create_app
from btserver.inventory import Inventory
from btserver.seeder import Seeder

SITE, SECRET = "site1", "test-secret"


def config(tmp_path: Path, **kw) -> ServerConfig:
    root = tmp_path / "root"
    for name in ("ds.one", "ds.two"):
        generate(root, name=name, files=3, total_size=300_000, seed=len(name) + ord(name[-1]))
    return ServerConfig(site=SITE, secret=SECRET, listen="127.0.0.1:0", peer_listen="127.0.0.2:0",
                        state=str(tmp_path / "state"), roots=(str(root),), tracker="", repo="", **kw)


@pytest.fixture
async def server(aiohttp_client, tmp_path):
    """Build an app (config overrides as kwargs), start it, wait until both datasets are seedable."""
    async def make(deps: Deps | None = None, **kw):
        client = await aiohttp_client(create_app(config(tmp_path, **kw), deps=deps))
        await until(lambda: datasets(client), what="datasets prepared")
        return client
    return make


async def status(client) -> dict:
    resp = await client.get("/api/status")
    assert resp.status == 200
    return await resp.json()


async def datasets(client) -> dict[str, str]:
    doc = await status(client)
    return {d["name"]: d["info_hash"] for d in doc["datasets"]} if len(doc["datasets"]) == 2 else {}


async def seeding(client) -> list[str]:
    return [s["info_hash"] for s in (await status(client))["seeds"]]


async def post_seed(client, info_hash: str, *, site: str = SITE, secret: str = SECRET) -> tuple[int, dict]:
    return await signed_request(client.session, "POST", str(client.make_url("/api/seeds")), site=site,
                                secret=secret, payload={"info_hash": info_hash})


async def test_start_and_stop_a_seed(server):
    client = await server()
    ih = (await datasets(client))["ds.one"]
    code, answer = await post_seed(client, ih)
    assert code == 200
    assert answer["state"] == "seeding" and answer["info_hash"] == ih
    host, port = answer["peers"][0].rsplit(":", 1)
    assert host == "127.0.0.2" and int(port) > 0
    assert await seeding(client) == [ih]
    doc = await status(client)
    assert [d["seeding"] for d in doc["datasets"]] == [d["info_hash"] == ih for d in doc["datasets"]]

    url = str(client.make_url(f"/api/seeds/{ih}"))
    code, answer = await signed_request(client.session, "DELETE", url, site=SITE, secret=SECRET)
    assert (code, answer["state"]) == (200, "stopped")
    assert await seeding(client) == []
    code, answer = await signed_request(client.session, "DELETE", url, site=SITE, secret=SECRET)
    assert code == 404 and answer["error"] == f"{ih}: not seeding"


async def test_unsigned_wrong_key_stale_and_replayed_requests_get_401_and_start_nothing(server):
    client = await server()
    ih = (await datasets(client))["ds.one"]
    body = json.dumps({"info_hash": ih}).encode()
    url = client.make_url("/api/seeds")

    resp = await client.post("/api/seeds", data=body)
    assert resp.status == 401 and (await resp.json())["error"] == "POST /api/seeds: request is not signed"
    code, answer = await post_seed(client, ih, secret="wrong")
    assert (code, answer["error"]) == (401, "site1: bad signature")
    code, answer = await post_seed(client, ih, site="site2")
    assert (code, answer["error"]) == (401, "site2: unknown site")
    stale = auth.sign(SECRET, SITE, "POST", "/api/seeds", body, now=time.time() - 3600)
    resp = await client.post("/api/seeds", data=body, headers=stale)
    assert resp.status == 401 and "s off (limit 300 s)" in (await resp.json())["error"]
    assert await seeding(client) == []

    headers = auth.sign(SECRET, SITE, "POST", "/api/seeds", body)
    async with ClientSession() as http:
        first = await http.post(url, data=body, headers=headers)
        assert first.status == 200
        await client.delete(f"/api/seeds/{ih}", headers=auth.sign(SECRET, SITE, "DELETE", f"/api/seeds/{ih}"))
        assert await seeding(client) == []
        again = await http.post(url, data=body, headers=headers)
        assert again.status == 401 and (await again.json())["error"] == "site1: replayed request"
    assert await seeding(client) == []


async def test_unknown_info_hash_is_404_and_a_malformed_one_400(server):
    client = await server()
    code, answer = await post_seed(client, "0" * 40)
    assert (code, answer["error"]) == (404, f"{'0' * 40}: no such dataset at this site")
    code, answer = await post_seed(client, "XYZ")
    assert code == 400 and answer["error"].startswith("info_hash: expected 40 hexadecimal characters")


async def test_at_capacity_with_busy_seeds_is_429(server):
    client = await server(max_seeds=1)
    hashes = await datasets(client)
    assert (await post_seed(client, hashes["ds.one"]))[0] == 200
    code, answer = await post_seed(client, hashes["ds.two"])
    assert code == 429
    assert answer == {"error": "seeds: at capacity (1 busy seeds)", "capacity": 1}
    assert await seeding(client) == [hashes["ds.one"]]
    # Asking again for a seed that runs is not a new seed: still fine at capacity.
    assert (await post_seed(client, hashes["ds.one"]))[0] == 200


async def test_at_capacity_the_least_recently_active_idle_seed_makes_room(server, tmp_path):
    seeder = Seeder("127.0.0.2", 0, max_seeds=1, start_grace=0.2)
    client = await server(deps=Deps(seeder=seeder), max_seeds=1)
    hashes = await datasets(client)
    assert (await post_seed(client, hashes["ds.one"]))[0] == 200

    async def evicted() -> bool:
        code, _ = await post_seed(client, hashes["ds.two"])
        return code == 200
    await until(evicted, timeout=5, what="idle seed evicted")
    assert await seeding(client) == [hashes["ds.two"]]


async def test_a_seed_without_peers_stops_after_idle_ttl(server):
    client = await server(idle_ttl=0.5)
    ih = (await datasets(client))["ds.two"]
    assert (await post_seed(client, ih))[0] == 200
    assert await seeding(client) == [ih]
    started = time.monotonic()

    async def stopped() -> bool:
        return await seeding(client) == []
    await until(stopped, timeout=10, what="idle seed stopped")
    assert time.monotonic() - started >= 0.4


async def test_metrics_and_healthz(server):
    client = await server()
    ih = (await datasets(client))["ds.one"]
    await post_seed(client, ih)
    await post_seed(client, "f" * 40)
    text = await (await client.get("/metrics")).text()
    for line in ("btswarm_server_seeds_active 1.0", "btswarm_server_datasets 2.0",
                 "btswarm_server_seed_start_seconds_count 1.0", "btswarm_server_hash_failures_total 0.0",
                 'btswarm_server_seed_requests_total{result="200"} 1.0',
                 'btswarm_server_seed_requests_total{result="404"} 1.0'):
        assert line in text.splitlines(), line
    assert "# TYPE btswarm_server_uploaded_bytes_total counter" in text
    resp = await client.get("/healthz")
    assert resp.status == 200 and await resp.json() == {"ok": True}


class CrashingInventory(Inventory):
    """A fault no file system here produces on demand: the preparation itself fails."""

    def prepare(self, on_ready=None, stop=None):
        raise OSError(5, "Input/output error")


async def test_a_crash_while_preparing_is_said_in_status_not_hidden_as_ready(aiohttp_client, tmp_path):
    cfg = config(tmp_path)
    client = await aiohttp_client(create_app(cfg, deps=Deps(inventory=CrashingInventory(cfg))))
    doc = await until(lambda: status_when_ready(client), what="the preparation to end")
    assert doc["datasets"] == []
    assert doc["error"] == "preparing datasets failed: OSError: [Errno 5] Input/output error"


async def status_when_ready(client) -> dict | None:
    doc = await status(client)
    return doc if doc["ready"] else None


async def test_the_daemon_rescans_when_asked_directly(server, tmp_path):
    from btserver.app import DAEMON

    client = await server()
    d = client.server.app[DAEMON]
    generate(tmp_path / "root", name="ds.three", files=2, total_size=100_000, seed=3)
    (tmp_path / "root" / "ds.one").rename(tmp_path / "ds.one.away")
    # The first scan may still be finishing: the one that reads the roots as they are now ends after it.
    done_after = d.scans + (2 if d.prepare_lock.locked() else 1)
    d.rescan()  # what SIGHUP and POST /api/rescan call
    await until(lambda: d.scans >= done_after, what="the rescan to finish")
    doc = await status(client)
    assert sorted(x["name"] for x in doc["datasets"]) == ["ds.three", "ds.two"]
