"""Benchmark wan_arrival: a second T3 arriving while a site's storage is frozen, stuck detection off and on.

    sudo .venv/bin/python scripts/bench_wan_arrival.py [--out DIR] [--quick] [--keep] [--runs N]
        [--rate 100mbit] [--client-rate 100mbit] [--rtt 0ms 40ms 100ms] [--client-rtt 0ms] [--link-mtu 65536]
        [--size 200M]

2 sites with separate replicas, site2's read through a bindfs FUSE mount
(as bench_wan_hung.py). The first T3 freezes site2's storage (bindfs
SIGSTOPped) a third of the way in; the second starts once the first is done
and stuck_after + 3 s after the freeze, with site1's seed still running or
stopped (idle); before (bt-server stuck_after = 0: detection off) and after
(stuck_after 10 s: the tracker drops site2's seed and starts site1's);
bound S/R from site1 alone. Bytes compared; a second T3 still running after
90 s is stopped and counted as 90 s (marked capped). The links, the RTTs
and the results (OUT/wan_arrival.json) as every wan scenario:
scripts/wanlib.py. Root only (a network namespace, FUSE).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import benchlib as bl
import wanlib

from btswarm.trees import compare_trees

STUCK_AFTER = 10.0  # bt-server's default [server] stuck_after
ARRIVAL_CAP = 90  # s: a second T3 still running then is stopped and counted as this long (marked)


def first_t3(fed: bl.Federation, procs: bl.Procs, work: Path, ds: dict, k: int, fuse_pid: int) -> float:
    """The first T3 (client k) freezes site2's storage a third of the way in and completes: when it froze it."""
    start = fed.link_bytes()
    first = procs.start(bl.bt_get_cmd(fed, ds["name"], bl.fresh_dir(work / "arrival-1"), bl.client_ip(k)),
                        work / "arrival-1.log", stdout=subprocess.DEVNULL)
    wanlib.wait_third(fed, start, ds["bytes"], first)
    os.kill(fuse_pid, signal.SIGSTOP)
    frozen = time.monotonic()
    if first.wait(900) != 0:
        raise SystemExit(f"arrival: the first bt-get exited {first.returncode}; see {work}/arrival-1.log")
    return frozen


def second_t3(fed: bl.Federation, procs: bl.Procs, work: Path, ds: dict, k: int) -> tuple[int | None, float]:
    """The second T3 (client k), capped at ARRIVAL_CAP: its exit code (None: still running) and seconds."""
    t0 = time.monotonic()
    second = procs.start(bl.bt_get_cmd(fed, ds["name"], bl.fresh_dir(work / "arrival-2"), bl.client_ip(k),
                                       "--timeout", f"{ARRIVAL_CAP}s"), work / "arrival-2.log",
                         stdout=open(work / "arrival-2.json", "wb"))
    try:
        code = second.wait(ARRIVAL_CAP + 30)
    except subprocess.TimeoutExpired:
        code = None
    return code, time.monotonic() - t0


def arrival_run(fed: bl.Federation, work: Path, ds: dict, k: int, fuse_pid: int, fuse_mount: Path,
                site1_idle: bool, detecting: bool) -> dict:
    """The first T3 freezes site2's storage a third of the way in; once it is done (and stuck_after + 3 s after
    the freeze) a second T3 starts; site2 is continued after it. The second one's time, sources, bytes."""
    info_hash = fed.info_hash(ds["name"])
    wanlib.uncached(fed, info_hash, fuse_mount)
    wanlib.seeds_everywhere(fed, info_hash)
    stuck_seen = None
    with bl.Procs() as procs:
        try:
            frozen = first_t3(fed, procs, work, ds, k, fuse_pid)
            if site1_idle:
                wanlib.restart_seed(fed, "site1", info_hash)  # its seed went idle: nothing of site1 in the swarm
            time.sleep(max(0.0, frozen + STUCK_AFTER + 3 - time.monotonic()))
            if detecting:
                stuck_seen = bool(any(s["info_hash"] == info_hash for s in fed.site_status("site2")["stuck"]))
            code, seconds = second_t3(fed, procs, work, ds, k + 1)
        finally:
            os.kill(fuse_pid, signal.SIGCONT)
    capped = code != 0
    doc = {} if capped else json.loads((work / "arrival-2.json").read_text() or "{}")
    bad = [] if capped else compare_trees(ds["root"], work / "arrival-2" / ds["name"])
    return {"seconds": ARRIVAL_CAP if capped else seconds, "capped": capped, "exit": code,
            "identical": not capped and not bad, "sources": doc.get("sources", {}), "stuck_seen": stuck_seen}


def arrival(fed: bl.Federation, work: Path, ds: dict, runs: int, rate: int, fuse_pid: int, fuse_mount: Path,
            detecting: bool) -> dict:
    rows: dict[str, list[dict]] = {"site1 seeding": [], "site1 idle": []}
    k = 0
    for run_no in range(runs):
        for variant, rs in rows.items():
            r = arrival_run(fed, work, ds, k % (wanlib.CLIENTS - 1), fuse_pid, fuse_mount, variant == "site1 idle",
                            detecting)
            k += 2
            rs.append(r)
            bl.log(f"arrival run {run_no + 1} {'after' if detecting else 'before'} {variant}: {r['seconds']:6.2f} s"
                   f"{' (capped)' if r['capped'] else ''}, identical {r['identical']}, sources {r['sources']}, "
                   f"stuck seen {r['stuck_seen']}")
            bl.wait_for(lambda: not fed.site_status("site2")["stuck"], 60, "site2 to recover", interval=0.2)
    bound = ds["bytes"] * 8 / rate
    return {"bound_s": bound, "median": {v: {"seconds": bl.median([r["seconds"] for r in rs]),
                                             "fraction": bound / bl.median([r["seconds"] for r in rs]),
                                             "capped": sum(r["capped"] for r in rs),
                                             "identical": all(r["identical"] for r in rs),
                                             "site2_bytes": [r["sources"].get("site2", 0) for r in rs]}
                                         for v, rs in rows.items()},
            "runs_detail": rows}


def run(work: Path, args, links: wanlib.Links, runs: int, doc: dict) -> None:
    ds = wanlib.wan_dataset(work, args, doc)
    doc["arrival"] = {}
    for mode, after in (("before", "0"), ("after", f"{STUCK_AFTER:g}s")):
        with wanlib.frozen_federation(work, ds, links, f"arr-{mode}-",
                                      env={"BTSWARM_SERVER_STUCK_AFTER": after}) as (fed, fuse_pid, mount):
            doc["arrival"][mode] = arrival(fed, work, ds, runs, links.rate, fuse_pid, mount, mode == "after")


def report(doc: dict) -> None:
    for mode, a in doc.get("arrival", {}).items():
        for variant, r in a["median"].items():
            print(wanlib.line(f"second T3, site2 frozen, {variant}, stuck detection {mode}: x S/R", r["fraction"],
                              f"{r['seconds']:.2f} s vs {a['bound_s']:.2f} s",
                              f"capped {r['capped']}, site2 bytes {r['site2_bytes']}, identical {r['identical']}"))


if __name__ == "__main__":
    sys.exit(wanlib.main(wanlib.Scenario("arrival", __doc__, run, report)))
