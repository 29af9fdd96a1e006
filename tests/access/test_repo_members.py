"""The repository with members-only datasets: real tokens from a real issuer over https, the real app."""

from __future__ import annotations

import html

import pytest

from btrepo.app import create_app
from btrepo.config import RepoConfig
from tests.access.issuer_support import access_for
from tests.repo.repo_support import SECRETS, make_torrent, publish, publish_body
from tests.support import free_port
from torrents import access, metainfo

pytestmark = pytest.mark.slow

FILES = {"AOD.0001.pool.root.1": 30_000, "AOD.0002.pool.root.1": 20_000}
SECRET_DS = "atlas:data18_13TeV.AOD.r1"
OPEN_DS = "cms:Run2012B.DoubleMu.AOD"


async def repo_with(aiohttp_client, state, policy):
    config = RepoConfig(state=str(state), tracker=f"http://127.0.0.1:{free_port()}", site_secrets=SECRETS)
    return await aiohttp_client(create_app(config, access=policy))


async def put_both(client, tmp_path) -> dict[str, metainfo.Metainfo]:
    metas = {}
    for name in (SECRET_DS, OPEN_DS):
        scope, _, short = name.partition(":")
        torrent, meta, files = make_torrent(tmp_path / "data", name, FILES)
        status, answer = await publish(client.session, str(client.make_url("/")), name,
                                       publish_body(torrent, meta, files, did={"scope": scope, "name": short}))
        assert status == 201, answer
        metas[name] = meta
    return metas


@pytest.fixture
async def repo(aiohttp_client, tmp_path, issuer, pki):
    client = await repo_with(aiohttp_client, tmp_path / "state", access_for(issuer, pki, "atlas"))
    client.metas = await put_both(client, tmp_path)
    return client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_without_a_token_restricted_is_401_and_public_is_as_before(repo):
    for path in (f"/api/datasets/{SECRET_DS}", f"/datasets/{SECRET_DS}.torrent", f"/datasets/{SECRET_DS}",
                 "/api/datasets/atlas:no.such.dataset"):  # a non-member cannot learn what exists
        resp = await repo.get(path)
        assert resp.status == 401, path
        assert resp.headers["WWW-Authenticate"] == 'Bearer realm="btswarm", scope="storage.read:/atlas"'
    doc = await (await repo.get(f"/api/datasets/{SECRET_DS}")).json()
    assert doc == {"error": f"{SECRET_DS}: restricted to members: a bearer token with storage.read:/atlas "
                            "is needed"}
    resp = await repo.get(f"/datasets/{OPEN_DS}.torrent")
    assert resp.status == 200 and metainfo.parse(await resp.read()).info_hash == repo.metas[OPEN_DS].info_hash
    assert (await repo.get(f"/api/datasets/{OPEN_DS}")).status == 200
    # a token sent for a public dataset is not looked at, even a bad one
    assert (await repo.get(f"/api/datasets/{OPEN_DS}", headers=bearer("not-a-token"))).status == 200


async def test_the_right_token_reads_another_scope_is_403(repo, issuer):
    resp = await repo.get(f"/datasets/{SECRET_DS}.torrent", headers=bearer(issuer.mint("storage.read:/atlas")))
    assert resp.status == 200
    assert metainfo.parse(await resp.read()).info_hash == repo.metas[SECRET_DS].info_hash
    one = issuer.mint(f"storage.read:/atlas/{SECRET_DS.split(':')[1]}")
    assert (await repo.get(f"/api/datasets/{SECRET_DS}", headers=bearer(one))).status == 200
    resp = await repo.get(f"/api/datasets/{SECRET_DS}", headers=bearer(issuer.mint("storage.read:/cms")))
    assert resp.status == 403
    assert resp.headers["WWW-Authenticate"].startswith('Bearer realm="btswarm", error="insufficient_scope"')
    assert resp.headers["WWW-Authenticate"].endswith('scope="storage.read:/atlas"')
    assert (await resp.json())["error"] == (f"{SECRET_DS}: the token may not read it: it needs storage.read:/atlas "
                                            "(the token has storage.read:/cms)")


async def test_bad_tokens_are_refused_each_saying_why(repo, issuer, stranger):
    cases = [(issuer.mint("storage.read:/atlas", lifetime=-3600), "token: expired at "),
             (issuer.mint("storage.read:/atlas", aud="https://other"), "token: audience 'https://other' is not"),
             (stranger.mint("storage.read:/atlas"), f"token: issuer {stranger.url} is not trusted here")]
    for token, start in cases:
        resp = await repo.get(f"/datasets/{SECRET_DS}.torrent", headers=bearer(token))
        assert resp.status == 401 and 'error="invalid_token"' in resp.headers["WWW-Authenticate"]
        assert start in html.unescape(await resp.text())  # the error page says it too
        resp = await repo.get(f"/api/datasets/{SECRET_DS}", headers=bearer(token))
        assert resp.status == 401 and (await resp.json())["error"].startswith(start)
    metrics = await (await repo.get("/metrics")).text()
    assert 'btswarm_repo_token_refusals_total{code="401"} 6.0' in metrics  # each case, page and record


async def test_listings_show_restricted_datasets_only_to_a_token_that_reads_them(repo, issuer):
    async def names(headers=None, **query):
        resp = await repo.get("/api/datasets", params=query, headers=headers or {})
        assert resp.status == 200, await resp.text()
        doc = await resp.json()
        assert doc["total"] == len(doc["datasets"])
        return [d["name"] for d in doc["datasets"]]

    assert await names() == [OPEN_DS]
    assert await names(q="data18_13TeV") == []
    assert await names(scope="atlas") == []
    assert await names(bearer(issuer.mint("storage.read:/cms"))) == [OPEN_DS]
    assert sorted(await names(bearer(issuer.mint("storage.read:/atlas")))) == sorted([SECRET_DS, OPEN_DS])
    assert await names(bearer(issuer.mint("storage.read:/atlas")), q="data18_13TeV") == [SECRET_DS]
    assert sorted(await names(bearer(issuer.mint("storage.read:/")))) == sorted([SECRET_DS, OPEN_DS])
    resp = await repo.get("/api/datasets", headers=bearer(issuer.mint("storage.read:/atlas", lifetime=-3600)))
    assert resp.status == 401 and (await resp.json())["error"].startswith("token: expired at")
    for page in ("/", "/search?q=AOD"):
        text = await (await repo.get(page)).text()
        assert OPEN_DS in text and SECRET_DS not in text


async def test_restricting_a_scope_changes_no_info_hash(aiohttp_client, tmp_path, issuer, pki):
    public = await repo_with(aiohttp_client, tmp_path / "state", access.NONE)
    metas = await put_both(public, tmp_path)
    before = await (await public.get("/api/info-hashes")).json()
    torrents = {n: await (await public.get(f"/datasets/{n}.torrent")).read() for n in metas}
    await public.close()

    members = await repo_with(aiohttp_client, tmp_path / "state", access_for(issuer, pki, "atlas"))
    assert await (await members.get("/api/info-hashes")).json() == before
    token = bearer(issuer.mint("storage.read:/atlas"))
    for name, meta in metas.items():
        data = await (await members.get(f"/datasets/{name}.torrent", headers=token)).read()
        assert data == torrents[name] and metainfo.parse(data).info_hash == meta.info_hash
