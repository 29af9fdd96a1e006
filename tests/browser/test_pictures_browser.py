"""The pictures in a real headless Chromium: `btswarm plot`'s SVG, the dataset page's swarm and bytes
served over the last day, and a site page's egress (a real `bt-repo run`), drawn whole, nothing outside
the picture or the page.

Screenshots are left in /tmp (bt-get-plot.png, repo-swarm-history.png, repo-bytes-served.png,
repo-site-egress.png, each page's also at 375 px: *-375.png) for a person to look at.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

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


GIB = 2**30
FILES = {f"AOD.{i:05d}.pool.root.1": 2 * GIB for i in range(20)}


@contextlib.contextmanager
def repo_with_a_day(tmp_path) -> Iterator[tuple[str, str]]:
    """A real `bt-repo run` holding the dataset and a day of samples every 10 min → (its URL, the info-hash).

    The samples are written as the sampler writes them, from beside the running repository (its own
    connection to the catalog, as `bt-repo choose` does): a batch start seven hours ago, quiet before and
    after; each completion took the whole 40 GiB, 30% of it from site1 and site2 (site2 restarted after
    the batch's peak), the rest from T3s.
    """
    swarms: dict = {}
    sites: list[dict] = []
    with ThreadedServer(tracker_app(swarms, sites)) as tracker, repo_process(tmp_path, tracker.url) as (url, _):
        torrent, meta, record = sized_torrent(SAMPLE, FILES)
        assert publish_sync(url, SAMPLE, publish_body(torrent, meta, record))[0] == 201
        assert publish_sync(url, SAMPLE, publish_body(torrent, meta, record, site="site2"), site="site2")[0] == 200
        swarms[meta.info_hash] = {"seeds": 2, "leechers": 3, "completed": 140, "sites": ["site1"],
                                  "holders": ["site1"]}
        now = time.time()

        async def write_day() -> int:
            outside = Database(tmp_path / "state" / DB_FILE)
            completed, one, two = 0, 0, 0
            try:
                for k in range(144):
                    at = now - (143 - k) * 600
                    batch = math.exp(-((k - 100) / 9) ** 2)
                    done = round(3 * batch)
                    completed += done
                    one += int(done * meta.total_size * 0.2)
                    two = 0 if k == 110 else two + int(done * meta.total_size * 0.1)
                    row = (meta.info_hash, 1 + round(2 * batch), round(60 * batch), completed,
                           {"site1": one, "site2": two})
                    await outside.record_swarms(at, [row], now - 86400, [("site1", one + 10**9), ("site2", two)])
            finally:
                outside.close()
            return one + 10**9

        # In a thread of its own: Playwright's sync API holds this thread's event loop.
        with ThreadPoolExecutor(1) as pool:
            sent = pool.submit(asyncio.run, write_day()).result(timeout=60)
        sites.append({"name": "site1", "up": True, "seeding": [meta.info_hash], "uploaded": sent})
        yield url, meta.info_hash


def drawn_whole(figure, width: int) -> None:
    """The figure's picture is inside the page, and every text of it (title, ticks, legend) inside the picture."""
    box = figure.locator("svg").bounding_box()
    assert box and box["width"] > 300 and box["x"] >= 0 and box["x"] + box["width"] <= width
    for t in figure.locator("text").all():
        tb = t.bounding_box()
        assert tb and tb["x"] >= box["x"] - 0.5 and tb["x"] + tb["width"] <= box["x"] + box["width"] + 0.5, \
            t.text_content()
        assert tb["y"] >= box["y"] - 0.5 and tb["y"] + tb["height"] <= box["y"] + box["height"] + 0.5, \
            t.text_content()


def test_the_dataset_page_draws_the_swarm_and_the_bytes_served_of_the_last_day(browser, tmp_path):  # noqa: F811
    with repo_with_a_day(tmp_path) as (url, _):
        page = browser.new_page()
        try:
            for width, suffix in ((1280, ""), (375, "-375")):
                page.set_viewport_size({"width": width, "height": 900})
                page.goto(f"{url}/datasets/{SAMPLE}")
                assert page.evaluate("document.documentElement.scrollWidth") <= width
                figure = page.locator("#swarm-history")
                assert figure.locator("polyline.series").count() == 2
                drawn_whole(figure, width)
                assert figure.locator("text.legend").all_text_contents()[0] == "seeds  now 1, most 3"
                figure.screenshot(path=str(SHOTS / f"repo-swarm-history{suffix}.png"))

                served = page.locator("#bytes-served")
                bands = served.locator("polygon.series")
                assert bands.count() == 2
                for i in range(2):  # each band drawn, with some area
                    b = bands.nth(i).bounding_box()
                    assert b and b["width"] > 50 and b["height"] > 1
                drawn_whole(served, width)
                legend = served.locator("text.legend").all_text_contents()
                assert legend[0].startswith("by sites  ") and legend[1].endswith(", estimated from completions")
                assert "estimated from completions" in served.locator("figcaption").text_content()
                served.screenshot(path=str(SHOTS / f"repo-bytes-served{suffix}.png"))
        finally:
            page.close()


def test_the_site_page_draws_its_egress_and_lists_what_it_seeds(browser, tmp_path):  # noqa: F811
    with repo_with_a_day(tmp_path) as (url, _):
        page = browser.new_page()
        try:
            page.goto(f"{url}/sites")
            page.locator("a", has_text="site1").first.click()
            page.wait_for_url(f"{url}/sites/site1")
            for width, suffix in ((1280, ""), (375, "-375")):
                page.set_viewport_size({"width": width, "height": 900})
                page.goto(f"{url}/sites/site1")
                assert page.evaluate("document.documentElement.scrollWidth") <= width
                figure = page.locator("#egress")
                assert figure.locator("polyline.series").count() == 1
                line = figure.locator("polyline.series").bounding_box()
                assert line and line["width"] > 50 and line["height"] > 10  # the batch's rise and fall
                drawn_whole(figure, width)
                assert figure.locator("text.legend").all_text_contents()[0].startswith("egress  now 0 MB/s, most ")
                assert page.locator("#seeding li").all_text_contents() == [SAMPLE]
                page.screenshot(path=str(SHOTS / f"repo-site-egress{suffix}.png"), full_page=True)
        finally:
            page.close()
