"""Benchmark ratecap: `bt-get --max-rate` on a link shared with everyone else.

    .venv/bin/python scripts/bench_ratecap.py [--out DIR] [--quick] [--keep] [--runs N]
        [--site-rate 200mbit] [--client-rate 400mbit] [--size 200M]

Three sites, each behind an uplink (--site-rate), the client's uplink free
enough (--client-rate) that bt-get alone takes more than any cap asked; no
latency added. Each run, in this order: bt-get with no cap (the baseline: the
cap must bind), then `--max-rate` 100mbit and 50mbit, each with `--workers 1`
and `--workers 4` (four workers share one cap). The figure is the observed
rate from the first byte to the end of the process, against the cap: the
target is within ±10% (issue: "rate caps for a shared campus link").
Medians of the runs; figures printed with the command that produced them.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import benchlib as bl
from wanlib import check_complete, dataset, public, seeds_everywhere

from btswarm import shaping
from btswarm.trees import compare_trees

CAPS = ("100mbit", "50mbit")
WORKERS = (1, 4)
TARGET = 0.10  # |observed / cap - 1|


def one(fed: bl.Federation, work: Path, ds: dict, ip: str, *extra: str) -> dict:
    out = bl.fresh_dir(work / "out")
    t = bl.timed(bl.bt_get_cmd(fed, ds["name"], out, ip, *extra), 1800)
    end = time.time()
    check_complete(" ".join(extra) or "uncapped", out / ds["name"], ds["bytes"])
    doc = json.loads(t.stdout)
    identical = not compare_trees(ds["root"], out / ds["name"])
    bl.fresh_dir(out)
    after_first = end - doc["first_byte_at"]
    return {"seconds": t.seconds, "after_first_byte_s": after_first, "rate": doc["bytes_downloaded"] / after_first,
            "identical": identical}


def run(work: Path, args) -> dict:
    from torrents.units import parse_byte_rate, parse_size

    size = parse_size(args.size or ("100M" if args.quick else "200M"))
    runs = args.runs or 3
    ds = dataset(work / "data", "bench.ratecap.dataset", 24, size)
    doc: dict = {"runs": runs, "dataset": public(ds), "site_rate": args.site_rate, "client_rate": args.client_rate}
    bl.log(f"dataset {ds['name']}: {ds['bytes'] / 1e6:.0f} MB in {ds['files']} files; 3 sites at {args.site_rate}, "
           f"client {args.client_rate}")
    cases = [("uncapped", ())] + [(f"{cap} x{w}", ("--max-rate", cap, "--workers", str(w)))
                                  for cap in CAPS for w in WORKERS]
    detail: dict[str, list[dict]] = {name: [] for name, _ in cases}
    with bl.federation(work / "fed", work / "data", sites=3,
                       args=["--site-link", args.site_rate, "--client-link", args.client_rate,
                             "--client-addresses", "4"]) as fed:
        seeds_everywhere(fed, fed.info_hash(ds["name"]))
        bl.timed(bl.bt_get_cmd(fed, ds["name"], bl.fresh_dir(work / "warm"), bl.client_ip(3)), 900)  # page cache
        bl.fresh_dir(work / "warm")
        for k in range(runs):
            for i, (name, extra) in enumerate(cases):
                r = one(fed, work, ds, bl.client_ip(i % 3), *extra)
                detail[name].append(r)
                bl.log(f"run {k + 1} {name:12s} {r['seconds']:6.2f} s, {r['rate'] * 8 / 1e6:7.1f} Mbit/s after the "
                       f"first byte, identical {r['identical']}")
    rows = {}
    for name, extra in cases:
        rate = bl.median([r["rate"] for r in detail[name]])
        cap = parse_byte_rate(extra[1]) if extra else 0
        rows[name] = {"rate": rate, "cap": cap, "ratio": rate / cap if cap else None}
    doc.update({"cases": rows, "runs_detail": detail,
                "identical": all(r["identical"] for rs in detail.values() for r in rs),
                "command": "bt-get NAME --repo REPO -o OUT --listen 127.0.0.10x --json --max-rate CAP --workers W"})
    return doc


def report(doc: dict) -> None:
    print(f"ratecap: 3 sites at {doc['site_rate']}, client {doc['client_rate']}, S "
          f"{doc['dataset']['bytes'] / 1e6:.0f} MB, median of {doc['runs']}; rate from the first byte")
    table = []
    for name, r in doc["cases"].items():
        ratio = r["ratio"]
        table.append([name, r["rate"] * 8 / 1e6, r["cap"] * 8 / 1e6 if r["cap"] else "-",
                      ratio if ratio is not None else "-",
                      ("met" if abs(ratio - 1) <= TARGET else "missed") if ratio is not None else "baseline"])
    print(bl.table(["case", "Mbit/s", "cap Mbit/s", "x cap", "target ±10%"], table))
    print(f"  bytes identical in every run: {doc['identical']}")
    print(f"  {doc['command']}")


def main() -> int:
    ap = bl.parser(__doc__)
    ap.add_argument("--site-rate", default="200mbit", help="each site's uplink")
    ap.add_argument("--client-rate", default="400mbit", help="the client's uplink (downlinks are free)")
    ap.add_argument("--size", default=None, help="dataset size (default 200M, --quick 100M)")
    args = ap.parse_args()
    bl.require_shaping("bench_ratecap")
    shaping.parse_rate(args.site_rate), shaping.parse_rate(args.client_rate)  # a bad rate: said before any work
    with bl.workdir("ratecap", args.keep) as work:
        doc = run(work, args)
    doc["target"] = TARGET
    bl.write_json(args.out, "ratecap", doc)
    report(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
