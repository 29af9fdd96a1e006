"""T2 and T3 holders apart, and live seeds in listings: the real repository app, real SQLite.

A T3 sharing what it fetched (bt-get --share, through its bt-server) is one by the repository's
configuration (`[repo] site_kinds`); the repository lists it beside, not among, the storage sites: in the API
(`t2_sites`, `t3_sites`, `/api/sites` kind), on the dataset page and the sites page.
`GET /api/datasets?swarm=1` adds each row's swarm from the tracker (bt-get --search).
"""

from __future__ import annotations

import sqlite3

import pytest

from btrepo import schema
from btrepo.app import create_app
from btrepo.config import RepoConfig
from tests.repo.repo_support import (SAMPLE, SECRETS, catalog_before, make_torrent, publish, publish_body,
                                    tracker_app)
from tests.support import free_port

FILES = {"DPD_IDCOMM.051203._00001.pool.root.1": 40_000, "DPD_IDCOMM.051203._00002.pool.root.1": 25_000}
SECRETS_T3 = {**SECRETS, "alice_T3": "secret-alice"}


async def _repo(aiohttp_client, tmp_path, tracker: str):
    config = RepoConfig(state=str(tmp_path / "state"), tracker=tracker, site_secrets=SECRETS_T3,
                        site_kinds={"alice_T3": "T3"})
    return await aiohttp_client(create_app(config))


@pytest.fixture
async def repo(aiohttp_client, tmp_path):
    return await _repo(aiohttp_client, tmp_path, f"http://127.0.0.1:{free_port()}")  # no tracker: unknown


async def put(client, body, site="site1"):
    return await publish(client.session, str(client.make_url("/")), SAMPLE, body, site=site,
                         secret=SECRETS_T3[site])


async def test_a_t3_is_listed_apart_from_the_t2s(repo, tmp_path):
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, FILES)
    assert (await put(repo, publish_body(torrent, meta, files)))[0] == 201
    status, answer = await put(repo, {**publish_body(torrent, meta, files, site="site2"), "kind": "T2"}, "site2")
    assert (status, answer["result"]) == (200, "site_added")
    status, answer = await put(repo, {**publish_body(torrent, meta, files, site="alice_T3"), "kind": "T3"},
                               "alice_T3")
    assert (status, answer["result"], answer["state"]) == (200, "site_added", "current")

    doc = await (await repo.get(f"/api/datasets/{SAMPLE}")).json()
    assert doc["sites"] == ["alice_T3", "site1", "site2"]
    assert (doc["t2_sites"], doc["t3_sites"]) == (["site1", "site2"], ["alice_T3"])
    listed = (await (await repo.get("/api/datasets?q=cosmic")).json())["datasets"]
    assert [(d["t2_sites"], d["t3_sites"]) for d in listed] == [(["site1", "site2"], ["alice_T3"])]
    sites = (await (await repo.get("/api/sites")).json())["sites"]
    assert [(s["name"], s["kind"], s["datasets"]) for s in sites] == [("alice_T3", "T3", 1), ("site1", "T2", 1),
                                                                       ("site2", "T2", 1)]

    page = await (await repo.get(f"/datasets/{SAMPLE}")).text()
    t2 = page.split('<ul class="sites t2">', 1)[1].split("</ul>", 1)[0]
    t3 = page.split('<ul class="sites t3">', 1)[1].split("</ul>", 1)[0]
    assert "site1" in t2 and "site2" in t2 and "alice_T3" not in t2
    assert "alice_T3" in t3 and '<span class="kind">T3</span>' in t3 and "site1" not in t3
    assert "Tier-3 sites sharing what they fetched (T3)" in page
    sites_page = await (await repo.get("/sites")).text()
    assert '<td class="kind">T3</td>' in sites_page and '<td class="kind">T2</td>' in sites_page


async def test_a_site_kind_is_checked(repo, tmp_path):
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, FILES)
    status, answer = await put(repo, {**publish_body(torrent, meta, files), "kind": "T1"})
    assert status == 400
    assert answer["error"] == f"publish {SAMPLE}: kind must be one of T2, T3, got 'T1'"
    assert (await (await repo.get("/api/datasets")).json())["total"] == 0


async def test_listing_with_swarm_asks_the_tracker_per_row(aiohttp_client, aiohttp_server, tmp_path):
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, FILES)
    other = "mc16_13TeV.361107.PowhegPythia8EvtGen_AZNLOCTEQ6L1_Zmumu.deriv.DAOD_PHYS.e3601_p4174"
    torrent2, meta2, files2 = make_torrent(tmp_path, other, {"DAOD_PHYS.1._000001.pool.root.1": 30_000})
    tracker = await aiohttp_server(tracker_app({meta.info_hash: {"seeds": 3, "leechers": 1, "completed": 7,
                                                                  "sites": ["site1"]}}), host="127.0.0.1")
    repo = await _repo(aiohttp_client, tmp_path, str(tracker.make_url("")).rstrip("/"))
    assert (await put(repo, publish_body(torrent, meta, files)))[0] == 201
    assert (await publish(repo.session, str(repo.make_url("/")), other, publish_body(torrent2, meta2, files2),
                          site="site1", secret=SECRETS["site1"]))[0] == 201

    rows = (await (await repo.get("/api/datasets?sort=name&swarm=1")).json())["datasets"]
    assert [(r["name"], r["swarm"]) for r in rows] == [
        (SAMPLE, {"seeds": 3, "leechers": 1, "completed": 7, "sites": ["site1"]}),
        (other, {"seeds": 0, "leechers": 0, "completed": 0, "sites": []}),  # the tracker knows no swarm: none
    ]
    plain = (await (await repo.get("/api/datasets?sort=name")).json())["datasets"]
    assert all("swarm" not in r for r in plain)  # asked for only


async def test_listing_with_swarm_says_null_when_the_tracker_is_down(repo, tmp_path):
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, FILES)
    assert (await put(repo, publish_body(torrent, meta, files)))[0] == 201
    rows = (await (await repo.get("/api/datasets?swarm=1")).json())["datasets"]
    assert [r["swarm"] for r in rows] == [None]


def test_the_kind_column_migrates_an_older_catalog(tmp_path):
    """A catalog made before site kinds (schema 3): its sites become T2s, nothing else changes."""
    path = tmp_path / "catalog.sqlite"
    conn = catalog_before(path, "sites ADD COLUMN kind")
    conn.execute("INSERT INTO sites (name, first_seen) VALUES ('site1', '2024-01-01T00:00:00.000000Z')")
    assert schema.migrate(conn) == len(schema.MIGRATIONS)
    assert conn.execute("SELECT name, kind FROM sites").fetchall() == [("site1", "T2")]
    conn.close()
    with pytest.raises(sqlite3.OperationalError):  # no second column of the name
        sqlite3.connect(str(path)).execute("ALTER TABLE sites ADD COLUMN kind TEXT")
