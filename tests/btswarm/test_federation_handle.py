"""btswarm.federation against a real `btswarm up`: the handle tests and benchmarks share."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from btswarm.federation import Federation, LaunchError, launch, wait_for
from btswarm.ready import Ready, SiteInfo
from torrents import procs
from torrents.procs import children, stop

pytestmark = pytest.mark.slow


def test_launch_reads_the_ready_document_finds_the_parts_and_stop_leaves_no_process(tmp_path):
    ready_file = tmp_path / "ready.json"
    proc, fed = launch(tmp_path / "state", ["--sites", "1", "--sample-size", "4M"], ready_file=ready_file,
                       log_path=tmp_path / "up.log", timeout=120)
    try:
        doc = json.loads(ready_file.read_text())
        assert fed.up_pid == proc.pid
        assert (fed.repo, fed.tracker_url, fed.announce) == (doc["repo"], doc["tracker_url"], doc["tracker"])
        assert [vars(s) for s in fed.sites] == doc["sites"] and [s.name for s in fed.sites] == ["site1"]
        assert list(fed.datasets) == doc["datasets"] and len(fed.datasets) == 1
        assert (fed.data, fed.state) == (Path(doc["data"]), Path(doc["state"]))
        assert fed.data.is_dir() and (fed.data / fed.datasets[0]).is_dir()

        status = fed.site_status("site1")
        assert [d["name"] for d in status["datasets"]] == list(fed.datasets)
        assert fed.seeding() == {"site1": 0}  # nothing seeds until asked
        assert fed.uploaded_total() == 0
        assert len(fed.info_hash(fed.datasets[0])) == 40
        assert fed.torrent(fed.datasets[0]).startswith(b"d")

        parts = fed.pids()
        assert set(parts) == {"tracker", "repo", "site1"}
        assert fed.site_pids() == {"site1": parts["site1"]}
        with open(f"/proc/{parts['site1']}/cmdline", "rb") as f:
            assert any(a.endswith(b"bt-server") for a in f.read().split(b"\0"))
        assert set(parts.values()) <= set(children(proc.pid))
    finally:
        code = stop(proc, timeout=30)
    assert code == 0, (tmp_path / "up.log").read_text()[-3000:]
    # btswarm up stops its parts before it exits; they are reparented, so wait (bounded) for each PID.
    for pid in [proc.pid, *parts.values()]:
        wait_for(lambda: not procs.running(pid), timeout=10, what=f"pid {pid} to be gone")
    assert not os.path.exists(ready_file)


def test_launch_fails_with_the_log_tail_when_btswarm_up_exits_first(tmp_path):
    with pytest.raises(LaunchError) as info:
        launch(tmp_path / "state", ["--sites", "0"], ready_file=tmp_path / "ready.json",
               log_path=tmp_path / "up.log", timeout=60)
    assert info.value.subject == "btswarm up"
    assert info.value.problem.startswith("exited ")
    assert "--sites" in str(info.value)  # the log tail: btswarm up's own error


def test_federation_works_from_the_document_alone():
    fed = Federation(Ready(tracker="http://x/announce", tracker_url="http://127.0.0.1:2", trackers=("http://x/announce",),
                           tracker_urls=("http://127.0.0.1:2",), redis="", repo="http://127.0.0.1:1",
                           sites=(SiteInfo("site1", "127.0.0.2:3", "http://127.0.0.2:4"),), datasets=("d",),
                           state=Path("/s"), data=Path("/s/data")))
    assert fed.site("site1").peer == "127.0.0.2:3"
    with pytest.raises(KeyError):
        fed.site("site9")
    with pytest.raises(Exception, match="no btswarm up PID"):
        fed.site_pids()
