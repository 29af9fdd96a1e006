"""bt-server's web seed with members-only datasets: no token 401, another scope 403, the right one the bytes;
a token whose key the issuer withdrew stops working. A real bt-server app, a real issuer over https."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from btrepo.app import create_app as create_repo
from btrepo.config import RepoConfig
from btserver.app import DAEMON, Deps, create_app
from btserver.config import ServerConfig
from btserver.webseed import create_web_app
from tests.access.issuer_support import access_for
from tests.btget.getsupport import bt_get_async, same_bytes
from tests.repo.repo_support import SECRETS
from tests.support import free_port, until
from torrents.servicekit import tls
from torrents import urls
from torrents.sample import generate

pytestmark = pytest.mark.slow

SECRET_DS, OPEN_DS = "atlas:data18.AOD.r1", "ds.one"


@pytest.fixture
async def site_web(aiohttp_client, tmp_path, issuer, pki):
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


async def test_no_token_401_another_scope_403_the_right_one_the_bytes(site_web, issuer):
    base, root = site_web
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


async def test_a_token_whose_key_was_withdrawn_stops_new_fetches(site_web, issuer):
    base, root = site_web
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


@pytest.fixture
def member_site(aiohttp_server, aiohttp_client, tmp_path, issuer, pki, monkeypatch):
    """member_site(files, total_size, **server) → (repository URL, the site's control client, the dataset's
    directory): a repository restricting scope atlas (keys kept 1 s) and a site holding SECRET_DS that has
    published it with its web seed; no token in this process's environment."""
    for var in ("BEARER_TOKEN", "BEARER_TOKEN_FILE"):
        monkeypatch.delenv(var, raising=False)
    policy = access_for(issuer, pki, "atlas", keys_lifetime=1)

    async def make(files: int, total_size: int, **server):
        repo = await aiohttp_server(create_repo(RepoConfig(state=str(tmp_path / "repo"), site_secrets=SECRETS,
                                                           tracker=f"http://127.0.0.1:{free_port()}"),
                                                access=policy), host="127.0.0.1")
        repo_url = str(repo.make_url("")).rstrip("/")
        root = tmp_path / "root"
        generate(root, name=SECRET_DS, files=files, total_size=total_size, seed=7)
        config = ServerConfig(site="site1", secret=SECRETS["site1"], listen="127.0.0.1:0", peer_listen="127.0.0.2:0",
                              web_listen="127.0.0.2:0", state=str(tmp_path / "state"), roots=(str(root),),
                              tracker="", repo=repo_url, **server)
        site = await aiohttp_client(create_app(config, deps=Deps(access=policy)))

        async def published():
            doc = await (await site.get("/api/status")).json()
            return doc if doc["datasets"] and (doc["datasets"][0]["repository"] or {}).get("published") else None
        await until(published, timeout=30, what="the site to publish")
        return repo_url, site, root / SECRET_DS
    return make


async def test_bt_get_sends_the_current_token_to_the_web_seeds(member_site, tmp_path, issuer):
    """A member's fetch from a site's web seed alone, whose token file is renewed mid-fetch as the issuer
    withdraws the old key: the relay reads the file for each request, so the fetch ends whole."""
    # 16 files: libtorrent asks a web seed file by file, so requests go on after the renewal (with the token
    # read once at the start instead, this fetch stops with files that cannot be fetched).
    repo_url, site, data = await member_site(16, 6_000_000, web_rate_limit=1_000_000)  # a few seconds
    token_file = tmp_path / "token"
    token_file.write_text(issuer.mint("storage.read:/atlas", lifetime=3600))
    fetch = asyncio.ensure_future(bt_get_async(SECRET_DS, "--repo", repo_url, "-o", str(tmp_path / "out"),
                                               "--token-file", str(token_file), "--web-seeds-always", "--timeout",
                                               "90", "--stall-timeout", "30", "--json", timeout=120))

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
    for path in sorted(data.iterdir()):
        assert same_bytes(path, Path(doc["directory"]) / path.name), path.name


async def test_an_https_web_seed_gets_the_token_over_tls(member_site, tmp_path, issuer, pki):
    """The site's web seed behind TLS (its `web_url`, as a front would serve it): bt-get's relay reaches it over
    TLS, verified with --ca-file, and puts the token on every request; the torrent lists only that web seed."""
    port = free_port("127.0.0.1")
    repo_url, site, data = await member_site(4, 1_000_000, web_url=f"https://127.0.0.1:{port}")
    front = web.AppRunner(create_web_app(site.server.app[DAEMON].web), access_log=None)
    await front.setup()
    await web.TCPSite(front, "127.0.0.1", port, ssl_context=tls.server_context(str(pki.cert), str(pki.key),
                                                                              "server")).start()
    try:
        code, stdout, err = await bt_get_async(SECRET_DS, "--repo", repo_url, "-o", str(tmp_path / "out"),
                                               "--ca-file", str(pki.ca), "--web-seeds-always", "--timeout", "60",
                                               "--json", env={"BEARER_TOKEN": issuer.mint("storage.read:/atlas")},
                                               timeout=90)
    finally:
        await front.cleanup()
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["sources"] == {"web seed site1": sum(p.stat().st_size for p in data.iterdir())}
    async with aiohttp.ClientSession() as http:  # ... and that web seed is the https one alone
        record = await (await http.get(f"{repo_url}/api/datasets/{SECRET_DS}", headers={
            "Authorization": f"Bearer {issuer.mint('storage.read:/atlas')}"})).json()
    assert record["web_seeds"] == [{"site": "site1", "url": f"https://127.0.0.1:{port}/data/"}]
    for path in sorted(data.iterdir()):
        assert same_bytes(path, Path(doc["directory"]) / path.name), path.name
