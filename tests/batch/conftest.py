"""A real SLURM (slurm-wlm + munge, btswarm.testbed.localslurm) next to a real federation, for batch-array tests."""

from __future__ import annotations

import pytest

from btswarm.testbed import localslurm
from tests.e2e.conftest import start_federation


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """slurmctld + slurmd + munged of our own, stopped by PID whatever happens."""
    missing = localslurm.missing_commands()
    if missing:
        pytest.fail(f"SLURM not installed ({', '.join(missing)}): run scripts/install-system-deps.sh")
    cluster = localslurm.start(tmp_path_factory.mktemp("slurm"), timeout=60)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def shard_federation(tmp_path_factory):
    """Two sites serving 160 files of about 250 KB (pieces of 256 KiB): most pieces hold bytes of
    two shares, so the array tasks need many of the same pieces and can trade them."""
    fed = start_federation(tmp_path_factory.mktemp("federation"), "--sites", "2", "--sample-files", "160",
                           "--sample-size", "40M", "--heartbeat", "1s")
    yield fed
    assert fed.stop(timeout=30) == 0, fed.log()[-3000:]
