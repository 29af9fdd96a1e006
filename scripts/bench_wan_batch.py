"""Benchmark wan_batch: a job array, `bt-get --shard K/n` on n client addresses at once, against S/(3R).

    sudo .venv/bin/python scripts/bench_wan_batch.py [--out DIR] [--quick] [--keep] [--runs N]
        [--rate 100mbit] [--client-rate 100mbit] [--rtt 0ms 40ms 100ms] [--client-rtt 0ms] [--link-mtu 65536]
        [--size 200M] [--shards 4 8]

n bt-gets at once from 3 sites behind R each, client k fetching only
`--shard k/n` (n in --shards, 4 and 8), against one client fetching
everything in the same runs; bound S/(3R) for the last shard done. The
links, the RTTs and the results (OUT/wan_batch.json) as every wan scenario:
scripts/wanlib.py. Root only (a network namespace).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import benchlib as bl
import wanlib
from wanclients import bt_get_many
from wanmeters import cpu_summary

TARGETS = {"batch_x_bound": 1.15}  # issue 25's


def options(ap) -> None:
    ap.add_argument("--shards", type=int, nargs="+", default=[4, 8], help="arrays of this many shards")


def shard_bytes(fed: bl.Federation, ds: dict, n: int) -> list[int]:
    """What each `--shard K/n` fetches, as bt-get says it (`--list-files --json`: no download)."""
    sizes = []
    for k in range(1, n + 1):
        listed = bl.timed([str(bl.BIN / "bt-get"), ds["name"], "--repo", fed.repo, "--shard", f"{k}/{n}",
                           "--list-files", "--json"], timeout=60)
        sizes.append(json.loads(listed.stdout)["total_size"])
    return sizes


def batch(fed: bl.Federation, work: Path, ds: dict, runs: int, rate: int, counts: list[int]) -> dict:
    """`--shard K/n` on n client addresses at once, for each n in `counts`, and one client fetching
    everything in the same runs (the shards' baseline)."""
    wanlib.seeds_everywhere(fed, fed.info_hash(ds["name"]))
    sizes = {n: shard_bytes(fed, ds, n) for n in counts}
    details: dict[int, list[dict]] = {n: [] for n in counts}
    whole: list[float] = []
    for run_no in range(runs):
        for n in counts:
            r = bt_get_many(fed, work, ds, [["--shard", f"{k + 1}/{n}"] for k in range(n)], False, sizes[n])
            details[n].append(r)
            c = cpu_summary(r["cpu"])
            bl.log(f"batch run {run_no + 1}: {n} shards, last done {r['seconds']:6.2f} s, first byte "
                   f"{r['first_byte_s']:.2f} s, cores busy {c['host_busy_to_first_byte']:.0%} to it, "
                   f"{c['host_busy_after_first_byte']:.0%} after")
        w = bt_get_many(fed, work, ds, [[]], False, [ds["bytes"]])
        whole.append(w["seconds"])
        bl.log(f"batch run {run_no + 1}: one client, all {w['seconds']:6.2f} s")
    bound = ds["bytes"] * 8 / (3 * rate)
    by = {str(n): {"shards_s": bl.median([r["seconds"] for r in rs]),
                   "x_bound": bl.median([r["seconds"] for r in rs]) / bound,
                   "shard_bytes": sizes[n], "runs_s": [r["seconds"] for r in rs],
                   "first_byte_s": bl.median([r["first_byte_s"] for r in rs]),
                   "each_s": [r["each_s"] for r in rs], "starts": [r["starts"] for r in rs],
                   "cpu": [r["cpu"] for r in rs]} for n, rs in details.items()}
    return {"bound_s": bound, "whole_s": bl.median(whole), "whole_runs_s": whole, "by_shards": by}


def run(work: Path, args, links: wanlib.Links, runs: int, doc: dict) -> None:
    ds = wanlib.wan_dataset(work, args, doc)
    with wanlib.federation(work, links, ds["name"], baseline=False) as (fed, _):
        doc["batch"] = batch(fed, work, ds, runs, links.rate, args.shards)


def report(doc: dict) -> None:
    b = doc.get("batch", {})
    for n, r in b.get("by_shards", {}).items():
        print(wanlib.line(f"batch: {n} shards at once, last done / S/(3R)", r["x_bound"],
                          f"{r['shards_s']:.2f} s vs {b['bound_s']:.2f} s",
                          f"<= 1.15 (one client: {b['whole_s']:.2f} s = {b['whole_s'] / b['bound_s']:.2f})"))


def figures(doc: dict) -> dict[str, float]:
    return {f"{n} shards at once, last done": r["shards_s"]
            for n, r in doc.get("batch", {}).get("by_shards", {}).items()}


if __name__ == "__main__":
    sys.exit(wanlib.main(wanlib.Scenario("batch", __doc__, run, report, TARGETS, options, figures)))
