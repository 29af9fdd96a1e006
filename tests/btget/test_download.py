"""bt-get end to end against real seeds: bytes on disk, exit codes, the JSON document."""

from __future__ import annotations

import time

import pytest

from tests.btget.getsupport import bt_get, bt_get_json, same_bytes
from tests.support import free_port
from torrents import build

pytestmark = pytest.mark.slow

KEYS = {"dataset", "info_hash", "directory", "files", "bytes_total", "bytes_done", "bytes_downloaded", "bytes_redundant", "seconds", "rate",
        "first_byte_at", "sources", "hash_failures", "hash_failures_by_source", "banned", "web_seed_switches",
        "workers", "exit_status", "exit_code", "sources_over_time", "timeline"}
PARENT_STEPS = ["imported", "configured", "resolved", "parsed", "workers_started"]  # bt-get's own, in order
WORKER_STEPS = ["session", "torrent_added", "connected", "first_byte"]  # the worker's (another process)


def test_full_download_bytes_match_and_json_schema(dataset, seed, tmp_path):
    peer = seed()
    launched = time.time()
    result, doc = bt_get_json(str(dataset.torrent), "-o", str(tmp_path), "--peer", peer, "--timeout", "60")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # not a terminal: no progress display
    assert set(doc) == KEYS
    assert doc["dataset"] == dataset.name
    assert doc["info_hash"] == dataset.meta.info_hash
    assert doc["directory"] == str(tmp_path / dataset.name)
    assert doc["exit_status"] == "OK" and doc["exit_code"] == 0
    assert doc["bytes_total"] == doc["bytes_done"] == dataset.meta.total_size
    assert doc["bytes_downloaded"] >= dataset.meta.total_size
    assert doc["hash_failures"] == 0 and doc["hash_failures_by_source"] == {} and doc["banned"] == []
    assert doc["web_seed_switches"] == []  # the torrent has no web seeds
    assert isinstance(doc["seconds"], float) and doc["rate"] > 0
    # epoch seconds of the first payload byte: after launch, before the end
    assert isinstance(doc["first_byte_at"], float)
    # the start's steps, each after the one before, between launch and the first byte
    marks = doc["timeline"]
    for steps in (PARENT_STEPS, WORKER_STEPS):
        assert [marks[k] for k in steps] == sorted(marks[k] for k in steps), marks
    assert launched <= marks["imported"] and marks["first_byte"] == doc["first_byte_at"]
    assert launched < doc["first_byte_at"] <= time.time()
    assert [f["lfn"] for f in doc["files"]] == [f.lfn for f in dataset.meta.files]
    assert {f["status"] for f in doc["files"]} == {"complete"}
    assert doc["sources"][peer] > 0 and sum(doc["sources"].values()) == doc["bytes_downloaded"]
    for f in dataset.meta.files:
        assert same_bytes(dataset.root / f.lfn, tmp_path / dataset.name / f.lfn), f.lfn


def test_two_workers_each_fetch_their_share(dataset, seed, tmp_path):
    peer = seed()
    result, doc = bt_get_json(str(dataset.torrent), "-o", str(tmp_path), "--peer", peer, "--workers", "2")
    assert result.returncode == 0, result.stderr
    workers = doc["workers"]
    assert [w["worker"] for w in workers] == [1, 2]
    assert sum(w["bytes"] for w in workers) == dataset.meta.total_size
    assert sum(w["files"] for w in workers) == len(dataset.meta.files)
    for w in workers:
        # balanced by bytes; `done` counts whole boundary pieces, hence >=
        assert abs(w["bytes"] - dataset.meta.total_size / 2) < max(f.length for f in dataset.meta.files)
        assert w["done"] >= w["bytes"]
    for f in dataset.meta.files:
        assert same_bytes(dataset.root / f.lfn, tmp_path / dataset.name / f.lfn), f.lfn
    # What a worker got from its sibling is named for it, whichever of the two connected (the
    # incoming side sees an ephemeral port on the shared address: it knows the sibling by its peer id).
    assert set(doc["sources"]) <= {peer, "worker 1", "worker 2"}, doc["sources"]


def test_shards_into_one_directory_make_the_whole(dataset, seed, tmp_path):
    peer = seed()
    first, doc1 = bt_get_json(str(dataset.torrent), "-o", str(tmp_path), "--peer", peer, "--shard", "1/2")
    assert first.returncode == 0, first.stderr
    mine = {f["lfn"] for f in doc1["files"] if f["status"] == "complete"}
    skipped = {f["lfn"] for f in doc1["files"] if f["status"] == "skipped"}
    assert mine and skipped and mine | skipped == {f.lfn for f in dataset.meta.files}
    assert abs(doc1["bytes_total"] - dataset.meta.total_size / 2) < max(f.length for f in dataset.meta.files)
    for lfn in skipped:
        path = tmp_path / dataset.name / lfn
        assert not path.exists() or not same_bytes(dataset.root / lfn, path), f"{lfn} fetched by the wrong shard"

    second, doc2 = bt_get_json(str(dataset.torrent), "-o", str(tmp_path), "--peer", peer, "--shard", "2/2")
    assert second.returncode == 0, second.stderr
    assert {f["lfn"] for f in doc2["files"] if f["status"] == "complete"} == skipped
    for f in dataset.meta.files:
        assert same_bytes(dataset.root / f.lfn, tmp_path / dataset.name / f.lfn), f.lfn


