"""A federation whose datasets third-party clients fetch, and an open tracker for swarms of their own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clients import thirdparty
from tests.e2e.conftest import start_federation
from tests.support import Proc, command, free_port, http_ok, wait_for
from torrents import sample


def dataset_name(client: str) -> str:
    """Each client fetches a dataset of its own: one client's swarm never holds another's seed."""
    return f"user.btswarm.clients.{client}.v1"


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    """Two sites, seeds on demand, idle after 3 s, one seed per swarm (min_seeds 1)."""
    tmp = tmp_path_factory.mktemp("clients-federation")
    data = tmp / "data"
    for k, name in enumerate(thirdparty.NAMES):
        sample.generate(data, name=dataset_name(name), files=4, total_size=3 * 2**20, seed=7000 + k)
    fed = start_federation(tmp, "--sites", "2", "--data", str(data), "--idle-ttl", "3s", "--heartbeat", "1s",
                           env={"BTSWARM_TRACKER_MIN_SEEDS": "1"})
    yield fed
    assert fed.stop(timeout=30) == 0, fed.log()[-3000:]


@pytest.fixture(scope="module")
def open_tracker(tmp_path_factory):
    """A bt-tracker in open mode (any info-hash): the tracker of a swarm that is no federation's."""
    tmp = tmp_path_factory.mktemp("open-tracker")
    conf = tmp / "tracker.toml"
    conf.write_text('[tracker]\ninterval = 60\n')
    port = free_port()
    proc = Proc([command("bt-tracker"), "run", "--config", str(conf), "--listen", f"127.0.0.1:{port}", "--open"],
                tmp / "tracker.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: http_ok(url + "/healthz") or proc.popen.poll() is not None, 20, "the open tracker")
        assert proc.popen.poll() is None, proc.log()
        yield url
    finally:
        proc.stop()


@pytest.fixture
def client_home(tmp_path) -> Path:
    return tmp_path / "client"
