"""bt-repo's Rucio DIDs against the real app on a real port: containers as sites read them, files by DID."""

from __future__ import annotations

import sqlite3

import pytest

from btrepo.app import DB_FILE, create_app
from btrepo.config import RepoConfig
from tests.repo.repo_support import SECRETS, catalog_before, make_torrent, publish, publish_body
from tests.support import free_port
from torrents.servicekit import web as tweb

SCOPE = "data18_13TeV"
DS1, DS2 = f"{SCOPE}:ds.001", f"{SCOPE}:ds.002"
CONTAINER = f"{SCOPE}:cont.DAOD"


@pytest.fixture
async def repo(aiohttp_client, tmp_path):
    config = RepoConfig(state=str(tmp_path / "state"), tracker=f"http://127.0.0.1:{free_port()}",
                        site_secrets=SECRETS, site_kinds={"site3": "T3"})
    return await aiohttp_client(create_app(config))


async def put_container(repo, name: str, body, site: str = "site1"):
    return await tweb.signed_request(repo.session, "PUT", str(repo.make_url(f"/api/containers/{name}")), site=site,
                                     secret=SECRETS[site], payload=body)


async def did(repo, name: str):
    resp = await repo.get(f"/api/dids/{name}")
    return resp.status, await resp.json()


async def publish_rucio(repo, tmp_path, name: str, files: dict[str, int]) -> None:
    torrent, meta, record = make_torrent(tmp_path, name, files)
    scope, dname = name.split(":")
    status, answer = await publish(repo.session, str(repo.make_url("/")), name,
                                   publish_body(torrent, meta, record, did={"scope": scope, "name": dname}))
    assert status == 201, answer


async def test_a_container_lists_what_every_site_said_and_a_site_replaces_its_own_word(repo):
    assert await put_container(repo, CONTAINER, {"site": "site1", "datasets": [DS1]}) == \
        (200, {"container": CONTAINER, "site": "site1", "datasets": 1, "total": 1})
    status, _ = await put_container(repo, CONTAINER, {"site": "site2", "datasets": [DS1, DS2]}, site="site2")
    assert status == 200
    assert await did(repo, CONTAINER) == (200, {"did": CONTAINER, "type": "container", "datasets": [DS1, DS2],
                                                "sites": ["site1", "site2"]})
    # site2 read Rucio again: DS2 was detached, then the container emptied
    assert (await put_container(repo, CONTAINER, {"datasets": [DS1]}, site="site2"))[1]["total"] == 1
    assert (await did(repo, CONTAINER))[1]["datasets"] == [DS1]
    for site in ("site1", "site2"):
        assert (await put_container(repo, CONTAINER, {"datasets": []}, site=site))[0] == 200
    assert await did(repo, CONTAINER) == (404, {"error": f"{CONTAINER}: no such DID (no dataset, container or "
                                                         "file of that name)"})


async def test_a_file_did_names_the_datasets_of_its_scope_that_hold_it(repo, tmp_path):
    await publish_rucio(repo, tmp_path / "a", DS1, {"f1.root": 1000, "shared.root": 10})
    await publish_rucio(repo, tmp_path / "b", DS2, {"f2.root": 2000, "shared.root": 10})
    assert await did(repo, f"{SCOPE}:f2.root") == (200, {"did": f"{SCOPE}:f2.root", "type": "file",
                                                         "file": "f2.root", "datasets": [DS2]})
    assert (await did(repo, f"{SCOPE}:shared.root"))[1]["datasets"] == [DS1, DS2]
    assert (await did(repo, DS1))[1] == {"did": DS1, "type": "dataset", "datasets": [DS1]}
    assert (await did(repo, "otherscope:f2.root"))[0] == 404  # a file is its dataset's scope's
    status, answer = await did(repo, "no-colon-here")
    assert status == 400 and "expected SCOPE:NAME" in answer["error"]


@pytest.mark.parametrize("body, site, status, error", [
    ({"datasets": "x"}, "site1", 400, "datasets must be a list"),
    ({"datasets": ["not a did"]}, "site1", 400, "not a DID (expected SCOPE:NAME)"),
    ({"datasets": [CONTAINER]}, "site1", 400, "a container cannot hold itself"),
    ({"site": "site2", "datasets": []}, "site1", 401, "signed as 'site1' but the body says site 'site2'"),
    ({"datasets": [DS1]}, "site3", 403, "a T3 site does not publish Rucio containers"),
])
async def test_a_bad_container_request_is_refused_and_changes_nothing(repo, body, site, status, error):
    got, answer = await put_container(repo, CONTAINER, body, site=site)
    assert got == status and error in answer["error"], answer
    assert (await did(repo, CONTAINER))[0] == 404


async def test_an_unsigned_container_request_is_refused(repo):
    resp = await repo.put(f"/api/containers/{CONTAINER}", json={"site": "site1", "datasets": [DS1]})
    assert resp.status == 401
    assert (await did(repo, CONTAINER))[0] == 404


async def test_a_catalog_from_before_containers_finds_its_files_by_did(aiohttp_client, tmp_path):
    """The migration adds the containers' table and indexes the files already stored."""
    (tmp_path / "state").mkdir()
    conn = catalog_before(tmp_path / "state" / DB_FILE, "CREATE TABLE container_datasets")
    conn.execute("""INSERT INTO datasets (id, name, first_published, last_published, did_scope, did_name,
                                          current_version_id) VALUES (1, ?, 'then', 'then', ?, 'ds.001', 1)""",
                 (DS1, SCOPE))
    conn.execute("""INSERT INTO versions (id, dataset_id, info_hash, total_size, file_count, piece_length, magnet,
                                          torrent, first_published) VALUES (1, 1, ?, 10, 1, 16384, '', x'00', 'then')""",
                 ("ab" * 20,))
    conn.execute("INSERT INTO files (version_id, idx, lfn, size) VALUES (1, 0, 'old.root', 10)")
    conn.commit()
    conn.close()
    repo = await aiohttp_client(create_app(RepoConfig(state=str(tmp_path / "state"), site_secrets=SECRETS,
                                                      tracker=f"http://127.0.0.1:{free_port()}")))
    assert (await did(repo, f"{SCOPE}:old.root"))[1]["datasets"] == [DS1]
    plan = sqlite3.connect(tmp_path / "state" / DB_FILE).execute(
        "EXPLAIN QUERY PLAN SELECT version_id FROM files WHERE lfn = 'old.root'").fetchall()
    assert "files_lfn" in str(plan)  # found by the index, not a scan of every file
    assert (await put_container(repo, CONTAINER, {"datasets": [DS1]}))[0] == 200
