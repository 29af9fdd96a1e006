"""Benchmark wan_hetero: one slow site among three (site3 at R/10), for one T3 and for 8 at once.

    sudo .venv/bin/python scripts/bench_wan_hetero.py [--out DIR] [--quick] [--keep] [--runs N]
        [--rate 100mbit] [--client-rate 100mbit] [--rtt 0ms 40ms 100ms] [--client-rtt 0ms] [--link-mtu 65536]
        [--size 200M]

Sites 1 and 2 behind R, site3 behind R/10. One T3: bt-get vs curl<-nginx
behind R, bound of the two fast sites S/(2R); then 8 T3s at once (the swarm
of bench_wan_swarm.py, with its every-site arm) against the Kumar-Ross
bound with the slow site: its slice must not hold the T3s back
(btget/worker/siteshare.py). The links, the RTTs and the results
(OUT/wan_hetero.json) as every wan scenario: scripts/wanlib.py. Root only
(a network namespace).
"""

from __future__ import annotations

import sys
from pathlib import Path

import wanlib
from bench_wan_swarm import swarm

TARGETS = {"hetero_fraction": 0.85}


def run(work: Path, args, links: wanlib.Links, runs: int, doc: dict) -> None:
    ds = wanlib.wan_dataset(work, args, doc)
    slow = links.rate // 10
    with wanlib.federation(work, links, ds["name"], where="fedh", overrides={"site3": slow}) as (fed, srv):
        r = wanlib.one_t3(fed, srv, work, ds, runs, ds["bytes"] * 8 / (2 * links.rate), "hetero")
        r["strict_bound_s"] = ds["bytes"] * 8 / (2.1 * links.rate)
        doc["hetero"] = r
        doc["hetero_swarm"] = swarm(fed, srv, work, ds, runs, [8], links, -1, [],
                                    site_rates=[links.rate, links.rate, slow])


def report(doc: dict) -> None:
    if "hetero" in doc:
        h = doc["hetero"]
        print(wanlib.line("hetero: site3 at R/10: fraction of S/(2R)", h["fraction"], f"bound {h['bound_s']:.2f} s",
                          f">= 0.85 (x curl {h['vs_curl']:.2f})"))
    if "hetero_swarm" in doc:
        r = doc["hetero_swarm"]["median"]["8"]
        print(wanlib.line("hetero: 8 T3s, site3 at R/10: fraction of the Kumar-Ross bound", r["fraction"],
                          f"{r['seconds']:.2f} s, egress {r['egress_x']:.2f}x",
                          f"every site {r['every_site_s']:.2f} s, {r['every_site_egress_x']:.2f}x"))


def figures(doc: dict) -> dict[str, float]:
    return {"8 T3s, site3 at R/10, last done": doc["hetero_swarm"]["median"]["8"]["seconds"]} \
        if "hetero_swarm" in doc else {}


if __name__ == "__main__":
    sys.exit(wanlib.main(wanlib.Scenario("hetero", __doc__, run, report, TARGETS, figures=figures)))
