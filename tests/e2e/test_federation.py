"""End to end through `btswarm up`: on-demand seeding, T3-to-T3 sharing, idle stop, the repository."""

from __future__ import annotations

import json
import subprocess
import urllib.request
import xml.etree.ElementTree as ET

import pytest

from btswarm.trees import compare_trees
from tests.support import command, wait_for
from tests.e2e.conftest import get_json

pytestmark = pytest.mark.slow


def test_nothing_seeds_until_asked_then_bt_get_fetches_from_both_sites(federation, tmp_path):
    assert federation.seeding() == {"site1": 0, "site2": 0}

    result = federation.bt_get(tmp_path, "--json")

    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["exit_code"] == 0
    assert compare_trees(federation.source, tmp_path / federation.dataset) == []
    # The tracker asked both sites (every holder, the tracker's min_seeds) and both sent bytes.
    assert {"site1", "site2"} <= {k for k, v in doc["sources"].items() if v > 0}, doc["sources"]
    swarm = get_json(f"{federation.tracker_url}/api/swarms/{doc['info_hash']}")
    assert swarm["completed"] >= 1
    # Bytes per source over time, ending where `sources` ends; `btswarm plot` draws a band for each.
    series = doc["sources_over_time"]
    assert [s["t"] for s in series] == sorted(s["t"] for s in series) and series[-1]["t"] == doc["seconds"]
    assert series[-1]["sources"] == doc["sources"]
    (tmp_path / "result.json").write_text(result.stdout)
    plotted = subprocess.run([command("btswarm"), "plot", str(tmp_path / "result.json")], capture_output=True,
                             text=True, timeout=60)
    assert plotted.returncode == 0 and plotted.stdout.strip() == str(tmp_path / "result.svg"), plotted.stderr
    svg = ET.parse(tmp_path / "result.svg").getroot()
    bands = [e.get("data-name") for e in svg.iter("{http://www.w3.org/2000/svg}polygon")]
    assert sorted(bands) == sorted(doc["sources"]), bands


def test_second_t3_gets_bytes_from_the_first(federation, tmp_path):
    first_dir, second_dir = tmp_path / "t3a", tmp_path / "t3b"
    first = subprocess.Popen([command("bt-get"), federation.dataset, "--repo", federation.repo, "-o", str(first_dir),
                              "--seed-time", "60", "--json", "--listen", "127.0.0.50"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: compare_trees(federation.source, first_dir / federation.dataset) == [] or first.poll() is not None,
                 timeout=90, what="the first T3 to complete")
        assert first.poll() is None, first.stderr.read()
        # On loopback the sites alone can fill the second T3 before it meets the first: wait
        # until the tracker counts the first as a seed and the sites' seeds have idled out.
        info_hash = federation.info_hash(federation.dataset)
        wait_for(lambda: federation.seeding() == {"site1": 0, "site2": 0}
                 and get_json(f"{federation.tracker_url}/api/swarms/{info_hash}")["seeds"] >= 1,
                 timeout=60, interval=0.5, what="the first T3 to be the swarm's only seed")
        second = federation.bt_get(second_dir, "--json", "--listen", "127.0.0.51")
        assert second.returncode == 0, second.stderr
        doc = json.loads(second.stdout)
        assert compare_trees(federation.source, second_dir / federation.dataset) == []
        from_t3 = {k: v for k, v in doc["sources"].items() if not k.startswith("site")}
        assert any(k.startswith("127.0.0.50") and v > 0 for k, v in from_t3.items()), doc["sources"]
    finally:
        first.terminate()
        first.wait(20)


def test_repository_shows_dataset_sites_and_swarm(federation):
    doc = get_json(f"{federation.repo}/api/datasets/{federation.dataset}")
    assert set(doc["sites"]) == {"site1", "site2"}
    assert doc["file_count"] == 12
    with urllib.request.urlopen(f"{federation.repo}/datasets/{federation.dataset}") as resp:
        page = resp.read().decode()
    assert federation.dataset in page and "bt-get" in page


def test_idle_seeds_stop(federation):
    # Runs after the downloads above: with --idle-ttl 6s the sites drop their seeds.
    wait_for(lambda: federation.seeding() == {"site1": 0, "site2": 0}, timeout=60, interval=0.5,
             what="idle seeds to stop")


def test_a_site_left_out_sends_nothing_and_a_preferred_one_sends_most(federation, tmp_path):
    left_out = federation.bt_get(tmp_path / "a", "--json", "--exclude-site", "site2")
    assert left_out.returncode == 0, left_out.stderr
    doc = json.loads(left_out.stdout)
    assert compare_trees(federation.source, tmp_path / "a" / federation.dataset) == []
    assert doc["sites_chosen"] == {"preferred": [], "excluded": ["site2"]}
    assert not any(k.startswith(("site2", "web seed site2")) and v for k, v in doc["sources"].items()), doc["sources"]
    assert doc["sources"].get("site1", 0) > 0, doc["sources"]

    preferred = federation.bt_get(tmp_path / "b", "--json", "--prefer-site", "site2")
    assert preferred.returncode == 0, preferred.stderr
    doc = json.loads(preferred.stdout)
    assert compare_trees(federation.source, tmp_path / "b" / federation.dataset) == []
    # site1 waits while site2 sends: it can have sent only before site2 unchoked us, or while it choked us.
    # Without the preference the two sites, each capped alike, would send about half each.
    assert doc["sources"].get("site1", 0) <= doc["bytes_total"] // 4 < doc["sources"].get("site2", 0), doc["sources"]


def test_a_site_name_no_site_has_is_a_one_line_error(federation, tmp_path):
    result = federation.bt_get(tmp_path, "--exclude-site", "site9")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == "bt-get: error: --exclude-site: no site is named site9 (the sites: site1, site2)"
    assert not (tmp_path / federation.dataset).exists()
