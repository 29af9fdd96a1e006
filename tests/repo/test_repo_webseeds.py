"""The repository lists the web seeds of the sites that hold a dataset now, in the .torrent it serves.

A real bt-repo app and a real HTTP tracker stand-in (GET /api/swarms/{hex}
as docs/contracts.md fixes it), whose `holders` the tests change as a real
tracker's would change with the sites' heartbeats.
"""

from __future__ import annotations

import pytest

from btrepo.app import create_app
from btrepo.catalog import live_web_seeds
from btrepo.config import RepoConfig
from tests.repo.repo_support import SAMPLE, SECRETS, make_torrent, publish, publish_body, tracker_app
from tests.support import free_port
from torrents import metainfo

FILES = {"a.root": 40_000, "b.root": 25_000}
SEED1, SEED2 = "http://127.0.0.2:8701/data/", "http://127.0.0.3:8701/data/"
DOOR2 = "https://door.site2.example:2880/pnfs/site2/atlas/"


@pytest.fixture
async def federation(aiohttp_client, aiohttp_server, tmp_path):
    """(repository client, the tracker stand-in's swarms, the published Metainfo): site1 and site2 publish
    the same version, each with its web seeds."""
    swarms: dict[str, dict] = {}
    tracker = await aiohttp_server(tracker_app(swarms))
    repo = await aiohttp_client(create_app(RepoConfig(state=str(tmp_path / "state"), tracker=str(tracker.make_url("")),
                                                      site_secrets=SECRETS)))
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, FILES)
    for site, seeds in (("site1", [SEED1]), ("site2", [SEED2, DOOR2])):
        status, answer = await publish(repo.session, str(repo.make_url("/")), SAMPLE,
                                       publish_body(torrent, meta, files, site=site, web_seeds=seeds), site=site)
        assert status in (200, 201), answer
    return repo, swarms, meta


def holding(swarms: dict, meta, *sites: str) -> None:
    swarms[meta.info_hash] = {"seeds": 0, "leechers": 0, "completed": 0, "sites": [], "holders": list(sites)}


async def served(repo) -> tuple[metainfo.Metainfo, dict]:
    resp = await repo.get(f"/datasets/{SAMPLE}.torrent")
    assert resp.status == 200
    meta = metainfo.parse(await resp.read())
    doc = await (await repo.get(f"/api/datasets/{SAMPLE}")).json()
    return meta, doc


async def test_the_torrent_lists_the_web_seeds_of_every_site_holding_it_and_keeps_its_info_hash(federation):
    repo, swarms, published = federation
    holding(swarms, published, "site1", "site2")
    meta, doc = await served(repo)
    assert meta.info_hash == published.info_hash and meta.info_bytes == published.info_bytes
    assert meta.url_list == (SEED1, SEED2, DOOR2)
    assert meta.announce == published.announce
    assert doc["web_seeds"] == [{"site": "site1", "url": SEED1}, {"site": "site2", "url": SEED2},
                                {"site": "site2", "url": DOOR2}]


async def test_web_seeds_0_serves_the_torrent_without_them_and_a_bad_value_is_a_400(federation):
    repo, swarms, published = federation
    holding(swarms, published, "site1", "site2")
    resp = await repo.get(f"/datasets/{SAMPLE}.torrent", params={"web_seeds": "0"})
    assert resp.status == 200
    meta = metainfo.parse(await resp.read())
    assert meta.url_list == () and meta.info_hash == published.info_hash
    resp = await repo.get(f"/datasets/{SAMPLE}.torrent", params={"web_seeds": "no"}, headers={"Accept": "application/json"})
    assert resp.status == 400
    assert "web_seeds=no: must be 1" in await resp.text()


async def test_a_site_that_stops_holding_it_stops_being_listed(federation):
    repo, swarms, published = federation
    holding(swarms, published, "site2")  # site1 removed the dataset, found it damaged, or went down
    meta, doc = await served(repo)
    assert meta.url_list == (SEED2, DOOR2)
    assert [s["site"] for s in doc["web_seeds"]] == ["site2", "site2"]
    del swarms[published.info_hash]  # the tracker knows no swarm: no site holds it at all
    meta, doc = await served(repo)
    assert meta.url_list == () and doc["web_seeds"] == []
    assert meta.info_hash == published.info_hash


async def test_a_site_that_republishes_without_web_seeds_is_no_longer_listed(federation, tmp_path):
    repo, swarms, published = federation
    holding(swarms, published, "site1", "site2")
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, FILES)
    status, _ = await publish(repo.session, str(repo.make_url("/")), SAMPLE, publish_body(torrent, meta, files))
    assert status == 200
    meta, _ = await served(repo)
    assert meta.url_list == (SEED2, DOOR2)


async def test_with_the_tracker_down_every_published_web_seed_is_listed(aiohttp_client, tmp_path):
    repo = await aiohttp_client(create_app(RepoConfig(state=str(tmp_path / "state"),
                                                      tracker=f"http://127.0.0.1:{free_port()}", site_secrets=SECRETS)))
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, FILES)
    status, _ = await publish(repo.session, str(repo.make_url("/")), SAMPLE,
                              publish_body(torrent, meta, files, web_seeds=[SEED1]))
    assert status == 201
    got, doc = await served(repo)
    assert got.url_list == (SEED1,) and doc["web_seeds"] == [{"site": "site1", "url": SEED1}]


@pytest.mark.parametrize("seeds, shown", [
    ("http://x/", "must be a list"),
    (["ftp://127.0.0.2/data/"], "'ftp://127.0.0.2/data/' is not an http(s) URL ending in '/'"),
    (["http://127.0.0.2/data"], "'http://127.0.0.2/data' is not an http(s) URL"),
    (["http://127.0.0.2/a b/"], "is not an http(s) URL"),
    ([f"http://127.0.0.{i}/" for i in range(17)], "at most 16 URLs"),
])
async def test_bad_web_seeds_in_a_publication_are_refused_naming_them(aiohttp_client, tmp_path, seeds, shown):
    repo = await aiohttp_client(create_app(RepoConfig(state=str(tmp_path / "state"), tracker="",
                                                      site_secrets=SECRETS)))
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, FILES)
    status, answer = await publish(repo.session, str(repo.make_url("/")), SAMPLE,
                                   publish_body(torrent, meta, files, web_seeds=seeds))
    assert status == 400 and answer["error"].startswith(f"publish {SAMPLE}: record web_seeds")
    assert shown in answer["error"]


def test_live_web_seeds_are_those_of_the_holders_or_all_when_the_tracker_does_not_say():
    published = [("site1", SEED1), ("site2", SEED2), ("site2", DOOR2)]
    assert live_web_seeds(published, ("site2", "site3")) == [("site2", SEED2), ("site2", DOOR2)]
    assert live_web_seeds(published, ()) == []
    assert live_web_seeds(published, None) == published
