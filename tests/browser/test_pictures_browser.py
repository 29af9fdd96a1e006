"""The pictures in a real headless Chromium: `btswarm plot`'s SVG, and the dataset page's swarm over
the last day (a real `bt-repo run`), drawn whole, nothing outside the picture or the page.

Screenshots are left in /tmp (bt-get-plot.png, repo-swarm-history.png, repo-swarm-history-375.png)
for a person to look at.
"""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from btrepo.app import DB_FILE
from btrepo.db import Database
from tests.browser.test_repo_browser import SHOTS, browser  # noqa: F401  (the Chromium fixture)
from tests.repo.repo_support import (SAMPLE, ThreadedServer, publish_body, publish_sync, repo_process, sized_torrent,
                                     tracker_app)
from tests.support import command

pytestmark = pytest.mark.browser

SOURCES = {"site1": 0.55, "site2": 0.3, "web seed site3": 0.1, "127.0.0.102:6881": 0.05}
TOTAL = 1_130_000_000


def run_doc() -> dict:
    """A 1.13 GB run: nothing for 1.2 s (the start), then the sources at their shares until 12 s."""
    samples = [{"t": 0.0, "sources": {}}]
    for k in range(1, 25):
        t = k * 0.5
        done = max(0.0, min(1.0, (t - 1.2) / 10.8))
        samples.append({"t": t, "sources": {s: int(TOTAL * share * done) for s, share in SOURCES.items() if done}})
    last = samples[-1]["sources"]
    return {"dataset": "data08_cos.00091949.physics_IDCosmic.merge.DPD_IDCOMM.o4_r653_p26_tid051203",
            "sources": last, "seconds": 12.0, "bytes_downloaded": sum(last.values()), "exit_status": "OK",
            "web_seed_switches": [{"after_s": 6.0, "to": "web seeds", "why": "..."}], "sources_over_time": samples}


def test_the_plot_is_drawn_whole_in_chromium(browser, tmp_path):  # noqa: F811
    (tmp_path / "run.json").write_text(json.dumps(run_doc()))
    done = subprocess.run([command("btswarm"), "plot", str(tmp_path / "run.json")], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    page = browser.new_page(viewport={"width": 800, "height": 600})
    try:
        page.goto((tmp_path / "run.svg").as_uri())
        svg = page.locator("svg")
        box = svg.bounding_box()
        assert box and box["width"] == 720
        bands = page.locator("polygon.series")
        assert bands.count() == 4
        for i in range(4):  # each band drawn inside the picture, with some area
            b = bands.nth(i).bounding_box()
            assert b and b["width"] > 500 and b["height"] > 1
            assert b["x"] >= box["x"] and b["x"] + b["width"] <= box["x"] + box["width"] + 0.5
        # Every text (title, ticks, legend) inside the picture: none runs off its edge.
        for t in page.locator("text").all():
            tb = t.bounding_box()
            assert tb and tb["x"] >= box["x"] and tb["x"] + tb["width"] <= box["x"] + box["width"], t.text_content()
        assert page.locator("text.legend").all_text_contents()[0].startswith("site1  ")
        assert page.locator("line.mark").count() == 1
        page.screenshot(path=str(SHOTS / "bt-get-plot.png"))
    finally:
        page.close()


def test_the_dataset_page_draws_the_swarm_of_the_last_day(browser, tmp_path):  # noqa: F811
    swarms: dict = {}
    with ThreadedServer(tracker_app(swarms)) as tracker, repo_process(tmp_path, tracker.url) as (url, _):
        torrent, meta, record = sized_torrent(SAMPLE, {f"AOD.{i:05d}.pool.root.1": 2 << 30 for i in range(20)})
        assert publish_sync(url, SAMPLE, publish_body(torrent, meta, record))[0] == 201
        swarms[meta.info_hash] = {"seeds": 2, "leechers": 3, "completed": 140, "sites": ["site1"],
                                  "holders": ["site1"]}
        # A day of samples every 10 min, written as the sampler writes them, from beside the running
        # repository (its own connection to the catalog, as `bt-repo choose` does): a batch start
        # seven hours ago, quiet before and after.
        now = time.time()

        async def write_day() -> None:
            outside = Database(tmp_path / "state" / DB_FILE)
            try:
                for k in range(144):
                    at = now - (143 - k) * 600
                    batch = math.exp(-((k - 100) / 9) ** 2)
                    row = (meta.info_hash, 1 + round(2 * batch), round(60 * batch), k)
                    await outside.record_swarms(at, [row], now - 86400)
            finally:
                outside.close()

        # In a thread of its own: Playwright's sync API holds this thread's event loop.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, write_day()).result(timeout=60)
        page = browser.new_page()
        try:
            for width, shot in ((1280, "repo-swarm-history.png"), (375, "repo-swarm-history-375.png")):
                page.set_viewport_size({"width": width, "height": 900})
                page.goto(f"{url}/datasets/{SAMPLE}")
                figure = page.locator("#swarm-history")
                assert figure.locator("polyline.series").count() == 2
                box = figure.locator("svg").bounding_box()
                assert box and box["width"] > 300 and box["x"] + box["width"] <= width
                assert page.evaluate("document.documentElement.scrollWidth") <= width
                assert figure.locator("text.legend").all_text_contents()[0] == "seeds  now 1, most 3"
                figure.screenshot(path=str(SHOTS / shot))
        finally:
            page.close()
