"""`btswarm plot`'s SVG in a real headless Chromium: drawn whole, nothing outside the picture.

A screenshot is left in /tmp (bt-get-plot.png) for a person to look at.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.browser.test_repo_browser import SHOTS, browser  # noqa: F401  (the Chromium fixture)
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
