"""Benchmark coldstart: bt-get launch to first payload byte when no site is seeding yet.

    .venv/bin/python scripts/bench_coldstart.py [--out DIR] [--quick] [--keep] [--runs 5]

A real federation (`btswarm up --sites 2 --idle-ttl 2s`) holding two
datasets: 10 files (10 MB) and 10,000 files (40 MB). Before each run the
benchmark waits until the sites report no seeds and the tracker's swarm has
none, so every run pays the whole on-demand path: process start, repository
resolve, announce, the tracker asking the sites to start seeds, the seeds
starting, the connection. Time to first byte = the --json document's
first_byte_at minus the launch time (both epoch seconds on this host).
Targets: <= 0.5 s (10 files), <= 1 s (10,000 files); median of the runs.

Breakdown (medians): `process` = a bare `bt-get --help` (interpreter and
imports); `resolve` = GET /api/datasets/NAME and the .torrent from here;
`seed up` = launch to the first site's seed `started` time (GET /api/status),
which includes process start, resolve, the announce and the site's seed
start; `connect` = seed up to first byte.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.error
from pathlib import Path

import benchlib as bl

TARGETS = {"10 files": 0.5, "10000 files": 1.0}
SETS = {"10 files": ("bench.coldstart.10files", 10, 10 * 2**20),
        "10000 files": ("bench.coldstart.10000files", 10_000, 40 * 2**20)}


def swarm_seeds(fed: bl.Federation, info_hash: str) -> int:
    try:
        return int(bl.get_json(f"{fed.tracker_url}/api/swarms/{info_hash}")["seeds"])
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return 0
        raise


def quiet(fed: bl.Federation, info_hash: str) -> bool:
    """No site seeds and the tracker lists no seed (bounded waits); False if the tracker keeps a stale one."""
    bl.wait_no_seeds(fed)
    try:
        bl.wait_for(lambda: swarm_seeds(fed, info_hash) == 0, 15, "the tracker to list no seeds", interval=0.2)
    except SystemExit:
        return False
    return True


def one_run(fed: bl.Federation, work: Path, name: str, info_hash: str) -> dict:
    out = bl.fresh_dir(work / "out")
    started: list[float] = []

    def watch_seeds() -> None:  # the sites' seed start times, read while bt-get runs (seeds stop when idle)
        deadline = time.monotonic() + 300
        while not started and not done.is_set() and time.monotonic() < deadline:
            started.extend(s["started"] for site in fed.sites for s in fed.site_status(site.name)["seeds"]
                           if s["info_hash"] == info_hash)
            done.wait(0.05)

    done = threading.Event()
    watcher = threading.Thread(target=watch_seeds)
    launched = time.time()
    watcher.start()
    try:
        t = bl.timed(bl.bt_get_cmd(fed, name, out, bl.client_ip(0), "--workers", "1"), 300)
    finally:
        done.set()
        watcher.join()
    doc = json.loads(t.stdout)
    first = doc["first_byte_at"]
    seed_up = min(started) - launched if started else float("nan")
    return {"first_byte_s": first - launched, "seed_up_s": seed_up, "connect_s": first - launched - seed_up,
            "total_s": t.seconds, "seeds_started": len(started)}


def process_start() -> float:
    return bl.timed([str(bl.BIN / "bt-get"), "--help"], 60).seconds


def resolve(fed: bl.Federation, name: str) -> float:
    t = time.monotonic()
    bl.get_json(f"{fed.repo}/api/datasets/{name}")
    fed.torrent(name)
    return time.monotonic() - t


def run(work: Path, runs: int) -> dict:
    from torrents import sample

    results: dict[str, dict] = {}
    restarts = 0
    for label, (name, files, size) in SETS.items():
        data = work / label.replace(" ", "-")
        sample.generate(data, name=name, files=files, total_size=size)
        rs: list[dict] = []
        while len(rs) < runs:
            # A federation per dataset; a fresh one when the tracker keeps a seed
            # entry after the site stopped that seed (it would expire only after
            # two announce intervals, and a run would then not start a seed).
            with bl.federation(work / "fed", data, sites=2, idle_ttl="2s", heartbeat="1s") as fed:
                info_hash = fed.info_hash(name)
                while len(rs) < runs and quiet(fed, info_hash):
                    rs.append(one_run(fed, work, name, info_hash))
                    r = rs[-1]
                    bl.log(f"{label}: first byte {r['first_byte_s']:.3f} s (seed up {r['seed_up_s']:.3f} s, "
                           f"{r['seeds_started']} seeds)")
                if len(rs) < runs:
                    restarts += 1
                    bl.log(f"{label}: the tracker still lists a seed the sites stopped; restarting the federation")
                med = {k: bl.median([r[k] for r in rs])
                       for k in ("first_byte_s", "seed_up_s", "connect_s", "total_s")}
                med["process_s"] = bl.median([process_start() for _ in range(3)])
                med["resolve_s"] = bl.median([resolve(fed, name) for _ in range(3)])
            bl.fresh_dir(work / "fed")
        results[label] = {"dataset": name, "files": files, "bytes": size, "median": med, "runs_detail": rs,
                          "target_s": TARGETS[label]}
    return {"runs": runs, "sites": 2, "sets": results, "federation_restarts": restarts}


def main() -> int:
    ap = bl.parser(__doc__)
    args = ap.parse_args()
    runs = args.runs or (3 if args.quick else 5)
    with bl.workdir("coldstart", args.keep) as work:
        doc = run(work, runs)
    bl.write_json(args.out, "coldstart", doc)
    print(f"coldstart: launch to first payload byte, seeds started on demand, median of {runs}")
    print(bl.table(["dataset", "first byte s", "target s", "process s", "resolve s", "seed up s", "connect s"],
                   [[label, s["median"]["first_byte_s"], s["target_s"], s["median"]["process_s"],
                     s["median"]["resolve_s"], s["median"]["seed_up_s"], s["median"]["connect_s"]]
                    for label, s in doc["sets"].items()]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
