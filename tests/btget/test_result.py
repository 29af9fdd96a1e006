"""Pure pieces of the outcome: exit statuses, seeding policy, file status, sources, suggestions."""

from __future__ import annotations

import pytest

from torrents.errors import BtswarmError, ConfigError, NotFound, UsageError

from btget import errors
from btget.display import result
from btget.events import Progress
from btget.resolve import client
from btget.transfer.runstate import stop_seeding
from torrents.exitstatus import ExitStatus, status_for


@pytest.mark.parametrize("exc, status", [
    (UsageError("--shard", "x"), ExitStatus.USAGE),
    (ConfigError("f.toml", "x"), ExitStatus.USAGE),
    (NotFound("ds", "x"), ExitStatus.NOT_FOUND),
    (errors.Incomplete("ds", "x"), ExitStatus.INCOMPLETE),
    (errors.VerifyFailed("f", "x"), ExitStatus.VERIFY_FAILED),
    (errors.TransferError("f", "disk full"), ExitStatus.ERROR),
    (errors.RepoError("http://r", "x"), ExitStatus.ERROR),
    (BtswarmError("x", "y"), ExitStatus.ERROR),
    (errors.Interrupted("ds", "x"), ExitStatus.INTERRUPTED),
    (errors.ReplicaConflict("ds", "x"), ExitStatus.CONFLICT),
    (errors.Blocked("ds", "x"), ExitStatus.BLOCKED),
    (KeyboardInterrupt(), ExitStatus.INTERRUPTED),
    (ValueError("a bug"), ExitStatus.ERROR),
])
def test_status_for(exc, status):
    assert status_for(exc) is status


def test_exit_codes_are_fixed():
    # the same numbers for every command (docs/cli.md); a number never changes meaning
    assert {s.name: int(s) for s in ExitStatus} == {
        "OK": 0, "ERROR": 1, "USAGE": 2, "NOT_FOUND": 3, "INCOMPLETE": 4, "VERIFY_FAILED": 5, "CONFLICT": 6,
        "BLOCKED": 7, "PROBLEMS": 8, "UNREACHABLE": 9, "INTERRUPTED": 130}


@pytest.mark.parametrize("elapsed, uploaded, seed_time, seed_ratio, stop", [
    (0, 0, 0, 0, True),  # neither: stop at once
    (5, 0, 10, 0, False),
    (10, 0, 10, 0, True),
    (999, 50, 0, 1.0, False),  # ratio only: time does not matter
    (0, 100, 0, 1.0, True),
    (1, 100, 60, 1.0, True),  # both: whichever comes first
    (60, 0, 60, 1.0, True),
])
def test_stop_seeding(elapsed, uploaded, seed_time, seed_ratio, stop):
    assert stop_seeding(elapsed, uploaded, 100, seed_time, seed_ratio) is stop


@pytest.mark.parametrize("size, done, selected, verified, status", [
    (10, None, False, None, "skipped"), (10, 10, False, None, "skipped"), (10, 0, True, None, "missing"),
    (10, None, True, None, "missing"), (10, 4, True, None, "partial"), (10, 10, True, None, "complete"),
    (10, 10, True, True, "verified"), (10, 10, True, False, "corrupt"), (0, 0, True, None, "complete"),
])
def test_file_status(size, done, selected, verified, status):
    assert result.file_status(size, done, selected, verified) == status


def test_name_sources():
    raw = {"127.0.0.2:6881": 100, "127.0.0.3:6881": 50, "127.0.0.1:40001": 7, "127.0.0.1:55555": 3,
           "127.0.0.1:46020": 20, "127.0.0.2:51000": 2, "10.0.0.9:1": 1}
    # 127.0.0.1:55555: a connection from worker 3 (known by its peer id); 127.0.0.1:46020: a
    # qBittorrent on bt-get's own address, which is no worker of ours.
    workers = {"127.0.0.1:40001": 2, "127.0.0.1:55555": 3}
    named = result.name_sources(raw, {"127.0.0.2:6881": "site1"}, workers)
    assert named == {"site1": 102, "127.0.0.3:6881": 50, "127.0.0.1:46020": 20, "worker 2": 7, "worker 3": 3,
                     "10.0.0.9:1": 1}


def test_bad_sources():
    workers = [result.WorkerReport(1, 1, 1, Progress(1, peer_hash_failures={"127.0.0.9:6881": 2, "127.0.0.3:6881": 1},
                                                     banned=("127.0.0.9:6881",))),
               result.WorkerReport(2, 1, 1, Progress(2, peer_hash_failures={"127.0.0.9:6881": 1},
                                                     banned=("127.0.0.9:6881", "127.0.0.3:7000"))),
               result.WorkerReport(3, 1, 1, None)]
    failures, banned = result.bad_sources(workers, {"127.0.0.3:6881": "site2"}, {})
    assert failures == {"127.0.0.9:6881": 3, "site2": 1}
    assert banned == ["127.0.0.9:6881", "site2"]


def test_suggestions():
    assert client.search_queries("data08_cos.0009.physics") == ["data08_cos.0009.physics", "physics", "data08",
                                                                 "0009", "cos"]
    names = ["data08_cos.00091949.physics_IDCosmic", "data09_cos.00091949.physics_IDCosmic", "mc08.other"]
    assert client.suggest("data08_cos.00091949.physics_IDCosmix", names)[:2] == names[:2]


@pytest.mark.parametrize("announce, api", [
    ("http://127.0.0.1:6969/announce", "http://127.0.0.1:6969/api/sites"),
    ("http://t.example/x/announce?passkey=1", "http://t.example/x/api/sites"),
    ("udp://t.example:80", None),
    (None, None),
])
def test_tracker_api(announce, api):
    assert client.tracker_api(announce, "/api/sites") == api
