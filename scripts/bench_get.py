"""Benchmark get: 1 bt-get from 3 seeding sites vs curl from nginx vs aria2c from the same seeds.

    .venv/bin/python scripts/bench_get.py [--out DIR] [--quick] [--keep] [--size 4G] [--runs 3]

A real federation (`btswarm up --sites 3 --data DIR`, dataset from
torrents.sample: 4 GB in 29 files, --quick 1 GB). One warm-up bt-get first,
so that the on-demand seeds are up and the page cache is warm; then every
site is asked to seed (signed POST /api/seeds), so bt-get and aria2c both
get 3 seeds from the tracker. Contenders, each into a fresh directory,
median of the runs (wall time of the whole command, process start included):
  bt-get --workers 1, bt-get --workers 2,
  curl from an nginx serving the same files (one curl, files in sequence),
  aria2c with the repository's .torrent through the same tracker and seeds.
Targets: bt-get >= 0.8x curl<-nginx and >= 1.2x aria2c. CPU seconds per GB
of the client and of the servers (3 seeding bt-servers, or nginx) beside.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import benchlib as bl

TARGETS = {"vs_curl": 0.8, "vs_aria2c": 1.2}


def aria2c_cmd(torrent: Path, out: Path, ip: str) -> list[str]:
    return ["aria2c", "-q", "--enable-dht=false", "--enable-dht6=false", "--bt-enable-lpd=false",
            "--enable-peer-exchange=false", "--seed-time=0", "--file-allocation=none", "--check-integrity=false",
            "--disable-ipv6=true", f"--interface={ip}", f"--listen-port={bl.free_port(ip)}",
            "--summary-interval=0", "--console-log-level=warn", f"--dir={out}", str(torrent)]


def run(work: Path, size: int, files: int, runs: int) -> dict:
    from torrents import sample

    data = work / "data"
    root = sample.generate(data, files=files, total_size=size)
    name = root.name
    total = bl.dataset_size(root)
    lfns = sorted(p.name for p in root.iterdir())
    bl.log(f"dataset {name}: {total / 1e6:.0f} MB in {len(lfns)} files")
    results: dict[str, dict[str, list[float]]] = {}
    with bl.federation(work, data, sites=3) as fed, bl.nginx(work, data) as srv:
        torrent = work / f"{name}.torrent"
        torrent.write_bytes(fed.torrent(name))
        info_hash = fed.info_hash(name)
        out = work / "out"
        warm = bl.timed(bl.bt_get_cmd(fed, name, bl.fresh_dir(out), bl.client_ip(0)), 1800)
        bl.log(f"warm-up bt-get: {total / warm.seconds / 1e6:.0f} MB/s")
        bl.start_seeds(fed, info_hash)
        bl.wait_for(lambda: len(bl.get_json(f"{fed.tracker_url}/api/swarms/{info_hash}")["sites"]) == 3, 30,
                    "all 3 sites seeding at the tracker", interval=0.2)
        pids = fed.site_pids()
        servers = {"curl<-nginx": [srv.pid]}  # whose CPU is "server CPU" for each contender
        contenders = {
            "bt-get -w1": lambda o: bl.bt_get_cmd(fed, name, o, bl.client_ip(1), "--workers", "1"),
            "bt-get -w2": lambda o: bl.bt_get_cmd(fed, name, o, bl.client_ip(2), "--workers", "2"),
            "curl<-nginx": lambda o: bl.curl_cmd(srv, name, lfns, o),
            "aria2c": lambda o: aria2c_cmd(torrent, o, bl.client_ip(3)),
        }
        for run_no in range(runs):
            for label, make in contenders.items():
                dest = bl.fresh_dir(out)
                server_pids = servers.get(label) or list(pids.values())
                server_cpu = bl.tree_cpu_seconds(server_pids)
                launched = time.time()
                t = bl.timed(make(dest / name if label == "curl<-nginx" else dest), 1800)
                server_cpu = bl.tree_cpu_seconds(server_pids) - server_cpu
                got = bl.dataset_size(dest / name) if (dest / name).is_dir() else 0
                if got < total:
                    raise SystemExit(f"{label}: only {got} of {total} bytes arrived")
                r = results.setdefault(label, {"mb_s": [], "client_cpu_s_per_gb": [], "server_cpu_s_per_gb": []})
                r["mb_s"].append(total / t.seconds / 1e6)
                r["client_cpu_s_per_gb"].append(t.cpu / (total / 1e9))
                r["server_cpu_s_per_gb"].append(server_cpu / (total / 1e9))
                if label.startswith("bt-get"):
                    doc = json.loads(t.stdout)
                    # bt-get's own view: transfer rate from its start, and launch to first byte
                    r.setdefault("transfer_mb_s", []).append(doc["rate"] / 1e6)
                    r.setdefault("first_byte_s", []).append(doc["first_byte_at"] - launched)
                bl.log(f"run {run_no + 1} {label:12s} {r['mb_s'][-1]:7.0f} MB/s  client {t.cpu:5.1f} CPU-s  "
                       f"server {server_cpu:5.1f} CPU-s")
        bl.fresh_dir(out)
    med = {k: {m: bl.median(v) for m, v in r.items()} for k, r in results.items()}
    best = max(med["bt-get -w1"]["mb_s"], med["bt-get -w2"]["mb_s"])
    return {
        "dataset": {"name": name, "bytes": total, "files": len(lfns)}, "sites": 3, "runs": runs,
        "median": med, "runs_detail": results,
        "ratios": {
            "w1_vs_curl": med["bt-get -w1"]["mb_s"] / med["curl<-nginx"]["mb_s"],
            "w2_vs_curl": med["bt-get -w2"]["mb_s"] / med["curl<-nginx"]["mb_s"],
            "w1_vs_aria2c": med["bt-get -w1"]["mb_s"] / med["aria2c"]["mb_s"],
            "w2_vs_aria2c": med["bt-get -w2"]["mb_s"] / med["aria2c"]["mb_s"],
            "best_vs_curl": best / med["curl<-nginx"]["mb_s"],
            "best_vs_aria2c": best / med["aria2c"]["mb_s"],
        },
        "targets": TARGETS,
    }


def main() -> int:
    ap = bl.parser(__doc__)
    ap.add_argument("--size", default=None, help="dataset size (default 4G, --quick 1G)")
    ap.add_argument("--files", type=int, default=29)
    args = ap.parse_args()
    from torrents.units import parse_size

    size = parse_size(args.size or ("1G" if args.quick else "4G"))
    with bl.workdir("get", args.keep) as work:
        doc = run(work, size, args.files, args.runs or 3)
    bl.write_json(args.out, "get", doc)
    med, ratios = doc["median"], doc["ratios"]
    print(f"get: {doc['dataset']['bytes'] / 1e6:.0f} MB in {doc['dataset']['files']} files, 3 sites, "
          f"median of {doc['runs']}")
    print(bl.table(["contender", "MB/s", "x curl", "x aria2c", "client CPU-s/GB", "server CPU-s/GB",
                    "transfer MB/s", "1st byte s"],
                   [[k, v["mb_s"], v["mb_s"] / med["curl<-nginx"]["mb_s"], v["mb_s"] / med["aria2c"]["mb_s"],
                     v["client_cpu_s_per_gb"], v["server_cpu_s_per_gb"], v.get("transfer_mb_s", "-"),
                     v.get("first_byte_s", "-")] for k, v in med.items()]))
    print(f"targets: bt-get >= {TARGETS['vs_curl']}x curl (best {ratios['best_vs_curl']:.2f}), "
          f">= {TARGETS['vs_aria2c']}x aria2c (best {ratios['best_vs_aria2c']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
