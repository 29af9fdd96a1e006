"""`btswarm up` again on the same state directory with other data: bt-get gets this run's dataset."""

from __future__ import annotations

import json

import pytest

from btswarm.trees import compare_trees
from tests.e2e.conftest import start_federation

pytestmark = pytest.mark.slow


def test_second_run_on_the_same_state_serves_the_new_data_and_tracker(tmp_path):
    first = start_federation(tmp_path, "--sites", "2", "--sample-files", "4", "--sample-size", "4M", log_name="up1")
    first_hash = json.loads(first.bt_get(tmp_path / "out1", "--json").stdout)["info_hash"]
    assert first.stop(timeout=30) == 0

    # Same state directory (catalog, torrents), other sample size: new files, new ports, new tracker.
    second = start_federation(tmp_path, "--sites", "2", "--sample-files", "4", "--sample-size", "6M",
                              log_name="up2")
    try:
        assert second.ready.tracker != first.ready.tracker
        result = second.bt_get(tmp_path / "out2", "--json", "--timeout", "60")
        assert result.returncode == 0, result.stderr
        doc = json.loads(result.stdout)
        assert doc["info_hash"] != first_hash
        assert compare_trees(second.source, tmp_path / "out2" / second.dataset) == []
    finally:
        assert second.stop(timeout=30) == 0
