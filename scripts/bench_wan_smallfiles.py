"""Benchmark wan_smallfiles: 20,000 files of 1-50 KB from 3 sites on shaped links, files/s vs curl<-nginx.

    sudo .venv/bin/python scripts/bench_wan_smallfiles.py [--out DIR] [--quick] [--keep] [--runs N]
        [--rate 100mbit] [--client-rate 100mbit] [--rtt 0ms 40ms 100ms] [--client-rtt 0ms] [--link-mtu 65536]
        [--small-files 20000]

One T3 fetches --small-files files of 1-50 KB (--quick 5,000) from 3 sites
behind R each: files/s of bt-get vs curl from nginx behind R (one
connection, files in sequence); bound S/(3R). The links, the RTTs and the
results (OUT/wan_smallfiles.json) as every wan scenario: scripts/wanlib.py.
Root only (a network namespace).
"""

from __future__ import annotations

import sys
from pathlib import Path

import wanlib

MEAN_SMALL = 25 * 1024 + 512  # with jitter 0.96: 1-50 KB files, as bench_smallfiles


def options(ap) -> None:
    ap.add_argument("--small-files", type=int, default=None, help="files in the dataset (20000; --quick 5000)")


def run(work: Path, args, links: wanlib.Links, runs: int, doc: dict) -> None:
    files = args.small_files or (5000 if args.quick else 20000)
    ds = wanlib.scenario_dataset(work, doc, "bench.wan.smallfiles", files, files * MEAN_SMALL, 0.96)
    with wanlib.federation(work, links, ds["name"]) as (fed, srv):
        r = wanlib.one_t3(fed, srv, work, ds, runs, ds["bytes"] * 8 / (3 * links.rate), "smallfiles",
                          config=work / "curl-small.cfg")
    r["files_per_s"] = {k: ds["files"] / v for k, v in r["median_s"].items()}
    r["dataset"] = wanlib.public(ds)
    doc["smallfiles"] = r


def report(doc: dict) -> None:
    if "smallfiles" not in doc:
        return
    s = doc["smallfiles"]
    f = s["files_per_s"]
    print(wanlib.line(f"smallfiles ({s['dataset']['files']} files): bt-get files/s", f["bt-get"],
                      f"curl {f['curl<-nginx']:.0f} files/s",
                      f"x curl {s['vs_curl']:.2f}, fraction of S/3R {s['fraction']:.2f}"))


if __name__ == "__main__":
    sys.exit(wanlib.main(wanlib.Scenario("smallfiles", __doc__, run, report, options=options, sized=False)))
