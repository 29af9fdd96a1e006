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
from tests.support import until

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
            assert await db.record_swarms(at, [(meta.info_hash, 1, hours_ago, 0)], at - 24 * 3600) == 1
        assert [s[2] for s in await db.swarm_history(meta.info_hash, 0)] == [23, 1]
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
