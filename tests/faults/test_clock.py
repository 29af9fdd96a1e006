"""A site whose clock is wrong: site2's bt-server runs 10 minutes ahead (libfaketime, Debian `faketime`).

Every request it signs is refused as stale (the limit is 300 s). Before,
site2's log blamed the secret at every heartbeat, the tracker said nothing
and the repository said it at INFO. Now each side says the clock and the
offset once: site2 (`this host's clock is 600 s ahead of the tracker's`),
the tracker and the repository at WARNING naming site2; site2's
/api/status shows its offset to each; site1 serves as before.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.deploy.deployment import Deployment
from tests.support import command, wait_for
from torrents import sample
from btswarm.trees import compare_trees

pytestmark = pytest.mark.slow

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1")  # MT: bt-server runs threads
AHEAD = 600
BEATS = 6  # refused heartbeats to wait for: each would have said it again before


def offset_lines(log: str, pattern: str) -> list[str]:
    return [line for line in log.splitlines() if re.search(pattern, line)]


def metric_sum(text: str, name: str, label: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") and label in line)


def test_a_site_ten_minutes_ahead_is_told_its_clock_once_and_the_others_serve(tmp_path):
    if not LIBFAKETIME.exists():
        pytest.skip("needs libfaketime (Debian faketime; scripts/install-system-deps.sh installs it)")
    sample.generate(tmp_path / "data", files=6, total_size=6 * 2**20)
    fed = Deployment(tmp_path / "fed", tmp_path / "data", sites=2)
    fed.write()
    ahead = {"LD_PRELOAD": str(LIBFAKETIME), "FAKETIME": f"+{AHEAD}", "DONT_FAKE_MONOTONIC": "1"}
    try:
        for label in ("tracker", "repo", "site1", "site2"):
            fed.start(label, env=ahead if label == "site2" else None)
            fed.wait_ready(label)
        site1, site2 = (fed.control_url(s) for s in fed.sites)

        def refused() -> dict | None:
            doc = fed.get_json(f"{site2}/api/status")
            beats = metric_sum(fed.get(f"{site2}/metrics").decode(), "btswarm_server_heartbeats_total", '"401"')
            offsets = doc["clock_offset_s"]
            return doc if beats >= BEATS and len(offsets) == 2 and all(v is not None for v in offsets.values()) \
                else None

        status = wait_for(refused, timeout=90, what=f"{BEATS} heartbeats and a publish of site2 refused", interval=0.2)
        assert sorted(status["clock_offset_s"]) == [f"repository {fed.repo_url}", f"tracker {fed.tracker_url}"]
        assert set(status["clock_offset_s"].values()) == {AHEAD}, status["clock_offset_s"]
        assert any(re.fullmatch(rf"this host's clock is 600 s ahead of the tracker's at {fed.tracker_url}: .*", p)
                   for p in status["problems"]), status["problems"]

        site2_log = fed.procs["site2"].log()
        said = offset_lines(site2_log, r"this host's clock is 600 s ahead of the tracker's")
        assert len(said) == 1 and " WARNING " in said[0], site2_log[-3000:]
        assert len(offset_lines(site2_log, r"this host's clock is 600 s ahead of the repository's")) == 1
        assert offset_lines(site2_log, "secret") == [], site2_log[-3000:]  # no longer blamed
        for label in ("tracker", "repo"):
            log = fed.procs[label].log()
            # Here from site2's whole-second timestamps: ±1 s.
            lines = offset_lines(log, r"site site2: its clock is (599|60[01]) s ahead of this host's")
            assert len(lines) == 1 and " WARNING " in lines[0], (label, log[-3000:])

        # site1 keeps its clock and its part: in step with both, published, and a bt-get completes from it.
        one = fed.get_json(f"{site1}/api/status")
        assert all(abs(v) <= 1 for v in one["clock_offset_s"].values()), one["clock_offset_s"]
        def published() -> list[str] | None:
            doc = fed.get_json(f"{fed.repo_url}/api/datasets")
            return [d["name"] for d in doc["datasets"] if d.get("sites") == ["site1"]] or None
        [name] = wait_for(published, timeout=60, what="site1's dataset in the repository", interval=0.2)
        out = subprocess.run([command("bt-get"), name, "--repo", fed.repo_url, "-o", str(tmp_path / "out"),
                              "--timeout", "90"], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-3000:]
        assert compare_trees(tmp_path / "data" / name, tmp_path / "out" / name) == []
    finally:
        fed.stop()
