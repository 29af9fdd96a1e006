"""bt-server's web seed with members-only datasets: no token 401, another scope 403, the right one the bytes;
a token whose key the issuer withdrew stops working. A real bt-server app, a real issuer over https."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest

from btserver.app import Deps, create_app
from btserver.config import ServerConfig
from tests.access.issuer_support import access_for
from tests.support import until
from torrents import urls
from torrents.sample import generate

pytestmark = pytest.mark.slow

SECRET_DS, OPEN_DS = "atlas:data18.AOD.r1", "ds.one"


@pytest.fixture
async def web(aiohttp_client, tmp_path, issuer, pki):
    """A site holding SECRET_DS (restricted) and OPEN_DS, its web seed up → (web base URL, root)."""
    root = tmp_path / "root"
    for name in (SECRET_DS, OPEN_DS):
        generate(root, name=name, files=2, total_size=300_000, seed=len(name))
    config = ServerConfig(site="site1", secret="test-secret", listen="127.0.0.1:0", peer_listen="127.0.0.2:0",
                          web_listen="127.0.0.2:0", state=str(tmp_path / "state"), roots=(str(root),), tracker="",
                          repo="")
    policy = access_for(issuer, pki, "atlas", keys_lifetime=1)
    client = await aiohttp_client(create_app(config, deps=Deps(access=policy)))

    async def ready():
        doc = await (await client.get("/api/status")).json()
        return doc if len(doc["datasets"]) == 2 else None
    doc = await until(ready, what="datasets prepared")
    return doc["web_seeds"][0], root


def first_file(root, name):
    path = sorted((root / name).iterdir())[0]
    return path.name, path.read_bytes()


async def test_no_token_401_another_scope_403_the_right_one_the_bytes(web, issuer):
    base, root = web
    lfn, data = first_file(root, SECRET_DS)
    url = base + urls.web_seed_path(SECRET_DS, lfn)
    async with aiohttp.ClientSession() as http:
        async with http.get(url) as r:
            assert r.status == 401 and r.headers["WWW-Authenticate"] == ('Bearer realm="btswarm", '
                                                                        'scope="storage.read:/atlas"')
            assert "restricted to members" in await r.text()
        async with http.get(base + urls.web_seed_path("atlas:not.here", lfn)) as r:
            assert r.status == 401  # nothing said of what this site holds
        async with http.get(url, headers={"Authorization": f"Bearer {issuer.mint('storage.read:/cms')}"}) as r:
            assert r.status == 403 and 'error="insufficient_scope"' in r.headers["WWW-Authenticate"]
            assert await r.read() != data
        token = issuer.mint("storage.read:/atlas")
        async with http.get(url, headers={"Authorization": f"Bearer {token}", "Range": "bytes=100-999"}) as r:
            assert (r.status, await r.read()) == (206, data[100:1000])
        async with http.get(url, headers={"Authorization": f"Bearer {token}"}) as r:
            assert (r.status, await r.read()) == (200, data)
        lfn, data = first_file(root, OPEN_DS)
        async with http.get(base + urls.web_seed_path(OPEN_DS, lfn)) as r:  # public: as before
            assert (r.status, await r.read()) == (200, data)


async def test_a_token_whose_key_was_withdrawn_stops_new_fetches(web, issuer):
    base, root = web
    lfn, data = first_file(root, SECRET_DS)
    url = base + urls.web_seed_path(SECRET_DS, lfn)
    stolen = {"Authorization": f"Bearer {issuer.mint('storage.read:/atlas', lifetime=3600)}"}
    async with aiohttp.ClientSession() as http:
        async with http.get(url, headers=stolen) as r:
            assert (r.status, await r.read()) == (200, data)
        issuer.rotate()  # the operators withdraw the leaked key

        async def refused():
            async with http.get(url, headers=stolen) as r:
                return r if r.status == 401 else None
        r = await until(refused, timeout=15, what="the withdrawn key to stop verifying (keys_lifetime 1 s)",
                        interval=0.2)
        assert "does not publish" in r.headers["WWW-Authenticate"]
        fresh = {"Authorization": f"Bearer {issuer.mint('storage.read:/atlas')}"}
        async with http.get(url, headers=fresh) as r:
            assert (r.status, await r.read()) == (200, data)


async def test_bt_get_sends_the_current_token_to_the_web_seeds(aiohttp_server, aiohttp_client, tmp_path, issuer,
                                                              pki, monkeypatch):
    """A member's fetch from a site's web seed alone, whose token file is renewed mid-fetch as the issuer
    withdraws the old key: the relay reads the file for each request, so the fetch ends whole."""
    from btrepo.app import create_app as create_repo
    from btrepo.config import RepoConfig
    from tests.btget.getsupport import bt_get_async, same_bytes
    from tests.repo.repo_support import SECRETS
    from tests.support import free_port

    policy = access_for(issuer, pki, "atlas", keys_lifetime=1)
    repo = await aiohttp_server(create_repo(RepoConfig(state=str(tmp_path / "repo"), site_secrets=SECRETS,
                                                       tracker=f"http://127.0.0.1:{free_port()}"), access=policy),
                                host="127.0.0.1")
    repo_url = str(repo.make_url("")).rstrip("/")
    root = tmp_path / "root"
    # 16 files: libtorrent asks a web seed file by file, so requests go on after the renewal (with the token
    # read once at the start instead, this fetch stops with files that cannot be fetched).
    generate(root, name=SECRET_DS, files=16, total_size=6_000_000, seed=7)
    config = ServerConfig(site="site1", secret=SECRETS["site1"], listen="127.0.0.1:0", peer_listen="127.0.0.2:0",
                          web_listen="127.0.0.2:0", state=str(tmp_path / "state"), roots=(str(root),), tracker="",
                          repo=repo_url, web_rate_limit=1_000_000)  # a few seconds: time to renew mid-way
    site = await aiohttp_client(create_app(config, deps=Deps(access=policy)))

    async def published():
        doc = await (await site.get("/api/status")).json()
        return doc if doc["datasets"] and (doc["datasets"][0]["repository"] or {}).get("published") else None
    await until(published, timeout=30, what="the site to publish")

    token_file = tmp_path / "token"
    token_file.write_text(issuer.mint("storage.read:/atlas", lifetime=3600))
    out = tmp_path / "out"
    for var in ("BEARER_TOKEN", "BEARER_TOKEN_FILE"):
        monkeypatch.delenv(var, raising=False)
    fetch = asyncio.ensure_future(bt_get_async(SECRET_DS, "--repo", repo_url, "-o", str(out), "--token-file",
                                               str(token_file), "--web-seeds-always", "--timeout", "90",
                                               "--stall-timeout", "30", "--json", timeout=120))

    async def sending():
        doc = await (await site.get("/api/status")).json()
        return (doc["web"] or {}).get("sent_total", 0) > 0 or fetch.done()
    await until(sending, timeout=60, what="the web seed to send")
    assert not fetch.done(), fetch.result()
    issuer.rotate()  # the old token's key is withdrawn...
    token_file.write_text(issuer.mint("storage.read:/atlas", lifetime=3600))  # ...and the agent renews the file
    code, stdout, err = await fetch
    assert code == 0, err
    doc = json.loads(stdout)
    for path in sorted((root / SECRET_DS).iterdir()):
        assert same_bytes(path, Path(doc["directory"]) / path.name), path.name