def test_files_glob_fetches_only_the_selection_and_prints_a_summary(dataset, seed, tmp_path):
    peer = seed()
    result = bt_get(str(dataset.torrent), "-o", str(tmp_path), "--peer", peer,
                    "--files", "*._00002.pool.root.1", "--files", "*._0001[01].pool.root.1")
    assert result.returncode == 0, result.stderr
    wanted = {"DPD_IDCOMM.051203._00002.pool.root.1", "DPD_IDCOMM.051203._00010.pool.root.1",
              "DPD_IDCOMM.051203._00011.pool.root.1"}
    for f in dataset.meta.files:
        path = tmp_path / dataset.name / f.lfn
        if f.lfn in wanted:
            assert same_bytes(dataset.root / f.lfn, path), f.lfn
        else:
            assert not path.exists() or path.stat().st_size == 0 or not same_bytes(dataset.root / f.lfn, path)
    assert "3 complete, 9 skipped" in result.stdout
    assert peer in result.stdout  # the sources line
    assert "status     ok" in result.stdout


def test_no_seed_and_timeout_exits_4(dataset, tmp_path):
    result = bt_get(str(dataset.torrent), "-o", str(tmp_path), "--timeout", "2", "-q")
    assert result.returncode == 4, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"bt-get: error: {dataset.name}: not complete after --timeout 2 s (0 peers, 0 seeds); run again to resume")


def test_dead_tracker_is_named_in_the_timeout_error(dataset, tmp_path):
    port = free_port()  # nobody listens there
    data, _ = build.build_torrent(dataset.name, [(p.name, p) for p in sorted(dataset.root.iterdir())],
                                  announce=f"http://127.0.0.1:{port}/announce")
    torrent = tmp_path / "dead-tracker.torrent"
    torrent.write_bytes(data)
    result = bt_get(str(torrent), "-o", str(tmp_path / "out"), "--timeout", "3", "-q")
    assert result.returncode == 4, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"bt-get: error: {dataset.name}: not complete after --timeout 3 s (0 peers, 0 seeds; "
                           "tracker: "), last
    assert f"tracker http://127.0.0.1:{port}/announce: " in result.stderr


@pytest.mark.parametrize("args, message", [
    (["--shard", "3/2"], "bt-get: error: --shard: 3/2: K must be between 1 and N"),
    (["--workers", "0"], "bt-get: error: --workers: must be at least 1, got 0"),
    (["--peer", "nowhere"], "bt-get: error: --peer: 'nowhere' is not HOST:PORT"),
    (["--timeout", "soon"], "bt-get: error: --timeout: soon: not a duration (examples: 30, 30s, 10m, 2h)"),
    (["--bogus"], "bt-get: error: usage: No such option '--bogus'. Did you mean '--verbose'?"),
])
def test_bad_usage_exits_2(dataset, tmp_path, args, message):
    result = bt_get(str(dataset.torrent), "-o", str(tmp_path), *args, timeout=30)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == message
    assert result.stdout == ""


def test_max_rate_caps_the_whole_run_not_each_worker(dataset, seed, tmp_path):
    # Two workers under one cap of 8 MiB/s: 24 MiB takes at least ~3 s. Each worker at the whole
    # cap would take half that; a lower bound on the time cannot fail on a loaded machine.
    peer = seed()
    cap = 8 * 2**20
    result, doc = bt_get_json(str(dataset.torrent), "-o", str(tmp_path), "--peer", peer, "--workers", "2",
                              "--max-rate", "8MiB/s")
    assert result.returncode == 0, result.stderr
    assert doc["seconds"] >= 0.85 * dataset.meta.total_size / cap, doc["seconds"]
    for f in dataset.meta.files:
        assert same_bytes(dataset.root / f.lfn, tmp_path / dataset.name / f.lfn), f.lfn


def test_a_rate_that_is_not_one_is_refused_naming_the_flag(dataset, tmp_path):
    result = bt_get(str(dataset.torrent), "-o", str(tmp_path), "--max-rate", "fast")
    assert result.returncode == 2, result.stderr
    assert "--max-rate" in result.stderr and "not a rate (examples: 50MB/s, 400mbit" in result.stderr
    assert not (tmp_path / dataset.name).exists()
