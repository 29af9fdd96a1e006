"""Benchmark egress: what N concurrent T3 clients cost the T2 sites, bt-get vs curl<-nginx.

    .venv/bin/python scripts/bench_egress.py [--out DIR] [--quick] [--keep] [--size 1G] [--clients 1 2 4 8]

A real federation (`btswarm up --sites 2`), one dataset (torrents.sample;
1 GB in 29 files, --quick 128 MB in 8). A warm-up bt-get first starts the
on-demand seeds and warms the page cache. Then for N in 1, 2, 4, 8: N bt-get
clients at once, each on its own 127.0.0.x (--listen) with its own output
directory and --seed-time long enough that early finishers keep serving the
others; once the tracker has counted N completions they are stopped (SIGTERM
by PID). Egress = the growth of the sites' uploaded_total (GET /api/status)
divided by the dataset size; time = launch to the N-th completion. The same N
curl clients from one nginx are the baseline: egress N x the dataset by
construction, time measured. Median of the runs. Target: bt-get egress
<= 1.5x the dataset at 8 clients.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import benchlib as bl

TARGET = 1.5
SEED_TIME = "30m"  # long; every client is stopped by PID once all are complete


def completed(fed: bl.Federation, info_hash: str) -> int:
    return int(bl.get_json(f"{fed.tracker_url}/api/swarms/{info_hash}")["completed"])


def bt_get_round(fed: bl.Federation, work: Path, name: str, info_hash: str, size: int, n: int) -> dict:
    before = bl.settled_uploaded_total(fed)
    done0 = completed(fed, info_hash)
    outs = [bl.fresh_dir(work / f"client{k}") for k in range(n)]
    with bl.Procs() as procs:
        t = time.monotonic()
        logs = [work / f"client{k}.log" for k in range(n)]
        for path in logs:
            path.write_text("")  # an earlier round's "complete in" is not this round's word
        clients = [procs.start(bl.bt_get_cmd(fed, name, outs[k], bl.client_ip(k), "--workers", "1",
                                             "--seed-time", SEED_TIME, "-v"),
                               logs[k], stdout=open(work / f"client{k}.json", "wb"))
                   for k in range(n)]
        bl.wait_for(lambda: completed(fed, info_hash) >= done0 + n or any(c.poll() is not None for c in clients),
                    900, f"{n} bt-get clients to complete", interval=0.1)
        seconds = time.monotonic() - t
        # The tracker counts a completion when libtorrent announces it, a moment
        # before bt-get has flushed and marked itself complete (a SIGTERM then
        # would be an interruption, exit 130): wait for each client's own word.
        bl.wait_for(lambda: all(" complete in " in p.read_text(errors="replace") for p in logs), 60,
                    f"{n} bt-get clients to report completion", interval=0.1)
        codes = [procs.stop(c) for c in clients]
    if any(codes):
        raise SystemExit(f"bt-get clients exited {codes}; see {work}/client*.log")
    for k in range(n):
        doc = json.loads((work / f"client{k}.json").read_text())
        if doc["exit_code"] != 0 or bl.dataset_size(outs[k] / name) != size:
            raise SystemExit(f"client {k}: incomplete ({doc['exit_status']})")
        bl.fresh_dir(outs[k])
    uploaded = bl.settled_uploaded_total(fed) - before
    return {"seconds": seconds, "t2_uploaded": uploaded, "egress_x": uploaded / size}


def curl_round(srv: bl.Nginx, work: Path, name: str, lfns: list[str], size: int, n: int) -> dict:
    outs = [bl.fresh_dir(work / f"client{k}") for k in range(n)]
    with bl.Procs() as procs:
        t = time.monotonic()
        clients = [procs.start(bl.curl_cmd(srv, name, lfns, outs[k]), work / f"curl{k}.log") for k in range(n)]
        deadline = time.monotonic() + 900
        for c in clients:
            c.wait(max(1.0, deadline - time.monotonic()))
        seconds = time.monotonic() - t
    if any(c.returncode for c in clients):
        raise SystemExit(f"curl exited {[c.returncode for c in clients]}; see {work}/curl*.log")
    for o in outs:
        if bl.dataset_size(o) != size:
            raise SystemExit(f"curl into {o}: incomplete")
        bl.fresh_dir(o)
    return {"seconds": seconds, "t2_uploaded": n * size, "egress_x": float(n)}


def run(work: Path, size: int, files: int, counts: list[int], runs: int) -> dict:
    from torrents import sample

    data = work / "data"
    root = sample.generate(data, name="bench.egress.dataset", files=files, total_size=size)
    name, total = root.name, bl.dataset_size(root)
    lfns = sorted(p.name for p in root.iterdir())
    bl.log(f"dataset {name}: {total / 1e6:.0f} MB in {len(lfns)} files")
    detail: dict[str, dict[int, list[dict]]] = {"bt-get": {}, "curl<-nginx": {}}
    with bl.federation(work, data, sites=2) as fed, bl.nginx(work, data) as srv:
        info_hash = fed.info_hash(name)
        bl.timed(bl.bt_get_cmd(fed, name, bl.fresh_dir(work / "warm"), bl.client_ip(0)), 900)
        bl.fresh_dir(work / "warm")
        for run_no in range(runs):
            for n in counts:
                for label in detail:
                    r = (bt_get_round(fed, work, name, info_hash, total, n) if label == "bt-get"
                         else curl_round(srv, work, name, lfns, total, n))
                    detail[label].setdefault(n, []).append(r)
                    bl.log(f"run {run_no + 1} {label:11s} {n} clients: {r['seconds']:6.2f} s, "
                           f"T2 uploaded {r['egress_x']:.2f}x dataset")
    median = {label: {str(n): {"seconds": bl.median([r["seconds"] for r in rs]),
                               "egress_x": bl.median([r["egress_x"] for r in rs])} for n, rs in per.items()}
              for label, per in detail.items()}
    return {"dataset": {"name": name, "bytes": total, "files": len(lfns)}, "sites": 2, "runs": runs,
            "clients": counts, "median": median,
            "runs_detail": {label: {str(n): rs for n, rs in per.items()} for label, per in detail.items()},
            "target": {"clients": max(counts), "egress_x_max": TARGET}}


def main() -> int:
    ap = bl.parser(__doc__)
    ap.add_argument("--size", default=None, help="dataset size (default 1G, --quick 128M)")
    ap.add_argument("--files", type=int, default=None, help="files in the dataset (default 29, --quick 8)")
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4, 8])
    args = ap.parse_args()
    from torrents.units import parse_size

    size = parse_size(args.size or ("128M" if args.quick else "1G"))
    files = args.files or (8 if args.quick else 29)
    with bl.workdir("egress", args.keep) as work:
        doc = run(work, size, files, args.clients, args.runs or 3)
    bl.write_json(args.out, "egress", doc)
    med = doc["median"]
    print(f"egress: {doc['dataset']['bytes'] / 1e6:.0f} MB dataset, {doc['sites']} T2 sites, median of {doc['runs']}")
    print(bl.table(["clients", "bt-get T2 egress (x dataset)", "bt-get s", "curl T2 egress", "curl s",
                    "bt-get/curl time"],
                   [[n, med["bt-get"][str(n)]["egress_x"], med["bt-get"][str(n)]["seconds"],
                     med["curl<-nginx"][str(n)]["egress_x"], med["curl<-nginx"][str(n)]["seconds"],
                     med["bt-get"][str(n)]["seconds"] / med["curl<-nginx"][str(n)]["seconds"]]
                    for n in doc["clients"]]))
    top = str(max(doc["clients"]))
    print(f"target: T2 egress <= {TARGET}x dataset at {top} clients: {med['bt-get'][top]['egress_x']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
