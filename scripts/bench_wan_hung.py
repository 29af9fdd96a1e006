"""Benchmark wan_hung: a site that hangs a third of the way in (SIGSTOP, or its storage frozen), against S/R.

    sudo .venv/bin/python scripts/bench_wan_hung.py [--out DIR] [--quick] [--keep] [--runs N]
        [--rate 100mbit] [--client-rate 100mbit] [--rtt 0ms 40ms 100ms] [--client-rtt 0ms] [--link-mtu 65536]
        [--size 200M]

2 sites with separate replicas, site2's read through a bindfs FUSE mount.
One T3 fetches from both; a third of the way in, site2's bt-server is
SIGSTOPped, or (separately) its bindfs is SIGSTOPped so that its storage
reads block while its control API and heartbeat go on; and once with no
fault. Bound: the whole dataset from site1 alone, S/R. Bytes compared. The
links, the RTTs and the results (OUT/wan_hung.json) as every wan scenario:
scripts/wanlib.py. Root only (a network namespace, FUSE).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import benchlib as bl
import wanlib

from btswarm.trees import compare_trees

TARGETS = {"hung_fraction": 0.7}


def faulted(fed: bl.Federation, work: Path, ds: dict, k: int, fault: str, target: int | None
            ) -> tuple[float, float | None]:
    """One bt-get (client k) from both sites; `target` (a PID, the `fault`) SIGSTOPped once a third has
    arrived, continued at the end: its seconds and when the fault came."""
    out = bl.fresh_dir(work / "hung-out")
    start = fed.link_bytes()
    fault_at = None
    with bl.Procs() as procs:
        t0 = time.monotonic()
        proc = procs.start(bl.bt_get_cmd(fed, ds["name"], out, bl.client_ip(k), "--json"), work / "hung.log",
                           stdout=open(work / "hung.json", "wb"))
        try:
            if target is not None:
                wanlib.wait_third(fed, start, ds["bytes"], proc)
                os.kill(target, signal.SIGSTOP)
                fault_at = time.monotonic() - t0
            code = proc.wait(900)
            seconds = time.monotonic() - t0
        finally:
            if target is not None:
                os.kill(target, signal.SIGCONT)
    if code != 0:
        raise SystemExit(f"hung {fault}: bt-get exited {code}; see {work}/hung.log")
    return seconds, fault_at


def hung_run(fed: bl.Federation, work: Path, ds: dict, k: int, fault: str, site_pid: int, fuse_pid: int) -> dict:
    """One bt-get from both sites; `fault` (none, sigstop, fuse) hits site2 once a third has arrived."""
    seconds, fault_at = faulted(fed, work, ds, k, fault, {"sigstop": site_pid, "fuse": fuse_pid}.get(fault))
    doc = json.loads((work / "hung.json").read_text())
    bad = compare_trees(ds["root"], work / "hung-out" / ds["name"])
    return {"seconds": seconds, "fault_at_s": fault_at, "identical": not bad, "differing": bad[:5],
            "sources": doc.get("sources", {})}


def site2_up(fed: bl.Federation) -> bool:
    """Whether the tracker sees site2's heartbeat."""
    return any(s.get("name") == "site2" and s.get("up")
               for s in bl.get_json(f"{fed.tracker_url}/api/sites").get("sites", []))


def hung(fed: bl.Federation, work: Path, ds: dict, runs: int, rate: int, fuse_pid: int, fuse_mount: Path) -> dict:
    info_hash = fed.info_hash(ds["name"])
    detail: dict[str, list[dict]] = {"none": [], "sigstop": [], "fuse": []}
    k = 0
    for run_no in range(runs):
        for fault in detail:
            site_pid = fed.site_pids()["site2"]
            if fault == "fuse":
                wanlib.uncached(fed, info_hash, fuse_mount)
            wanlib.seeds_everywhere(fed, info_hash)
            r = hung_run(fed, work, ds, k % wanlib.CLIENTS, fault, site_pid, fuse_pid)
            k += 1
            detail[fault].append(r)
            bl.log(f"hung run {run_no + 1} {fault:8s} {r['seconds']:6.2f} s (fault at {r['fault_at_s']}), "
                   f"identical {r['identical']}, sources {r['sources']}")
            # site2 back to normal before the next run: its heartbeat seen again by the tracker
            bl.wait_for(lambda: site2_up(fed), 60, "site2 up again at the tracker", interval=0.2)
    bound = ds["bytes"] * 8 / rate
    rows = {}
    for fault, rs in detail.items():
        t = bl.median([r["seconds"] for r in rs])
        rows[fault] = {"seconds": t, "fraction": bound / t, "identical": all(r["identical"] for r in rs)}
    return {"bound_s": bound, "median": rows, "runs_detail": detail}


def run(work: Path, args, links: wanlib.Links, runs: int, doc: dict) -> None:
    ds = wanlib.wan_dataset(work, args, doc)
    with wanlib.frozen_federation(work, ds, links, "replica") as (fed, fuse_pid, mount):
        doc["hung"] = hung(fed, work, ds, runs, links.rate, fuse_pid, mount)


def report(doc: dict) -> None:
    h = doc.get("hung", {})
    for fault, r in h.get("median", {}).items():
        print(wanlib.line(f"hung site ({fault}): fraction of S/R (site1 alone)", r["fraction"],
                          f"{r['seconds']:.2f} s vs {h['bound_s']:.2f} s",
                          f">= 0.7, bytes identical: {r['identical']}" if fault != "none" else "(no fault)"))


if __name__ == "__main__":
    sys.exit(wanlib.main(wanlib.Scenario("hung", __doc__, run, report, TARGETS)))
