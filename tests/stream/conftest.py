"""Real ROOT files (scikit-hep-testdata) published as a dataset by a real federation, and `bt-get --serve`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import urllib.request
from pathlib import Path

import pytest

from btswarm.federation import wait_for
from tests.e2e.conftest import start_federation
from tests.support import command
from torrents.procs import stop

DATASET = "user.btswarm.skhep_testdata"
# Real files written by ROOT: an ATLAS-style ntuple with 157 branches, a CMS-style tree, two small ones.
ROOT_FILES = ("uproot-issue63.root", "uproot-issue96.root", "uproot-HZZ.root", "uproot-Zmumu.root")


def testdata(name: str) -> Path:
    skhep_testdata = pytest.importorskip("skhep_testdata", reason="pip install -e '.[test]' (scikit-hep-testdata)")
    return Path(skhep_testdata.data_path(name))


@pytest.fixture(scope="session")
def root_data(tmp_path_factory) -> Path:
    """DATA/user.btswarm.skhep_testdata/ holding the ROOT files (a directory is a dataset to btswarm up)."""
    data = tmp_path_factory.mktemp("rootdata")
    (data / DATASET).mkdir()
    for name in ROOT_FILES:
        shutil.copyfile(testdata(name), data / DATASET / name)
    return data


@pytest.fixture(scope="module")
def root_federation(tmp_path_factory, root_data):
    fed = start_federation(tmp_path_factory.mktemp("federation"), "--sites", "2", "--data", str(root_data),
                           "--heartbeat", "1s")
    try:
        assert fed.datasets == (DATASET,)
        yield fed
    finally:
        code = fed.stop(timeout=30)  # also when the check above fails: no federation outlives the tests
    assert code == 0, fed.log()[-3000:]


class Served:
    """A running `bt-get TARGET --serve 127.0.0.1:0 --json`: its URL, its status, stopped by PID."""

    def __init__(self, args: list[str], log_path: Path, env: dict | None = None, timeout: float = 60):
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen([command("bt-get"), *args, "--serve", "127.0.0.1:0", "--json", "-v"],
                                     stdout=subprocess.PIPE, stderr=self._log, env={**os.environ, **(env or {})},
                                     start_new_session=True)
        line: list[bytes] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if not line or not line[0]:
            self.stop()
            raise AssertionError(f"bt-get --serve did not start: {log_path.read_text(errors='replace')[-2000:]}")
        self.info = json.loads(line[0])
        self.url = self.info["url"]  # http://127.0.0.1:PORT/NAME/
        self.base = self.url.rstrip("/").rsplit("/", 1)[0]

    def status(self) -> dict:
        with urllib.request.urlopen(self.base + "/", timeout=10) as resp:
            return json.load(resp)

    def wait(self, predicate, timeout: float = 30, what: str = "server state"):
        return wait_for(lambda: predicate(self.status()), timeout, what, interval=0.1)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int | None:
        code = stop(self.proc, timeout=20)
        self.proc.stdout.close()
        self._log.close()
        return code


@pytest.fixture
def serve(tmp_path):
    """serve(args...) starts `bt-get ARGS --serve`; every server is stopped at teardown and must exit 0."""
    started: list[Served] = []

    def start(*args: str, env: dict | None = None) -> Served:
        s = Served(list(args), tmp_path / f"serve-{len(started)}.log", env=env)
        started.append(s)
        return s

    yield start
    codes = [(s.stop(), s) for s in started]
    for code, s in codes:
        assert code == 0, s.log()[-2000:]
