"""bt-repo JSON API against the real app on a real port: publish rules, reads, search, paging."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tests.support import free_port
from btrepo import keys
from tests.repo.repo_support import (SAMPLE, SECRETS, hostile_torrent, make_replica, make_torrent, publish,
                                   publish_body)
from torrents import metainfo
from btrepo.config import RepoConfig
from btrepo.app import create_app

FILES = {"DPD_IDCOMM.051203._00001.pool.root.1": 40_000, "DPD_IDCOMM.051203._00002.pool.root.1": 25_000}


@pytest.fixture
async def repo(aiohttp_client, tmp_path):
    # The tracker URL points at a port nobody listens on: swarm state is "unknown".
    config = RepoConfig(state=str(tmp_path / "state"), tracker=f"http://127.0.0.1:{free_port()}",
                        site_secrets=SECRETS)
    return await aiohttp_client(create_app(config))


def base(client) -> str:
    return str(client.make_url("/"))


async def put(client, name, body, **kw):
    return await publish(client.session, base(client), name, body, **kw)


async def test_publish_then_read_back(repo, tmp_path):
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, FILES)
    status, answer = await put(repo, SAMPLE, publish_body(torrent, meta, files, description="cosmics, 2008"))
    assert status == 201, answer
    assert answer == {"result": "created", "name": SAMPLE, "info_hash": meta.info_hash, "versions": 1,
                      "served": meta.info_hash, "state": "current", "why": "first version",
                      "differing": [], "missing": [], "extra": []}

    resp = await repo.get(f"/api/datasets/{SAMPLE}")
    assert resp.status == 200
    doc = await resp.json()
    assert doc["name"] == SAMPLE and doc["info_hash"] == meta.info_hash
    assert doc["total_size"] == 65_000 and doc["file_count"] == 2 and doc["sites"] == ["site1"]
    assert doc["description"] == "cosmics, 2008"
    assert doc["files"] == files
    assert doc["versions"][0]["info_hash"] == meta.info_hash and len(doc["versions"]) == 1
    assert doc["torrent_url"] == f"/datasets/{SAMPLE}.torrent"
    assert doc["magnet"] == meta.magnet()
    assert doc["swarm"] is None  # tracker down: unknown, not an error
    assert doc["first_published"].endswith("Z") and len(doc["first_published"]) == 20
    assert (doc["replicas"], doc["servable"], doc["decided_by"], doc["problem"]) == ("agree", True, "only", None)
    assert doc["replica_sites"] == [{"site": "site1", "info_hash": meta.info_hash, "state": "current",
                                     "differing": [], "missing": [], "extra": []}]

    resp = await repo.get(doc["torrent_url"])
    assert resp.status == 200
    assert resp.content_type == "application/x-bittorrent"
    assert f'filename="{SAMPLE}.torrent"' in resp.headers["Content-Disposition"]
    body = await resp.read()
    assert body == torrent and metainfo.parse(body).info_hash == meta.info_hash

    assert (await (await repo.get("/api/info-hashes")).json()) == {"info_hashes": [meta.info_hash]}
    sites = (await (await repo.get("/api/sites")).json())["sites"]
    assert [(s["name"], s["datasets"]) for s in sites] == [("site1", 1)]
    assert (await (await repo.get("/healthz")).json()) == {"ok": True}


async def test_same_torrent_from_another_site_adds_the_site(repo, tmp_path):
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, FILES)
    assert (await put(repo, SAMPLE, publish_body(torrent, meta, files)))[0] == 201
    status, answer = await put(repo, SAMPLE, publish_body(torrent, meta, files, site="site2"), site="site2")
    assert (status, answer["result"]) == (200, "site_added")
    status, answer = await put(repo, SAMPLE, publish_body(torrent, meta, files))
    assert (status, answer["result"]) == (200, "unchanged")
    doc = await (await repo.get(f"/api/datasets/{SAMPLE}")).json()
    assert doc["sites"] == ["site1", "site2"] and len(doc["versions"]) == 1


async def test_republish_after_the_tracker_moved_serves_the_new_announce_url(repo, tmp_path):
    before, meta, files = make_torrent(tmp_path / "a", SAMPLE, FILES, announce="http://127.0.0.1:6969/announce")
    after, after_meta, _ = make_torrent(tmp_path / "b", SAMPLE, FILES, announce="http://127.0.0.1:7070/announce")
    assert after_meta.info_hash == meta.info_hash  # the announce URL is outside the info dict
    assert (await put(repo, SAMPLE, publish_body(before, meta, files)))[0] == 201
    status, answer = await put(repo, SAMPLE, publish_body(after, after_meta, files))
    assert (status, answer["result"]) == (200, "unchanged")
    served = metainfo.parse(await (await repo.get(f"/datasets/{SAMPLE}.torrent")).read())
    assert served.announce == "http://127.0.0.1:7070/announce"
    doc = await (await repo.get(f"/api/datasets/{SAMPLE}")).json()
    assert "7070" in doc["magnet"] and len(doc["versions"]) == 1


async def test_the_version_shown_is_the_newest_one_a_site_still_holds(repo, tmp_path):
    v1, v1_meta, v1_files = make_torrent(tmp_path / "a", SAMPLE, FILES)
    v2, v2_meta, v2_files = make_torrent(tmp_path / "b", SAMPLE, {**FILES, "DPD_IDCOMM.051203._00003.pool.root.1": 5})
    assert (await put(repo, SAMPLE, publish_body(v1, v1_meta, v1_files)))[0] == 201
    assert (await put(repo, SAMPLE, publish_body(v2, v2_meta, v2_files)))[0] == 201
    # The site's dataset went back to what it was (a bad replacement undone): it holds v1 again.
    status, answer = await put(repo, SAMPLE, publish_body(v1, v1_meta, v1_files))
    assert (status, answer["result"]) == (200, "site_added")
    doc = await (await repo.get(f"/api/datasets/{SAMPLE}")).json()
    assert doc["info_hash"] == v1_meta.info_hash and doc["sites"] == ["site1"]
    assert {v["info_hash"]: v["sites"] for v in doc["versions"]} == {v1_meta.info_hash: ["site1"],
                                                                     v2_meta.info_hash: []}
    assert await (await repo.get(f"/datasets/{SAMPLE}.torrent")).read() == v1
    # Another site publishes the newer version: newest held wins again.
    assert (await put(repo, SAMPLE, publish_body(v2, v2_meta, v2_files, site="site2"), site="site2"))[0] == 200
    doc = await (await repo.get(f"/api/datasets/{SAMPLE}")).json()
    assert doc["info_hash"] == v2_meta.info_hash and doc["sites"] == ["site2"]


async def test_changed_dataset_becomes_a_new_version(repo, tmp_path):
    old, old_meta, old_files = make_torrent(tmp_path / "a", SAMPLE, FILES)
    new, new_meta, new_files = make_torrent(tmp_path / "b", SAMPLE, {**FILES, "DPD_IDCOMM.051203._00003.pool.root.1": 5})
    assert (await put(repo, SAMPLE, publish_body(old, old_meta, old_files)))[0] == 201
    status, answer = await put(repo, SAMPLE, publish_body(new, new_meta, new_files, site="site2"), site="site2")
    assert (status, answer["result"], answer["versions"]) == (201, "new_version", 2)

    doc = await (await repo.get(f"/api/datasets/{SAMPLE}")).json()
    assert doc["info_hash"] == new_meta.info_hash and doc["file_count"] == 3
    assert doc["sites"] == ["site2"]  # site1 holds only the older version
    assert [v["info_hash"] for v in doc["versions"]] == [new_meta.info_hash, old_meta.info_hash]
    assert doc["versions"][1]["sites"] == ["site1"]
    assert await (await repo.get(f"/datasets/{SAMPLE}.torrent")).read() == new
    assert await (await repo.get(f"/datasets/{SAMPLE}.torrent?info_hash={old_meta.info_hash}")).read() == old
    hashes = (await (await repo.get("/api/info-hashes")).json())["info_hashes"]
    assert sorted(hashes) == sorted([old_meta.info_hash, new_meta.info_hash])
    resp = await repo.get(f"/datasets/{SAMPLE}.torrent?info_hash=nothex")
    assert resp.status == 400


async def assert_nothing_stored(repo):
    doc = await (await repo.get("/api/datasets")).json()
    assert doc["total"] == 0 and doc["datasets"] == []
    assert (await (await repo.get("/api/info-hashes")).json()) == {"info_hashes": []}


async def test_unsafe_torrent_is_refused(repo, tmp_path):
    evil = hostile_torrent("evil")
    record_files = [{"lfn": "../../etc/passwd", "size": 10, "adler32": None}]
    body = {"site": "site1", "torrent": base64.b64encode(evil).decode(),
            "record": {"name": "evil", "total_size": 10, "files": record_files}}
    status, answer = await put(repo, "evil", body)
    assert status == 400
    assert answer["error"] == ("publish evil: torrent: unsafe path '../../etc/passwd' "
                               "(path component '..' is not allowed)")
    status, answer = await put(repo, "evil", {**body, "torrent": "%%% not base64"})
    assert (status, answer["error"]) == (400, "publish evil: torrent: not valid base64")
    await assert_nothing_stored(repo)


@pytest.mark.parametrize("change, message", [
    ({"total_size": 1}, "total size 1 differs from the torrent's 65000"),
    ({"files": "drop"}, "1 files but the torrent has 2"),
    ({"files": "resize"}, "is 39999 bytes but 40000 in the torrent"),
    ({"files": "rename"}, "is not in the torrent"),
    ({"info_hash": "0" * 40}, "info_hash 0000000000000000000000000000000000000000 differs"),
    ({"name": "other"}, "name differs from the torrent's name"),
])
async def test_record_must_match_the_torrent(repo, tmp_path, change, message):
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, FILES)
    body = publish_body(torrent, meta, files)
    record = body["record"]
    if change.get("files") == "drop":
        record["files"] = files[:1]
        record["total_size"] = files[0]["size"]
    elif change.get("files") == "resize":
        record["files"] = [{**files[0], "size": files[0]["size"] - 1}, files[1]]
        record["total_size"] = meta.total_size
    elif change.get("files") == "rename":
        record["files"] = [{**files[0], "lfn": "other.root"}, files[1]]
    else:
        record.update(change)
    path_name = record["name"]
    status, answer = await put(repo, path_name, body)
    assert status == 400, answer
    assert message in answer["error"]
    await assert_nothing_stored(repo)


async def test_path_naming_another_dataset_is_a_conflict(repo, tmp_path):
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, FILES)
    status, answer = await put(repo, "someotherdataset", publish_body(torrent, meta, files))
    assert status == 409
    assert answer["error"] == (f"someotherdataset: the path names this dataset but the record and torrent "
                               f"name {SAMPLE!r}")
    await assert_nothing_stored(repo)


async def test_unsigned_or_wrongly_signed_publish_changes_nothing(repo, tmp_path):
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, FILES)
    body = publish_body(torrent, meta, files)
    resp = await repo.put(f"/api/datasets/{SAMPLE}", json=body)
    assert resp.status == 401
    assert (await resp.json())["error"] == f"PUT /api/datasets/{SAMPLE}: request is not signed"
    status, answer = await put(repo, SAMPLE, body, secret="not-the-secret")
    assert (status, answer["error"]) == (401, "site1: bad signature")
    status, answer = await put(repo, SAMPLE, body, site="site2", secret="wrong")
    assert status == 401
    status, answer = await put(repo, SAMPLE, body, site="site9", secret="whatever")
    assert (status, answer["error"]) == (401, "site9: unknown site")
    # Signed by site2 but claiming to be site1: the signer is who publishes.
    status, answer = await put(repo, SAMPLE, body, site="site2")
    assert (status, answer["error"]) == (401, "site2: signed as 'site2' but the body says site 'site1'")
    await assert_nothing_stored(repo)
    metrics = await (await repo.get("/metrics")).text()
    assert 'btswarm_repo_publishes_total{result="unauthorized"} 5.0' in metrics


HOSTILE = Path(__file__).resolve().parents[1] / "data" / "hostile"


async def test_every_hostile_torrent_is_refused(repo):
    cases = sorted(HOSTILE.glob("*.torrent"))
    assert len(cases) >= 10, f"{HOSTILE}: expected the shared hostile .torrent files"
    for case in cases:
        body = {"site": "site1", "torrent": base64.b64encode(case.read_bytes()).decode(),
                "record": {"name": "x", "total_size": 1, "files": [{"lfn": "a.root", "size": 1}]}}
        status, answer = await put(repo, "x", body)
        assert status == 400, (case.name, answer)
        assert answer["error"].startswith("publish x: torrent"), (case.name, answer)
    await assert_nothing_stored(repo)


async def publish_many(repo, tmp_path, specs):
    metas = {}
    for name, files, description, site in specs:
        torrent, meta, record = make_torrent(tmp_path, name, files)
        status, answer = await put(repo, name, publish_body(torrent, meta, record, site=site,
                                                            description=description), site=site)
        assert status == 201, answer
        metas[name] = meta
    return metas


CATALOG = [
    (SAMPLE, FILES, "ATLAS cosmics, merged DPD", "site1"),
    (SAMPLE + "_ext", {"IDCosmic.DPD_IDCOMM.data08_cos.00091949.root": 90_000},
     f"copy of {SAMPLE} {SAMPLE} physics_IDCosmic DPD_IDCOMM", "site2"),
    ("mc08.105200.T1_McAtNlo_Jimmy.recon.AOD", {"AOD.027139._00001.pool.root.1": 150_000}, "ttbar", "site2"),
    ("data09_900GeV.00141811.physics_MinBias.merge.AOD", {"AOD.1.root": 10_000}, "first collisions", "site1"),
    ("user.jdoe.ntuple.v1", {"ntuple.root": 1_000}, "my ntuple", "site1"),
]


async def search(repo, **params):
    resp = await repo.get("/api/datasets", params=params)
    doc = await resp.json()
    assert resp.status == 200, doc
    return doc


async def test_search_finds_names_split_on_dots_and_underscores(repo, tmp_path):
    await publish_many(repo, tmp_path, CATALOG)
    names = lambda doc: [d["name"] for d in doc["datasets"]]  # noqa: E731
    assert set(names(await search(repo, q="IDCosmic"))) == {SAMPLE, SAMPLE + "_ext"}
    assert set(names(await search(repo, q="DPD_IDCOMM"))) == {SAMPLE, SAMPLE + "_ext"}
    assert names(await search(repo, q="McAtNlo")) == ["mc08.105200.T1_McAtNlo_Jimmy.recon.AOD"]
    assert names(await search(repo, q="027139")) == ["mc08.105200.T1_McAtNlo_Jimmy.recon.AOD"]  # a file name
    assert names(await search(repo, q="collisions")) == ["data09_900GeV.00141811.physics_MinBias.merge.AOD"]
    assert names(await search(repo, q="minbi")) == ["data09_900GeV.00141811.physics_MinBias.merge.AOD"]  # prefix
    assert (await search(repo, q='nothing" OR *'))["total"] == 0  # FTS syntax in user text is just words
    # The exact name ranks first even though the other one repeats every word of it.
    doc = await search(repo, q=SAMPLE)
    assert names(doc)[0] == SAMPLE and doc["sort"] == "relevance"


async def test_paging_sorting_and_site_filter(repo, tmp_path):
    await publish_many(repo, tmp_path, CATALOG)
    doc = await search(repo, per_page=2, page=3, sort="name")
    assert (doc["total"], doc["page"], doc["per_page"], len(doc["datasets"])) == (5, 3, 2, 1)
    assert doc["datasets"][0]["name"] == "user.jdoe.ntuple.v1"
    all_by_name = [d["name"] for d in (await search(repo, sort="name"))["datasets"]]
    assert all_by_name == sorted(all_by_name, key=str.lower)
    sizes = [d["total_size"] for d in (await search(repo, sort="size"))["datasets"]]
    assert sizes == sorted(sizes, reverse=True)
    assert (await search(repo, sort="date"))["datasets"][0]["name"] == "user.jdoe.ntuple.v1"  # newest first
    assert (await search(repo, page=9))["datasets"] == []
    at2 = await search(repo, site="site2")
    assert at2["total"] == 2 and all(d["sites"] == ["site2"] for d in at2["datasets"])
    assert (await search(repo, site="site2", q="ttbar"))["total"] == 1


@pytest.mark.parametrize("params, error", [
    ({"page": "0"}, "page=0: must be a whole number of at least 1"),
    ({"page": "abc"}, "page=abc: must be a whole number of at least 1"),
    ({"per_page": "-5"}, "per_page=-5: must be a whole number of at least 1"),
    ({"per_page": "1000"}, "per_page=1000: must be at most 200"),
    ({"sort": "bogus"}, "sort=bogus: unknown sort order (use one of: relevance, name, size, date)"),
])
async def test_bad_paging_is_a_clear_400(repo, params, error):
    resp = await repo.get("/api/datasets", params=params)
    assert resp.status == 400
    assert (await resp.json()) == {"error": error}


async def test_unknown_dataset_is_404_json(repo):
    resp = await repo.get("/api/datasets/no.such.dataset")
    assert resp.status == 404
    assert (await resp.json()) == {"error": "no.such.dataset: no such dataset"}
    resp = await repo.get("/api/nothing-here")
    assert resp.status == 404 and "error" in await resp.json()


async def test_metrics_count_publishes_datasets_and_downloads(repo, tmp_path):
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, FILES)
    await put(repo, SAMPLE, publish_body(torrent, meta, files))
    await put(repo, SAMPLE, publish_body(torrent, meta, files, site="site2"), site="site2")
    await put(repo, "wrongname", publish_body(torrent, meta, files))
    for _ in range(3):
        assert (await repo.get(f"/datasets/{SAMPLE}.torrent")).status == 200
    resp = await repo.get("/metrics")
    assert resp.status == 200 and resp.content_type == "text/plain"
    text = await resp.text()
    for line in ('btswarm_repo_publishes_total{result="created"} 1.0',
                 'btswarm_repo_publishes_total{result="site_added"} 1.0',
                 'btswarm_repo_publishes_total{result="refused"} 1.0',
                 "btswarm_repo_datasets_in_conflict 0.0",
                 "btswarm_repo_datasets_disputed 0.0",
                 "btswarm_repo_datasets 1.0",
                 "btswarm_repo_torrent_downloads_total 3.0"):
        assert line in text, line


# --- replicas that disagree (btrepo.identity through the real app and SQLite) -------------------

SIX = {f"DPD_IDCOMM.051203._0000{i}.pool.root.1": 30_000 + i for i in range(1, 7)}


async def put_replica(repo, tmp_path, site, files=SIX, **kw):
    torrent, meta, record = make_replica(tmp_path / site, SAMPLE, files, **kw)
    status, answer = await put(repo, SAMPLE, publish_body(torrent, meta, record, site=site), site=site)
    return status, answer, meta


async def dataset_doc(repo):
    return await (await repo.get(f"/api/datasets/{SAMPLE}")).json()


async def test_a_corrupt_replica_never_becomes_the_dataset(repo, tmp_path):
    _, _, good = await put_replica(repo, tmp_path, "site1")
    status, answer, bad = await put_replica(repo, tmp_path, "site2", flipped=set(SIX))
    # stored as a rival, not as a new version; the site is told exactly which files differ
    assert (status, answer["result"], answer["state"], answer["served"]) == (201, "conflict", "conflict",
                                                                            good.info_hash)
    assert answer["differing"] == sorted(SIX) and "replicas disagree" in answer["problem"]
    doc = await dataset_doc(repo)
    assert (doc["info_hash"], doc["replicas"], doc["servable"], doc["decided_by"]) == \
        (good.info_hash, "disputed", False, "first_published")
    assert {v["site"]: v["state"] for v in doc["replica_sites"]} == {"site1": "current", "site2": "conflict"}
    # by name: refused with the reason, never one of the two at random
    resp = await repo.get(f"/datasets/{SAMPLE}.torrent")  # a download link: an error page says why
    assert resp.status == 409
    assert "replicas disagree" in await resp.text() and "info_hash=" in await resp.text()
    # a version chosen by info-hash is the user's call
    assert (await repo.get(f"/datasets/{SAMPLE}.torrent?info_hash={bad.info_hash}")).status == 200
    text = await (await repo.get("/metrics")).text()
    assert "btswarm_repo_datasets_disputed 1.0" in text and "btswarm_repo_datasets_in_conflict 1.0" in text

    # a third site with the good bytes: the majority decides
    torrent, meta, record = make_replica(tmp_path / "site3", SAMPLE, SIX)
    assert meta.info_hash == good.info_hash
    status, answer = await put(repo, SAMPLE, publish_body(torrent, meta, record, site="site3"), site="site3")
    assert (status, answer["result"], answer["state"]) == (200, "site_added", "current")
    doc = await dataset_doc(repo)
    assert (doc["info_hash"], doc["replicas"], doc["servable"], doc["decided_by"]) == \
        (good.info_hash, "conflict", True, "majority")
    assert await (await repo.get(f"/datasets/{SAMPLE}.torrent")).read() == torrent

    # site2 fixes its replica and publishes again: the conflict clears
    status, answer, fixed = await put_replica(repo, tmp_path / "fixed", "site2")
    assert (fixed.info_hash, answer["result"], answer["state"]) == (good.info_hash, "site_added", "current")
    doc = await dataset_doc(repo)
    assert (doc["replicas"], doc["problem"], doc["sites"]) == ("agree", None, ["site1", "site2", "site3"])
    assert "btswarm_repo_datasets_in_conflict 0.0" in await (await repo.get("/metrics")).text()


async def test_catalog_checksums_decide_and_contradicted_bytes_are_not_served(repo, tmp_path):
    _, _, bad = await put_replica(repo, tmp_path, "site2", flipped={"DPD_IDCOMM.051203._00003.pool.root.1"})
    status, answer, good = await put_replica(repo, tmp_path, "site1", catalog=True)
    assert (status, answer["result"], answer["state"]) == (201, "conflict", "current")
    doc = await dataset_doc(repo)
    assert (doc["info_hash"], doc["servable"], doc["decided_by"]) == (good.info_hash, True, "catalog")
    assert {v["site"]: (v["state"], v["differing"]) for v in doc["replica_sites"]} == {
        "site1": ("current", []), "site2": ("contradicts_catalog", ["DPD_IDCOMM.051203._00003.pool.root.1"])}
    assert [f["adler32"] for f in doc["files"]] != [None] * 6  # the catalog's checksums, for bt-get to check
    resp = await repo.get(f"/datasets/{SAMPLE}.torrent?info_hash={bad.info_hash}")
    assert resp.status == 409 and "contradict the catalog" in await resp.text()


async def test_a_replica_that_lacks_a_file_is_listed_as_partial(repo, tmp_path):
    five = {k: v for k, v in SIX.items() if not k.endswith("6.pool.root.1")}
    _, answer, partial = await put_replica(repo, tmp_path, "site2", files=five)
    assert answer["result"] == "created"
    status, answer, whole = await put_replica(repo, tmp_path, "site1")
    assert (status, answer["result"]) == (201, "new_version")  # the whole dataset replaces the part
    doc = await dataset_doc(repo)
    assert (doc["info_hash"], doc["file_count"], doc["replicas"], doc["servable"]) == (whole.info_hash, 6,
                                                                                     "partial", True)
    view = next(v for v in doc["replica_sites"] if v["site"] == "site2")
    assert (view["state"], view["missing"]) == ("partial", ["DPD_IDCOMM.051203._00006.pool.root.1"])
    assert "site2 holds a partial replica (lacks DPD_IDCOMM.051203._00006.pool.root.1)" in doc["problem"]


async def test_an_operator_settles_a_dispute(repo, tmp_path):
    _, _, good = await put_replica(repo, tmp_path, "site1")
    _, _, bad = await put_replica(repo, tmp_path, "site2", flipped=set(SIX))
    db = repo.app[keys.DB]
    decision = await db.choose(SAMPLE, bad.info_hash)
    assert (decision.current, decision.decided_by.value, decision.servable) == (bad.info_hash, "operator", True)
    doc = await dataset_doc(repo)
    assert (doc["info_hash"], doc["pinned"], doc["servable"]) == (bad.info_hash, bad.info_hash, True)
    assert (await repo.get(f"/datasets/{SAMPLE}.torrent")).status == 200
    await db.choose(SAMPLE, None)
    assert (await dataset_doc(repo))["servable"] is False


async def test_a_dataset_from_rucio_keeps_its_did_and_is_found_by_scope(repo, tmp_path):
    did = "data18_13TeV:data18_13TeV.00348895.DAOD_PHYS.r13286"
    torrent, meta, files = make_torrent(tmp_path, did, FILES)
    status, answer = await put(repo, did, publish_body(torrent, meta, files,
                                                       did={"scope": "data18_13TeV",
                                                            "name": "data18_13TeV.00348895.DAOD_PHYS.r13286"}))
    assert status == 201, answer
    plain, pmeta, pfiles = make_torrent(tmp_path, SAMPLE, FILES)
    assert (await put(repo, SAMPLE, publish_body(plain, pmeta, pfiles)))[0] == 201
    doc = await (await repo.get(f"/api/datasets/{did}")).json()
    assert doc["did"] == {"scope": "data18_13TeV", "name": "data18_13TeV.00348895.DAOD_PHYS.r13286"}
    assert (await (await repo.get(f"/api/datasets/{SAMPLE}")).json())["did"] is None
    for query, names in [("scope=data18_13TeV", [did]), ("scope=data18", []), ("q=data18_13TeV", [did]),
                         ("q=DAOD_PHYS", [did]), (f"q={did}", [did])]:
        found = await (await repo.get(f"/api/datasets?{query}")).json()
        assert [d["name"] for d in found["datasets"]] == names, query
    page = await (await repo.get(f"/datasets/{did}")).text()
    assert "Rucio DID" in page and "/search?scope=data18_13TeV" in page


async def test_a_did_that_does_not_spell_the_name_is_refused(repo, tmp_path):
    torrent, meta, files = make_torrent(tmp_path, "scope1:name1", FILES)
    status, answer = await put(repo, "scope1:name1", publish_body(torrent, meta, files,
                                                                 did={"scope": "scope2", "name": "name1"}))
    assert status == 400 and "named otherwise than its DID scope2:name1" in answer["error"]
    assert (await repo.get("/api/datasets/scope1:name1")).status == 404


@pytest.mark.parametrize("q", ["cosmic", "IDCosmic", "COSMIC", "daod", "PHYS", "00348895", "p26", "cos", "Cosmic p26",
                               "DPD_IDCOMM", "data18_13TeV.00348895"])
async def test_search_finds_any_part_of_a_name_in_any_case(repo, tmp_path, q):
    names = ["data08_cos.00091949.physics_IDCosmic.merge.DPD_IDCOMM.o4_r653_p26_tid051203",
             "data18_13TeV.00348895.physics_Main.deriv.DAOD_PHYS.r13286_p4910_p5631"]
    for name in names:
        torrent, meta, files = make_torrent(tmp_path / name[:10], name, {"a.root": 100})
        assert (await put(repo, name, publish_body(torrent, meta, files)))[0] == 201
    doc = await (await repo.get("/api/datasets", params={"q": q})).json()
    found = [d["name"] for d in doc["datasets"]]
    expected = [n for n in names if all(w.lower() in n.lower() for w in q.split())]
    assert sorted(found) == sorted(expected) and expected, (q, found)


async def test_a_search_that_finds_nothing_finds_nothing(repo, tmp_path):
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, FILES)
    await put(repo, SAMPLE, publish_body(torrent, meta, files))
    for q in ("zzzcosmic", "cosmicx", 'cos"mic'):
        doc = await (await repo.get("/api/datasets", params={"q": q})).json()
        assert doc["datasets"] == [], q
