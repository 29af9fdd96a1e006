"""Benchmark wan_single: one T3 <- 3 sites on shaped links, bt-get vs curl<-nginx vs aria2c, against S/(3R).

    sudo .venv/bin/python scripts/bench_wan_single.py [--out DIR] [--quick] [--keep] [--runs N]
        [--rate 100mbit] [--client-rate 100mbit] [--rtt 0ms 40ms 100ms] [--client-rtt 0ms] [--link-mtu 65536]
        [--size 200M]

One T3 fetches the dataset from 3 seeding sites behind R each; the
contenders, alternated in each run: bt-get, curl from nginx behind one R
(one connection, files in sequence), aria2c from the same 3 seeds. Bound
S/(3R). The links, the RTTs and the results (OUT/wan_single.json) as every
wan scenario: scripts/wanlib.py. Root only (a network namespace).
"""

from __future__ import annotations

import sys
from pathlib import Path

import benchlib as bl
import wanlib

TARGETS = {"single_fraction": 0.92, "single_vs_curl": 2.7, "single_vs_aria2c": 1.5}  # issue 25's


def single(fed: bl.Federation, srv: bl.Nginx, work: Path, ds: dict, runs: int, rate: int) -> dict:
    name, size = ds["name"], ds["bytes"]
    torrent = work / f"{name}.torrent"
    torrent.write_bytes(fed.torrent(name))
    r = wanlib.one_t3(fed, srv, work, ds, runs, size * 8 / (3 * rate), "single",
                      others={"aria2c": lambda o: wanlib.aria2c_cmd(torrent, o, bl.client_ip(2))})
    med = r["median_s"]
    return {**r, "vs_aria2c": med["aria2c"] / med["bt-get"],
            "curl_fraction_of_its_bound": size * 8 / rate / med["curl<-nginx"]}


def run(work: Path, args, links: wanlib.Links, runs: int, doc: dict) -> None:
    ds = wanlib.wan_dataset(work, args, doc)
    with wanlib.federation(work, links, ds["name"]) as (fed, srv):
        doc["single"] = single(fed, srv, work, ds, runs, links.rate)


def report(doc: dict) -> None:
    if "single" not in doc:
        return
    s = doc["single"]
    print("single: one T3 <- 3 sites")
    print(bl.table(["contender", "s", "x bound S/3R"], [[k, v, s["bound_s"] / v] for k, v in s["median_s"].items()]))
    print(wanlib.line("bt-get: fraction of S/(3R)", s["fraction"], f"bound {s['bound_s']:.2f} s", ">= 0.92"))
    print(wanlib.line("bt-get vs curl<-nginx behind R", s["vs_curl"], "", ">= 2.7"))
    print(wanlib.line("bt-get vs aria2c", s["vs_aria2c"], "", ">= 1.5"))


def figures(doc: dict) -> dict[str, float]:
    return {"1 T3 <- 3 sites, bt-get": doc["single"]["median_s"]["bt-get"]} if "single" in doc else {}


if __name__ == "__main__":
    sys.exit(wanlib.main(wanlib.Scenario("single", __doc__, run, report, TARGETS, figures=figures)))
