"""Who may change what is served, through the real repository app and SQLite (btrepo/rights.py).

The operators set each site's kind (`[repo] site_kinds`); a T3 may only add itself to the served
version; a new version comes only from a T2 that held the served one (or a curator), never over a
catalog-confirmed version; every change of the served version is listed with who, when and why.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from btrepo import catalog, identity
from btrepo import db as repo_db
from btrepo.app import DB_FILE, create_app
from btrepo.config import RepoConfig
from btrepo import keys
from tests.repo.repo_support import SAMPLE, SECRETS, catalog_before, make_replica, publish, publish_body
from tests.support import free_port
from torrents.errors import ConfigError

SITES = {**SECRETS, "t3": "secret-t3"}
SIX = {f"DPD_IDCOMM.051203._0000{i}.pool.root.1": 30_000 + i for i in range(1, 7)}
FORBIDDEN = f"publish {SAMPLE}: "


def config(tmp_path, **kw) -> RepoConfig:
    return RepoConfig(state=str(tmp_path / "state"), tracker=f"http://127.0.0.1:{free_port()}", site_secrets=SITES,
                      site_kinds={"t3": "T3"}, **kw)


@pytest.fixture
async def repo(aiohttp_client, tmp_path):
    return await aiohttp_client(create_app(config(tmp_path)))


async def put(repo, tmp_path, site, files=SIX, *, kind=None, new_version=False, **replica):
    torrent, meta, record = make_replica(tmp_path / site / ("v2" if new_version else "v1"), SAMPLE, files, **replica)
    body = publish_body(torrent, meta, record, site=site, **({"new_version": True} if new_version else {}))
    if kind is not None:
        body["kind"] = kind
    status, answer = await publish(repo.session, str(repo.make_url("/")), SAMPLE, body, site=site,
                                   secret=SITES[site])
    return status, answer, meta


async def dataset(repo) -> dict:
    return await (await repo.get(f"/api/datasets/{SAMPLE}")).json()


def _without(doc: dict, *keys: str) -> dict:
    return {k: v for k, v in doc.items() if k not in keys}


async def test_a_t3_cannot_replace_or_dispute_a_dataset(repo, tmp_path, caplog):
    _, _, good = await put(repo, tmp_path, "site1")
    before = await dataset(repo)
    # Other bytes, declared a new version (the bt-server publish --new-version) or not.
    for new_version in (True, False):
        status, answer, bad = await put(repo, tmp_path, "t3", flipped=set(SIX), new_version=new_version)
        assert status == 403, answer
        assert answer["error"].startswith(FORBIDDEN + "t3 is a T3: it may "), answer
    assert answer["error"] == (FORBIDDEN + f"t3 is a T3: it may only add itself as a holder of the served version "
                               f"{good.info_hash}, not publish {bad.info_hash} (other bytes or files, or the same "
                               "built with other settings)")
    assert "publish" in caplog.text and "refused: " + FORBIDDEN + "t3 is a T3" in caplog.text
    after = await dataset(repo)
    assert _without(after, "swarm") == _without(before, "swarm")  # no version, no rival, no vote
    assert (after["info_hash"], after["sites"], after["replicas"], after["servable"]) == (good.info_hash, ["site1"],
                                                                                         "agree", True)
    assert (await repo.get(f"/datasets/{SAMPLE}.torrent?info_hash={bad.info_hash}")).status == 404
    assert 'btswarm_repo_publishes_total{result="forbidden"} 2.0' in await (await repo.get("/metrics")).text()

    # The served version itself: the T3 adds itself as a holder, listed apart.
    status, answer, same = await put(repo, tmp_path, "t3")
    assert (status, answer["result"], answer["state"], same.info_hash) == (200, "site_added", "current",
                                                                           good.info_hash)
    assert ((await dataset(repo))["t3_sites"]) == ["t3"]


async def test_a_t3_cannot_create_a_dataset(repo, tmp_path):
    status, answer, _ = await put(repo, tmp_path, "t3")
    assert (status, answer["error"]) == (403, FORBIDDEN + "t3 is a T3: it may only add itself as a holder of a "
                                         "version the repository serves, and no storage site has published this "
                                         "dataset")
    assert (await (await repo.get("/api/datasets")).json())["total"] == 0
    assert (await (await repo.get("/api/sites")).json())["sites"] == []  # not even the site is stored


async def test_a_claimed_kind_other_than_the_configured_one_is_403(repo, tmp_path, caplog):
    _, _, good = await put(repo, tmp_path, "site1")
    status, answer, _ = await put(repo, tmp_path, "t3", kind="T2", flipped=set(SIX), new_version=True)
    assert (status, answer["error"]) == (403, 't3: claims to be a T2 site but [repo] site_kinds makes it a T3: set '
                                         '[server] kind = "T3" at t3, or ask the federation\'s operators to change '
                                         '[repo] site_kinds')
    assert "publish " + SAMPLE + " refused: t3: claims to be a T2 site" in caplog.text
    status, answer, _ = await put(repo, tmp_path, "site2", kind="T3")
    assert (status, answer["error"].split(": ", 1)[1].split(" but")[0]) == (403, "claims to be a T3 site")
    doc = await dataset(repo)
    assert (doc["info_hash"], doc["sites"]) == (good.info_hash, ["site1"])
    # The configured kind said, or none: accepted.
    assert (await put(repo, tmp_path, "site2", kind="T2"))[0] == 200
    assert (await put(repo, tmp_path, "t3", kind="T3"))[0] == 200


async def test_a_t2_that_never_held_the_dataset_cannot_replace_it(repo, tmp_path):
    _, _, good = await put(repo, tmp_path, "site1", catalog=True)
    refused = (403, FORBIDDEN + f"site2 may not publish a new version: it has never held the served version "
                                f"{good.info_hash} (the sites that may: site1; or a site in [repo] curators)")
    # Declared a new version; or other catalog checksums (a new version by the catalog's word).
    status, answer, _ = await put(repo, tmp_path, "site2", flipped=set(SIX), new_version=True)
    assert (status, answer["error"]) == refused
    resized = {**SIX, "DPD_IDCOMM.051203._00001.pool.root.1": 12_345}
    status, answer, _ = await put(repo, tmp_path / "resized", "site2", resized, catalog=True)
    assert (status, answer["error"]) == refused
    doc = await dataset(repo)
    assert (doc["info_hash"], doc["sites"], len(doc["versions"])) == (good.info_hash, ["site1"], 1)
    # Once it holds the served version, it may.
    assert (await put(repo, tmp_path, "site2", catalog=True))[1]["result"] == "site_added"
    status, answer, newer = await put(repo, tmp_path / "resized", "site2", resized, catalog=True)
    assert (status, answer["result"]) == (201, "new_version")
    assert (await dataset(repo))["info_hash"] == newer.info_hash


async def test_any_t2_may_add_files_to_the_served_version(repo, tmp_path):
    """Nothing served changes: else a site whose copy lacks a file, published first, keeps whole ones out."""
    five = {k: v for k, v in SIX.items() if not k.endswith("6.pool.root.1")}
    await put(repo, tmp_path, "site1", five)
    status, answer, whole = await put(repo, tmp_path, "site2")
    assert (status, answer["result"], answer["why"]) == (201, "new_version",
                                                         "files added (DPD_IDCOMM.051203._00006.pool.root.1)")
    doc = await dataset(repo)
    assert (doc["info_hash"], doc["replicas"]) == (whole.info_hash, "partial")
    # Other bytes, undeclared, from a site that never held it: a rival the majority weighs, not a new version.
    status, answer, _ = await put(repo, tmp_path, "site3", flipped=set(SIX))
    assert (status, answer["result"]) == (201, "conflict")
    assert (await dataset(repo))["info_hash"] == whole.info_hash


async def test_a_curator_may_publish_a_new_version_of_any_dataset(aiohttp_client, tmp_path):
    repo = await aiohttp_client(create_app(config(tmp_path, curators=("site3",))))
    await put(repo, tmp_path, "site1")
    status, answer, new = await put(repo, tmp_path, "site3", flipped=set(SIX), new_version=True)
    assert (status, answer["result"]) == (201, "new_version")
    assert (await dataset(repo))["info_hash"] == new.info_hash


def test_a_curator_or_kind_must_name_a_known_site(tmp_path):
    with pytest.raises(ConfigError, match=r"\[repo\] curators: t3: is a T3 in site_kinds; a curator is a storage "
                                          r"site \(T2\)"):
        config(tmp_path, curators=("t3",)).check_roles()
    with pytest.raises(ConfigError, match=r"\[repo\] site_kinds: nobody: no secret for it in site_secrets "
                                          r"\(a misspelt site name\?\)"):
        RepoConfig(site_secrets=SITES, site_kinds={"nobody": "T3"}).check_roles()
    with pytest.raises(ConfigError, match="site_kinds: t3: kind must be one of T2, T3, got 'T1'"):
        RepoConfig(site_secrets=SITES, site_kinds={"t3": "T1"})
    # From the environment, key by key, as the loader reads it.
    from btrepo.config import load
    loaded = load(None, environ={"BTSWARM_REPO_SITE_SECRETS": "site1=a,t3=b", "BTSWARM_REPO_SITE_KINDS": "t3=T3"})
    loaded.check_roles()
    assert (loaded.kind_of("site1"), loaded.kind_of("t3")) == ("T2", "T3")


async def test_never_a_new_version_over_a_catalog_confirmed_one(repo, tmp_path):
    _, _, checked = await put(repo, tmp_path, "site1", catalog=True)
    status, answer, _ = await put(repo, tmp_path, "site1", flipped={"DPD_IDCOMM.051203._00002.pool.root.1"},
                                  new_version=True)
    assert (status, answer["error"]) == (403, FORBIDDEN + f"site1 may not publish a new version: the served version "
                                         f"{checked.info_hash} is confirmed by the catalog's checksums, and a new "
                                         "version must be too (every file with the catalog's adler32)")
    assert (await dataset(repo))["info_hash"] == checked.info_hash
    # The catalog confirms the new one too (its checksums changed with the files): it replaces the old.
    more = {**SIX, "DPD_IDCOMM.051203._00007.pool.root.1": 7}
    status, answer, newer = await put(repo, tmp_path, "site1", more, catalog=True, new_version=True)
    assert (status, answer["result"]) == (201, "new_version")


async def test_every_change_of_the_served_version_is_listed(repo, tmp_path):
    _, _, v1 = await put(repo, tmp_path, "site1")
    await put(repo, tmp_path, "site2")
    await put(repo, tmp_path, "t3")
    _, answer, v2 = await put(repo, tmp_path, "site2", flipped=set(SIX), new_version=True)
    assert answer["result"] == "new_version"
    await repo.app[keys.DB].choose(SAMPLE, v1.info_hash)
    history = (await dataset(repo))["history"]
    assert [(c["who"], c["why"], c["info_hash"], c["previous"], c["decided_by"]) for c in history] == [
        ("operator", "operator decision (bt-repo choose)", v1.info_hash, v2.info_hash, "operator"),
        ("site2", "new version: declared a new version by site2", v2.info_hash, v1.info_hash, "only"),
        ("site1", "first publication", v1.info_hash, None, "only"),
    ]  # newest first; adding holders changed nothing served, so it is not listed
    assert all(c["at"].endswith("Z") and len(c["at"]) == 20 for c in history)
    page = await (await repo.get(f"/datasets/{SAMPLE}")).text()
    listed = page.split('<ol class="history" reversed>', 1)[1].split("</ol>", 1)[0]
    assert listed.count("<li>") == 3
    assert ('<strong class="who">site2</strong> · <span class="why">new version: declared a new version by '
            f'site2</span> · serving <code class="hash">{v2.info_hash}</code>') in listed


async def test_an_older_catalog_gets_keepers_history_and_the_configured_kinds(aiohttp_client, tmp_path):
    """The issue's aftermath, as the previous bt-repo stored it: t3 said it was a T2 and published a rival,
    so the dataset is disputed. Opened with [repo] site_kinds = {t3 = "T3"}: t3 no longer votes, site1's
    version is served, site1 is its keeper, and the history starts."""
    good = make_replica(tmp_path / "good", SAMPLE, SIX)
    bad = make_replica(tmp_path / "bad", SAMPLE, SIX, flipped=set(SIX))
    (tmp_path / "state").mkdir()
    conn = catalog_before(tmp_path / "state" / DB_FILE, "CREATE TABLE keepers")  # as the previous bt-repo left it
    for site, (torrent, meta, record) in (("site1", good), ("t3", bad)):
        # the kind the body claimed was believed
        _legacy_publish(conn, catalog.parse_publish(publish_body(torrent, meta, record, site=site), SAMPLE, site))
    assert conn.execute("SELECT json_extract(decision, '$.disputed') FROM datasets").fetchone()[0] == 1
    conn.close()

    repo = await aiohttp_client(create_app(config(tmp_path)))
    doc = await dataset(repo)
    assert (doc["info_hash"], doc["replicas"], doc["servable"], doc["decided_by"]) == (
        good[1].info_hash, "conflict", True, "majority")
    assert [(c["who"], c["why"], c["info_hash"]) for c in doc["history"]] == [
        ("bt-repo", "served when this history began", good[1].info_hash)]
    assert {s["name"]: s["kind"] for s in (await (await repo.get("/api/sites")).json())["sites"]} == {
        "site1": "T2", "t3": "T3"}
    # t3's rival stays listed, but never counts; site1 is the keeper.
    status, answer, _ = await put(repo, tmp_path, "site2", flipped=set(SIX), new_version=True)
    assert status == 403 and "(the sites that may: site1;" in answer["error"]


def _legacy_publish(conn: sqlite3.Connection, pub: catalog.Publication) -> None:
    """A publication as the schema-6 bt-repo stored it (a later one is a rival of the first)."""
    now = repo_db.utcnow()
    row = conn.execute("SELECT id, current_version_id FROM datasets WHERE name = ?", (pub.name,)).fetchone()
    if row is None:
        row = (conn.execute("INSERT INTO datasets (name, first_published, last_published) VALUES (?, ?, ?)",
                            (pub.name, now, now)).lastrowid, None)
    conn.execute("INSERT INTO sites (name, first_seen, kind) VALUES (?, ?, ?)", (pub.site, now, pub.kind))
    vid = conn.execute("""INSERT INTO versions (dataset_id, info_hash, total_size, file_count, piece_length, magnet,
                          torrent, first_published, relation, base_version_id) VALUES (?,?,?,?,?,?,?,?,?,?)""",
                       (row[0], pub.info_hash, pub.dataset.total_size, len(pub.dataset.files), pub.meta.piece_length,
                        pub.meta.magnet(), pub.torrent, now, "conflict" if row[1] else "created", row[1])).lastrowid
    conn.executemany("INSERT INTO files (version_id, idx, lfn, size, adler32, xxh3) VALUES (?, ?, ?, ?, ?, ?)",
                     [(vid, i, f.lfn, f.size, f.adler32, pub.xxh3.get(f.lfn)) for i, f in enumerate(pub.dataset.files)])
    conn.execute("""INSERT INTO publications (version_id, site_id, first_published, last_published)
                    SELECT ?, id, ?, ? FROM sites WHERE name = ?""", (vid, now, now, pub.site))
    decision = identity.decide(repo_db._facts(conn, row[0]))
    conn.execute("""UPDATE datasets SET decision = ?, current_version_id = (SELECT id FROM versions WHERE info_hash = ?)
                    WHERE id = ?""", (json.dumps(decision.to_json()), decision.current, row[0]))
