"""The repository keeps what it serves (btrepo/cache.py) and never serves it stale.

A publish, a `bt-repo choose` on the catalog file from another process's
connection, and a change in who holds a version (the tracker's `holders`)
are each seen by the very next request. Then a batch start: 1,000
concurrent requests for the record and the .torrent of a running
`bt-repo run`, all answered 200 with the right bytes.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import urllib.request

import aiohttp
import pytest

from btrepo.app import DB_FILE, create_app
from btrepo.cache import CatalogCache
from btrepo.config import RepoConfig
from btrepo.db import Database
from tests.repo.repo_support import (SAMPLE, SECRETS, ThreadedServer, make_torrent, publish, publish_body,
                                     publish_sync, repo_process, sized_torrent, tracker_app)
from tests.support import wait_for
from torrents import metainfo
from torrents.procs import children

FILES = {"a.root": 40_000, "b.root": 25_000}
MORE = {**FILES, "c.root": 30_000}
SEED1, SEED2 = "http://127.0.0.2:8701/data/", "http://127.0.0.3:8701/data/"


@pytest.fixture
async def repo(aiohttp_client, aiohttp_server, tmp_path):
    swarms: dict[str, dict] = {}
    tracker = await aiohttp_server(tracker_app(swarms))
    client = await aiohttp_client(create_app(RepoConfig(state=str(tmp_path / "state"),
                                                        tracker=str(tracker.make_url("")), site_secrets=SECRETS)))
    return client, swarms


async def put(client, torrent, meta, files, site="site1", **record) -> dict:
    status, answer = await publish(client.session, str(client.make_url("/")), SAMPLE,
                                   publish_body(torrent, meta, files, site=site, **record), site=site)
    assert status in (200, 201), answer
    return answer


async def served(client, **params) -> tuple[dict, metainfo.Metainfo]:
    doc = await (await client.get(f"/api/datasets/{SAMPLE}")).json()
    resp = await client.get(f"/datasets/{SAMPLE}.torrent", params=params)
    assert resp.status == 200, await resp.text()
    return doc, metainfo.parse(await resp.read())


async def test_a_publish_is_served_by_the_next_request(repo, tmp_path):
    client, _ = repo
    old = make_torrent(tmp_path / "old", SAMPLE, FILES)
    await put(client, *old)
    for _ in range(2):  # asked twice: now kept
        doc, meta = await served(client)
    assert doc["info_hash"] == meta.info_hash == old[1].info_hash and doc["sites"] == ["site1"]
    # Another site: the same version, now held by two (the record changes, the .torrent's info dict does not).
    await put(client, *old, site="site2")
    doc, _ = await served(client)
    assert doc["sites"] == ["site1", "site2"]
    # A new version replaces the served one, in the record and in the .torrent, at once.
    new = make_torrent(tmp_path / "new", SAMPLE, MORE)
    answer = await put(client, *new, new_version=True)
    assert answer["served"] == new[1].info_hash
    doc, meta = await served(client)
    assert doc["info_hash"] == meta.info_hash == new[1].info_hash
    assert [f["lfn"] for f in doc["files"]] == sorted(MORE) and doc["file_count"] == 3
    # The old version stays reachable by its info-hash, with its own bytes.
    resp = await client.get(f"/datasets/{SAMPLE}.torrent", params={"info_hash": old[1].info_hash})
    assert metainfo.parse(await resp.read()).info_hash == old[1].info_hash


async def test_a_choice_made_on_the_catalog_file_from_outside_is_served_by_the_next_request(repo, tmp_path):
    client, _ = repo
    old, new = make_torrent(tmp_path / "old", SAMPLE, FILES), make_torrent(tmp_path / "new", SAMPLE, MORE)
    await put(client, *old)
    await put(client, *old, site="site2")
    await put(client, *new, new_version=True)  # site1 moves on; site2 still holds the old version
    assert (await served(client))[1].info_hash == new[1].info_hash
    # As `bt-repo choose` does: its own connection to the file, while the repository runs.
    outside = Database(tmp_path / "state" / DB_FILE)
    try:
        await outside.choose(SAMPLE, old[1].info_hash)
    finally:
        outside.close()
    doc, meta = await served(client)
    assert doc["info_hash"] == meta.info_hash == old[1].info_hash and doc["pinned"] == old[1].info_hash


async def test_the_web_seeds_follow_the_holders_from_one_request_to_the_next(repo, tmp_path):
    client, swarms = repo
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, FILES)
    await put(client, torrent, meta, files, web_seeds=[SEED1])
    await put(client, torrent, meta, files, site="site2", web_seeds=[SEED2])
    for holders, seeds in ((["site1", "site2"], (SEED1, SEED2)), (["site2"], (SEED2,)), ([], ()),
                           (["site1"], (SEED1,)), (["site1", "site2"], (SEED1, SEED2))):
        swarms[meta.info_hash] = {"seeds": len(holders), "leechers": 0, "completed": 0, "sites": holders,
                                  "holders": holders}
        doc, served_meta = await served(client)
        assert served_meta.url_list == seeds
        assert [s["url"] for s in doc["web_seeds"]] == list(seeds)
        assert doc["swarm"]["seeds"] == len(holders)
        assert (await served(client, web_seeds="0"))[1].url_list == ()


async def test_the_record_is_the_same_document_kept_or_not(repo, tmp_path):
    client, swarms = repo
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, FILES)
    await put(client, torrent, meta, files, web_seeds=[SEED1])
    swarms[meta.info_hash] = {"seeds": 1, "leechers": 2, "completed": 3, "sites": ["site1"], "holders": ["site1"]}
    first = await client.get(f"/api/datasets/{SAMPLE}")
    kept = await client.get(f"/api/datasets/{SAMPLE}")
    assert first.content_type == kept.content_type == "application/json"
    doc = json.loads(await kept.read())
    assert doc == json.loads(await first.read())
    assert doc["swarm"] == {"seeds": 1, "leechers": 2, "completed": 3, "sites": ["site1"]}
    assert doc["web_seeds"] == [{"site": "site1", "url": SEED1}] and doc["torrent_url"].endswith(".torrent")


def test_the_cache_forgets_everything_when_the_generation_moves_and_keeps_nothing_computed_before():
    now = [1]
    cache = CatalogCache(lambda: now[0], max_bytes=1000)
    gen = cache.fresh()
    cache.put(gen, "a", b"A", 1)
    assert cache.get("a") == b"A"
    now[0] = 2  # a commit
    stale = gen
    assert cache.fresh() == 2 and cache.get("a") is None
    cache.put(stale, "a", b"old", 3)  # computed from reads made before the commit
    assert cache.get("a") is None


def test_the_cache_is_bounded_by_size_least_recently_used_first():
    cache = CatalogCache(lambda: 1, max_bytes=1000)
    gen = cache.fresh()
    for key in "abcd":
        cache.put(gen, key, key, 250)
    cache.get("a")
    cache.put(gen, "e", "e", 250)  # over 1000: b, the least recently used, goes
    assert [k for k in "abcde" if cache.get(k) is not None] == ["a", "c", "d", "e"]
    cache.put(gen, "huge", "x", 251)  # more than a quarter of the whole: not kept
    assert cache.get("huge") is None and len(cache) == 4


BATCH = 1000


@pytest.fixture
def running_repo(tmp_path):
    """A `bt-repo run` with a 200-file dataset published by site1 (with a web seed) and held by it."""
    swarms: dict = {}
    with ThreadedServer(tracker_app(swarms)) as tracker, repo_process(tmp_path, tracker.url) as (url, _):
        torrent, meta, record = sized_torrent(SAMPLE, {f"AOD/file{i:05d}.pool.root.1": 64 << 20 for i in range(200)})
        status, answer = publish_sync(url, SAMPLE, publish_body(torrent, meta, record, web_seeds=[SEED1]))
        assert status == 201, answer
        swarms[meta.info_hash] = {"seeds": 1, "leechers": 0, "completed": 0, "sites": ["site1"], "holders": ["site1"]}
        yield url, metainfo.with_url_list(torrent, [SEED1])


async def test_a_batch_start_of_1000_concurrent_requests_is_answered_whole(running_repo):
    url, expected_torrent = running_repo
    # One connection per request, all at once, as 1,000 jobs starting on 1,000 nodes.
    connector = aiohttp.TCPConnector(limit=BATCH, force_close=True)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        async def ask(i: int) -> tuple[int, bytes]:
            path = f"/api/datasets/{SAMPLE}" if i % 2 else f"/datasets/{SAMPLE}.torrent"
            async with session.get(url + path) as resp:
                return resp.status, await resp.read()

        answers = await asyncio.gather(*(ask(i) for i in range(BATCH)), return_exceptions=True)
    failed = [a for a in answers if isinstance(a, BaseException) or a[0] != 200]
    assert not failed, f"{len(failed)} of {BATCH} failed, e.g. {failed[:3]}"
    records = {body for i, (_, body) in enumerate(answers) if i % 2}
    torrents = {body for i, (_, body) in enumerate(answers) if not i % 2}
    assert torrents == {expected_torrent}
    assert len(records) == 1
    doc = json.loads(records.pop())
    assert doc["name"] == SAMPLE and doc["file_count"] == 200 and len(doc["files"]) == 200
    assert doc["web_seeds"] == [{"site": "site1", "url": SEED1}]
    assert doc["swarm"] == {"seeds": 1, "leechers": 0, "completed": 0, "sites": ["site1"]}  # none "unknown"


def test_several_processes_on_one_port_each_serve_a_publish_at_once(tmp_path):
    """`bt-repo run --processes 2`: a publish answered by one process is what every process serves next
    (each keeps its own cache; the catalog's generation is the file's, shared)."""
    swarms: dict = {}
    with ThreadedServer(tracker_app(swarms)) as tracker, \
            repo_process(tmp_path, tracker.url, "--processes", "2") as (url, proc):
        wait_for(lambda: len(children(proc.pid)) == 2, timeout=20, what="two bt-repo processes")
        for k, files in enumerate((FILES, MORE)):
            torrent, meta, record = make_torrent(tmp_path / str(k), SAMPLE, files)
            status, answer = publish_sync(url, SAMPLE, publish_body(torrent, meta, record, new_version=bool(k)))
            assert status == 201 and answer["served"] == meta.info_hash, answer
            # A new connection each: the kernel spreads them over both processes.
            for _ in range(40):
                with urllib.request.urlopen(f"{url}/api/datasets/{SAMPLE}", timeout=10) as resp:
                    assert json.load(resp)["info_hash"] == meta.info_hash
                with urllib.request.urlopen(f"{url}/datasets/{SAMPLE}.torrent", timeout=10) as resp:
                    assert metainfo.parse(resp.read()).info_hash == meta.info_hash


def test_a_busy_catalog_is_an_unknown_generation_never_a_kept_value(tmp_path):
    db = Database(tmp_path / DB_FILE)
    try:
        before = db.generation()
        real = db._watch

        class Busy:
            """SQLite's answer while another connection recovers the WAL: a fault no test can cause
            at will beside a live connection (each holds the file shared)."""

            def execute(self, _sql: str) -> None:
                raise sqlite3.OperationalError("database is locked")

        db._watch = Busy()  # type: ignore[assignment]
        first, second = db.generation(), db.generation()
        assert len({before, first, second}) == 3  # each unknown one differs: nothing kept is used
        db._watch = real
        assert db.generation() == before
    finally:
        db.close()
