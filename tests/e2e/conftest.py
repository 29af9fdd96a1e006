"""A real federation (`btswarm up`) for end-to-end tests: real processes on 127.0.0.x."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.support import Proc, command, wait_for


def get_json(url: str, timeout: float = 5.0):
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.load(resp)


class Federation:
    def __init__(self, proc: Proc, ready: dict, state: Path):
        self.proc = proc
        self.ready = ready
        self.state = state

    @property
    def repo(self) -> str:
        return self.ready["repo"]

    @property
    def tracker_url(self) -> str:
        return self.ready["tracker_url"]

    @property
    def dataset(self) -> str:
        return self.ready["datasets"][0]

    @property
    def source(self) -> Path:
        return Path(self.ready["data"]) / self.dataset

    def site_status(self, name: str) -> dict:
        site = next(s for s in self.ready["sites"] if s["name"] == name)
        return get_json(site["control_url"] + "/api/status")

    def seeding(self) -> dict[str, int]:
        return {s["name"]: len(self.site_status(s["name"])["seeds"]) for s in self.ready["sites"]}

    def bt_get(self, out: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([command("bt-get"), self.dataset, "--repo", self.repo, "-o", str(out), *args],
                              capture_output=True, text=True, timeout=timeout)


def start_federation(tmp: Path, *args: str, log_name: str = "up") -> Federation:
    ready_file = tmp / "ready.json"
    proc = Proc([command("btswarm"), "up", "--state", str(tmp / "state"), "--ready-file", str(ready_file), *args],
                tmp / f"{log_name}.log")
    try:
        wait_for(lambda: ready_file.exists() or proc.popen.poll() is not None, timeout=120,
                 what="btswarm up to be ready")
        if not ready_file.exists():
            raise AssertionError(f"btswarm up exited {proc.popen.returncode}:\n{proc.log()[-3000:]}")
    except BaseException:
        proc.stop()
        raise
    return Federation(proc, json.loads(ready_file.read_text()), tmp / "state")


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("federation")
    fed = start_federation(tmp, "--sites", "2", "--sample-files", "12", "--sample-size", "24M",
                           "--idle-ttl", "6s", "--heartbeat", "1s")
    yield fed
    assert fed.proc.stop(timeout=30) == 0, fed.proc.log()[-3000:]
