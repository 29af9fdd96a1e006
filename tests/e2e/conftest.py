"""A real federation (`btswarm up`) for end-to-end tests: real processes on 127.0.0.x.

Started and read through btswarm.federation, the machinery the benchmarks use too.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from btswarm import federation as fedlib
from btswarm.federation import get_json  # noqa: F401  (re-exported for the tests)
from tests.support import command


class Federation(fedlib.Federation):
    """The shared handle plus what tests need: the `btswarm up` process, its log, the first dataset."""

    def __init__(self, proc: subprocess.Popen, fed: fedlib.Federation, log_path: Path):
        super().__init__(fed.ready, proc.pid)
        self.proc = proc
        self.log_path = log_path

    @property
    def dataset(self) -> str:
        return self.datasets[0]

    @property
    def source(self) -> Path:
        return self.data / self.dataset

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 30.0) -> int | None:
        return fedlib.stop(self.proc, timeout)

    def bt_get(self, out: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([command("bt-get"), self.dataset, "--repo", self.repo, "-o", str(out), *args],
                              capture_output=True, text=True, timeout=timeout)


def start_federation(tmp: Path, *args: str, log_name: str = "up", env: Mapping[str, str] | None = None
                     ) -> Federation:
    command("btswarm")  # a clear failure when the console script is missing
    log_path = tmp / f"{log_name}.log"
    proc, fed = fedlib.launch(tmp / "state", list(args), ready_file=tmp / "ready.json", log_path=log_path,
                                  timeout=120, env=env)
    return Federation(proc, fed, log_path)


def running_federation(tmp_path_factory, name: str, *args: str, env: Mapping[str, str] | None = None):
    """A module fixture's body: `btswarm up ARGS` for the module's tests, stopped cleanly after them."""
    fed = start_federation(tmp_path_factory.mktemp(name), *args, env=env)
    yield fed
    assert fed.stop(timeout=30) == 0, fed.log()[-3000:]


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    # Each site sends at most 4 MB/s, so that a fetch lasts long enough for every site asked to join
    # it: unshaped, the first site's seed can send all 24 MB before the second one has started.
    yield from running_federation(tmp_path_factory, "federation", "--sites", "2", "--sample-files", "12",
                                  "--sample-size", "24M", "--idle-ttl", "6s", "--heartbeat", "1s",
                                  env={"BTSWARM_SERVER_UPLOAD_RATE_LIMIT": "4MB/s"})
