"""The dataset page's swarm over the last day: the tracker's swarms sampled into the catalog, drawn inline."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET

import pytest

from btrepo import keys, swarmchart
from btrepo.app import create_app
from btrepo.catalog import parse_publish
from btrepo.config import RepoConfig
from btrepo.db import Database
from tests.repo.repo_support import SAMPLE, SECRETS, make_torrent, publish, publish_body, tracker_app
from tests.repo.test_repo_pages import visible
from tests.support import until
from tests.tracker.helpers import announce, beat_body, heartbeat, query
from tracker.app import create_app as tracker_create_app
from tracker.config import TrackerConfig

FILES = {"a.root": 40_000, "b.root": 25_000}
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
async def repo(aiohttp_client, aiohttp_server, tmp_path):
    swarms: dict[str, dict] = {}
    tracker = await aiohttp_server(tracker_app(swarms))
    app = create_app(RepoConfig(state=str(tmp_path / "state"), tracker=str(tracker.make_url("")),
                                site_secrets=SECRETS, swarm_sample_interval=0.05))
    client = await aiohttp_client(app)
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, FILES)
    status, answer = await publish(client.session, str(client.make_url("/")), SAMPLE,
                                   publish_body(torrent, meta, files))
    assert status == 201, answer
    return client, swarms, meta


async def test_the_page_draws_the_sampled_swarm(repo):
    client, swarms, meta = repo
    page = await (await client.get(f"/datasets/{SAMPLE}")).text()
    assert "swarm-history" not in page  # nothing sampled yet: no picture, the page as before
    swarms[meta.info_hash] = {"seeds": 2, "leechers": 7, "completed": 3, "sites": ["site1"], "holders": ["site1"]}
    # Another swarm the tracker knows but the catalog does not: never kept.
    swarms["ab" * 20] = {"seeds": 9, "leechers": 9, "completed": 9, "sites": [], "holders": []}
    db = client.app[keys.DB]
    await until(lambda: _count(db, meta.info_hash, 3), timeout=20, what="three samples of the swarm")

    page = await (await client.get(f"/datasets/{SAMPLE}")).text()
    start = page.index('<figure class="swarm-history"')
    svg = ET.fromstring(page[page.index("<svg", start):page.index("</svg>", start) + len("</svg>")])
    lines = {p.get("data-name"): p.get("points") for p in svg.iter(SVG + "polyline")}
    assert set(lines) == {"seeds", "leechers"}
    legend = [t.text for t in svg.iter(SVG + "text") if t.get("class") == "legend"]
    assert legend[0] == "seeds  now 2, most 2" and legend[1].startswith("leechers  now 7, most 7; 0 completed")
    assert await db.swarm_history("ab" * 20, 0) == []


@pytest.fixture
async def federation(aiohttp_client, tmp_path):
    """A real tracker app and a repository sampling it every 50 ms, the dataset published by site1 and
    site2 → (repo client, tracker client, its Metainfo)."""
    tracker = await aiohttp_client(tracker_create_app(TrackerConfig(site_secrets=SECRETS, start_wait=0.5)))
    repo = await aiohttp_client(create_app(RepoConfig(state=str(tmp_path / "state"),
                                                      tracker=str(tracker.make_url("")), site_secrets=SECRETS,
                                                      swarm_sample_interval=0.05)))
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, FILES)
    for site in ("site1", "site2"):
        assert (await publish(repo.session, str(repo.make_url("/")), SAMPLE,
                              publish_body(torrent, meta, files, site=site), site=site))[0] in (200, 201)
    return repo, tracker, meta


def site_beat(site: str, ip: str, meta, uploaded: int, **kw) -> dict:
    h = bytes.fromhex(meta.info_hash)
    return {**beat_body(site, "http://127.0.0.1:9", [f"{ip}:6881"], [h], **kw), "uploaded": {meta.info_hash: uploaded}}


async def test_a_round_records_the_bytes_each_site_sent_from_the_tracker(federation):
    repo, tracker, meta = federation
    db = repo.app[keys.DB]
    assert await heartbeat(tracker, "site1", site_beat("site1", "127.0.0.2", meta, 30_000)) == 200
    assert await heartbeat(tracker, "site2", site_beat("site2", "127.0.0.3", meta, 0)) == 200
    h = bytes.fromhex(meta.info_hash)
    await announce(tracker, query(h, port=7001, left=0, event="completed"))  # a T3 completed: the swarm is listed
    last = await until(lambda: _last_served(db, meta.info_hash), timeout=20, what="a sample with the sites' bytes")
    assert last[1:] == (1, {"site1": 30_000, "site2": 0})
    # site2 sends 65,000 bytes and restarts: the tracker and the repository have its new count
    assert await heartbeat(tracker, "site2", site_beat("site2", "127.0.0.3", meta, 65_000)) == 200

    async def site2_at(n: int) -> bool:
        return [u for _, u in await db.site_history("site2", 0)][-1:] == [n]
    await until(lambda: site2_at(65_000), timeout=20, what="site2's new total sampled")
    assert (await db.site_history("site1", 0))[-1][1] == 30_000
    assert (await _last_served(db, meta.info_hash))[2] == {"site1": 30_000, "site2": 65_000}

    page = await (await repo.get(f"/datasets/{SAMPLE}")).text()
    start = page.index('<figure class="picture" id="bytes-served"')
    svg = ET.fromstring(page[page.index("<svg", start):page.index("</svg>", start) + len("</svg>")])
    legend = [t.text for t in svg.iter(SVG + "text") if t.get("class") == "legend"]
    assert legend == ["by sites  63.5 KiB", "by T3s  0 B, estimated from completions"]  # site2's 65,000 bytes
    assert "By T3s: estimated from completions" in page


async def _last_served(db: Database, info_hash: str) -> tuple | None:
    rows = await db.served_history(info_hash, 0)
    return rows[-1] if rows and rows[-1][2] else None


async def test_the_site_page_draws_its_egress_and_lists_what_it_seeds(federation, tmp_path):
    repo, tracker, meta = federation
    db = repo.app[keys.DB]
    xss = "<img src=x onerror=alert(1)>"
    torrent, other, files = make_torrent(tmp_path / "x", xss, {"x.root": 100})
    assert (await publish(repo.session, str(repo.make_url("/")), xss, publish_body(torrent, other, files)))[0] == 201
    stranger = "cd" * 20  # seeded at the site, unknown to this catalog
    beat = {**site_beat("site1", "127.0.0.2", meta, 10_000_000),
            "seeding": sorted([meta.info_hash, other.info_hash, stranger])}
    assert await heartbeat(tracker, "site1", beat) == 200

    async def samples(n: int) -> bool:
        return len(await db.site_history("site1", 0)) >= n
    await until(lambda: samples(1), timeout=20, what="site1 sampled")
    assert await heartbeat(tracker, "site1", {**beat, "uploaded": {meta.info_hash: 40_000_000}}) == 200

    async def grown() -> bool:
        return (await db.site_history("site1", 0))[-1][1] == 40_000_000
    await until(grown, timeout=20, what="site1's egress sampled")

    resp = await repo.get("/sites/site1")
    text = await resp.text()
    assert resp.status == 200, text
    seen = visible(text)
    assert "Tier T2" in seen and "Datasets 2" in seen and "up, 38.1 MiB sent since its start" in seen
    assert 'href="/search?site=site1"' in text
    start = text.index('<figure class="picture" id="egress"')
    svg = ET.fromstring(text[text.index("<svg", start):text.index("</svg>", start) + len("</svg>")])
    assert [p.get("data-name") for p in svg.iter(SVG + "polyline")] == ["egress"]
    legend = [t.text for t in svg.iter(SVG + "text") if t.get("class") == "legend"]
    assert legend[0].startswith("egress  now ") and "28.6 MiB in " in legend[0]
    # What it seeds, by name (escaped), then the hash the catalog does not know.
    listed = text[text.index('<ul class="seeding"'):text.index("</ul>", text.index('<ul class="seeding"'))]
    assert f'href="/datasets/{SAMPLE}"' in listed and "<img src=x" not in text
    assert visible(listed).strip() == f"{xss} {SAMPLE} {stranger} (not in this catalog)"
    assert '<a href="/sites/site1">site1</a>' in await (await repo.get("/sites")).text()


async def _count(db: Database, info_hash: str, n: int) -> bool:
    return len(await db.swarm_history(info_hash, 0)) >= n


async def test_samples_older_than_a_day_are_forgotten(tmp_path):
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, FILES)
    db = Database(tmp_path / "catalog.sqlite3")
    try:
        await db.publish(parse_publish(publish_body(torrent, meta, files), SAMPLE, "site1"))
        now = time.time()
        for hours_ago in (30, 23, 1):
            at = now - hours_ago * 3600
            assert await db.record_swarms(at, [(meta.info_hash, 1, hours_ago, 0, {"site1": hours_ago})],
                                          at - 24 * 3600, [("site1", hours_ago), ("nobody", 1)]) == 1
        assert [s[2] for s in await db.swarm_history(meta.info_hash, 0)] == [23, 1]
        assert [s[2] for s in await db.served_history(meta.info_hash, 0)] == [{"site1": 23}, {"site1": 1}]
        assert [n for _, n in await db.site_history("site1", 0)] == [23, 1]
        assert await db.site_history("nobody", 0) == []  # not a site of the catalog: not kept
    finally:
        db.close()


def test_the_picture_spans_the_day_and_needs_two_samples():
    now = 1_800_000_000.0
    assert swarmchart.render([(now - 60, 1, 2, 0)], now, "x") is None
    svg = ET.fromstring(swarmchart.render([(now - 6 * 3600, 1, 0, 10), (now - 60, 3, 5, 14)], now, "x"))
    ticks = [t.text for t in svg.iter(SVG + "text")]
    assert "-20 h" in ticks and "now" in ticks
    legend = [t.text for t in svg.iter(SVG + "text") if t.get("class") == "legend"]
    assert legend == ["seeds  now 3, most 3", "leechers  now 5, most 5; 4 completed in 6.0 h"]
