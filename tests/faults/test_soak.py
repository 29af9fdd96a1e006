"""A short soak through `btswarm up`: 20 bt-get runs (3 at a time) fetch and delete a small dataset;
afterwards no bt-get is left, the daemons' fds and memory are back near their start, seeds stop."""

from __future__ import annotations

import concurrent.futures
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from btswarm.trees import compare_trees
from tests.faults.conftest import children, fd_count, rss_kib, service_pid, start_federation
from tests.support import command, wait_for
from torrents import procs

pytestmark = pytest.mark.slow

CLIENTS = 20
AT_ONCE = 3
BUDGET = 75.0  # seconds for all the clients
LABELS = ("tracker", "repo", "site1", "site2")


def bt_get_pids(under: Path) -> set[int]:
    """bt-get processes (and their forked workers) writing under `under`: not other people's."""
    out = set()
    for pid in procs.pids():
        argv = procs.cmdline(pid)
        if any(a.endswith("/bt-get") for a in argv[:2]) and any(str(under) in a for a in argv):
            out.add(pid)
    return out


def test_soak(tmp_path_factory, record_property):
    tmp = tmp_path_factory.mktemp("soak")
    fed = start_federation(tmp, "--sites", "2", "--sample-files", "6", "--sample-size", "4M",
                           "--idle-ttl", "3s", "--heartbeat", "1s")
    try:
        pids = {label: service_pid(fed, label) for label in LABELS}
        # Warm-up run: first-use allocations (libtorrent session, caches) are not a leak.
        warm = fed.bt_get(tmp / "warm", "-q", timeout=60)
        assert warm.returncode == 0, warm.stderr
        shutil.rmtree(tmp / "warm")
        wait_for(lambda: fed.seeding() == {"site1": 0, "site2": 0}, timeout=30, interval=0.2, what="idle seeds")
        before = {label: (fd_count(pid), rss_kib(pid)) for label, pid in pids.items()}
        deadline = time.monotonic() + BUDGET

        def client(i: int) -> tuple[int, str]:
            out = tmp / f"client{i}"
            remaining = max(10.0, deadline - time.monotonic())
            result = subprocess.run([command("bt-get"), fed.dataset, "--repo", fed.repo, "-o", str(out), "-q",
                                     "--listen", f"127.0.0.{70 + i % AT_ONCE}"],
                                    capture_output=True, text=True, timeout=remaining)
            bad = compare_trees(fed.source, out / fed.dataset) if result.returncode == 0 else ["not run"]
            shutil.rmtree(out, ignore_errors=True)
            return result.returncode, result.stderr if bad else ""

        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
            results = list(pool.map(client, range(CLIENTS)))
        took = time.monotonic() - started
        assert [code for code, _ in results] == [0] * CLIENTS, [err for _, err in results if err][:3]
        assert all(not err for _, err in results)

        wait_for(lambda: not bt_get_pids(tmp), timeout=10, what="no bt-get process left")
        wait_for(lambda: fed.seeding() == {"site1": 0, "site2": 0}, timeout=30, interval=0.2,
                 what="seeds to stop after idle_ttl")
        # Connections of the last clients close within a few seconds; fds settle.
        wait_for(lambda: all(fd_count(pid) <= before[label][0] + 5 for label, pid in pids.items()),
                 timeout=20, interval=0.5, what="daemons' fds back near their start")
        after = {label: (fd_count(pid), rss_kib(pid)) for label, pid in pids.items()}
        report = {label: {"fds": (before[label][0], after[label][0]), "rss_kib": (before[label][1], after[label][1])}
                  for label in LABELS}
        record_property("soak", report)
        print(f"soak: {CLIENTS} clients in {took:.1f} s; " + "; ".join(
            f"{k} fds {v['fds'][0]}->{v['fds'][1]} rss {v['rss_kib'][0]}->{v['rss_kib'][1]} KiB"
            for k, v in report.items()))
        for label in LABELS:
            assert service_pid(fed, label) == pids[label], f"{label} restarted during the soak"
            growth = after[label][1] - before[label][1]
            assert growth < 25 * 1024, f"{label}: RSS grew by {growth} KiB over {CLIENTS} clients"
        assert not any(p for p in children(fed.proc.pid) if p not in pids.values())
    finally:
        assert fed.stop(timeout=30) == 0, fed.log()[-3000:]
