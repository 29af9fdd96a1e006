"""bt-server's web seed with members-only datasets: no token 401, another scope 403, the right one the bytes;
a token whose key the issuer withdrew stops working. A real bt-server app, a real issuer over https."""

from __future__ import annotations

import aiohttp
import pytest

from btserver.app import Deps, create_app
from btserver.config import ServerConfig
from tests.access.issuer_support import access_for, issuer, pki  # noqa: F401
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
