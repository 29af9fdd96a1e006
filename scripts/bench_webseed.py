"""Benchmark webseed: a T3 whose firewall blocks BitTorrent gets the dataset from the sites' web seeds.

    .venv/bin/python scripts/bench_webseed.py [--out DIR] [--quick] [--keep] [--runs N]
        [--rate 100mbit] [--size 400M]

Two sites, each behind an uplink R (--rate), the client's uplink R too, in a
shaped federation (`btswarm up --site-link R --client-link R`, see
btswarm/shaping.py; downlinks free, no latency added); S is the dataset
(torrents.sample, 29 files; --quick 200 MB). Each run, in this order:

  open     peer ports reachable: bt-get (default mode). Its time against the
           two-link bound S/(2R), and the bytes the sites' web seeds sent
           meanwhile (their /api/status `web`): the target is none at all.
  blocked  nftables in the federation's namespace drops TCP to both sites'
           peer ports (btswarm/testbed/firewall.py; the HTTP listeners stay open):
           bt-get (default mode) falls back by itself. Wall time (process
           start to exit) against S/(2R); the decision (`web_seed_switches`,
           seconds from bt-get's start); the time after it; bytes compared.
  aria2c   the same firewall: aria2c fetching every file from both sites'
           web seeds at once (two mirror URLs per file, --split 2), the
           third-party baseline; ratio bt-get / aria2c in the same run.

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
from btswarm.testbed import firewall
from btswarm.trees import compare_trees
from torrents import urls

TARGETS = {"blocked_fraction": 0.8, "decision_s": 10.0, "open_web_bytes": 0}


def sites_web(fed: bl.Federation) -> dict[str, int]:
    """What the sites' web seeds have done so far: requests and bytes, summed."""
    docs = [fed.site_status(s.name)["web"] for s in fed.sites]
    return {"requests": sum(d["requests"] for d in docs), "sent": sum(d["sent_total"] for d in docs)}


def bt_get_run(fed: bl.Federation, work: Path, ds: dict, ip: str, tag: str) -> dict:
    out = bl.fresh_dir(work / f"out-{tag}")
    before = sites_web(fed)
    t = bl.timed(bl.bt_get_cmd(fed, ds["name"], out, ip), 1800)
    after = sites_web(fed)
    check_complete(tag, out / ds["name"], ds["bytes"])
    doc = json.loads(t.stdout)
    bad = compare_trees(ds["root"], out / ds["name"])
    bl.fresh_dir(out)
    switches = doc.get("web_seed_switches", [])
    return {"seconds": t.seconds, "identical": not bad, "sources": doc["sources"], "switches": switches,
            "decision_s": switches[0]["after_s"] if switches else None,
            "web_requests": after["requests"] - before["requests"], "web_sent": after["sent"] - before["sent"]}


def aria2c_run(fed: bl.Federation, work: Path, ds: dict, ip: str) -> dict:
    """aria2c from both sites' web seeds: each file's two URLs are mirrors of one download."""
    out = bl.fresh_dir(work / "out-aria2c")
    bases = [s.web_url + "/data/" for s in fed.sites]
    lines = []
    for lfn in ds["lfns"]:
        lines.append("\t".join(b + urls.web_seed_path(ds["name"], lfn) for b in bases))
        lines += [f"  dir={out / ds['name']}", f"  out={lfn}"]
    listing = work / "aria2c.list"
    listing.write_text("\n".join(lines) + "\n")
    cmd = ["aria2c", "-q", "-i", str(listing), "-j", "4", "--split=2", "--max-connection-per-server=1",
           "--min-split-size=1M", "--file-allocation=none", f"--interface={ip}", "--console-log-level=warn",
           "--auto-file-renaming=false", "--allow-overwrite=true"]
    t = bl.timed(cmd, 1800)
    check_complete("aria2c", out / ds["name"], ds["bytes"])
    bad = compare_trees(ds["root"], out / ds["name"])
    bl.fresh_dir(out)
    return {"seconds": t.seconds, "identical": not bad, "command": " ".join(cmd[:1] + ["-i", "LIST"] + cmd[3:])}


def run(work: Path, args) -> dict:
    from torrents.units import parse_size

    rate = shaping.parse_rate(args.rate)
    size = parse_size(args.size or ("200M" if args.quick else "400M"))
    runs = args.runs or 3
    ds = dataset(work / "data", "bench.webseed.dataset", 29, size)
    bound = ds["bytes"] * 8 / (2 * rate)
    doc: dict = {"rate": rate, "runs": runs, "dataset": public(ds), "bound_s": bound}
    bl.log(f"dataset {ds['name']}: {ds['bytes'] / 1e6:.0f} MB in {ds['files']} files; R {args.rate}; "
           f"bound S/(2R) {bound:.2f} s")
    link = shaping.format_rate(rate)
    with bl.federation(work / "fed", work / "data", sites=2,
                       args=["--site-link", link, "--client-link", link, "--client-addresses", "8"]) as fed:
        doc["web_seeds"] = [s.web_url + "/data/" for s in fed.sites]
        seeds_everywhere(fed, fed.info_hash(ds["name"]))
        bl.timed(bl.bt_get_cmd(fed, ds["name"], bl.fresh_dir(work / "warm"), bl.client_ip(7)), 900)  # page cache
        bl.fresh_dir(work / "warm")
        peer_ports = [s.peer for s in fed.sites]
        detail: dict[str, list[dict]] = {"open": [], "blocked": [], "aria2c": []}
        for k in range(runs):
            r = bt_get_run(fed, work, ds, bl.client_ip(0), "open")
            detail["open"].append(r)
            bl.log(f"run {k + 1} open     {r['seconds']:6.2f} s, web seeds sent {r['web_sent']} bytes in "
                   f"{r['web_requests']} requests, sources {r['sources']}")
            firewall.block(fed.netns, peer_ports)
            try:
                r = bt_get_run(fed, work, ds, bl.client_ip(1 + k % 3), "blocked")
                detail["blocked"].append(r)
                bl.log(f"run {k + 1} blocked  {r['seconds']:6.2f} s, decision at {r['decision_s']} s, identical "
                       f"{r['identical']}, sources {r['sources']}")
                r = aria2c_run(fed, work, ds, bl.client_ip(4 + k % 3))
                detail["aria2c"].append(r)
                bl.log(f"run {k + 1} aria2c   {r['seconds']:6.2f} s, identical {r['identical']}")
            finally:
                firewall.unblock(fed.netns)
            time.sleep(1)
    med = {key: bl.median([r["seconds"] for r in rs]) for key, rs in detail.items()}
    decision = bl.median([r["decision_s"] for r in detail["blocked"] if r["decision_s"] is not None])
    doc.update({
        "median_s": med, "runs_detail": detail, "decision_s": decision,
        "blocked_fraction": bound / med["blocked"],
        "blocked_fraction_after_decision": bound / (med["blocked"] - decision),
        "open_fraction": bound / med["open"],
        "aria2c_fraction": bound / med["aria2c"],
        "blocked_vs_aria2c": med["aria2c"] / med["blocked"],
        "open_web_bytes": max(r["web_sent"] for r in detail["open"]),
        "open_web_requests": max(r["web_requests"] for r in detail["open"]),
        "identical": all(r["identical"] for rs in detail.values() for r in rs),
        "commands": {
            "open": "bt-get NAME --repo REPO -o OUT --listen 127.0.0.101 --json --timeout 1800",
            "blocked": "firewall.block(netns, peer endpoints); bt-get NAME --repo REPO -o OUT --listen 127.0.0.102 "
                       "--json --timeout 1800",
            "aria2c": detail["aria2c"][0]["command"] if detail["aria2c"] else "",
        },
    })
    return doc


def report(doc: dict) -> None:
    def line(what: str, value: float, note: str, target: str) -> str:
        return f"  {what:52s} {value:8.2f}   {note:30s} {target}"

    m = doc["median_s"]
    print(f"webseed: 2 sites at R {shaping.format_rate(doc['rate'])} each, S {doc['dataset']['bytes'] / 1e6:.0f} MB "
          f"in {doc['dataset']['files']} files, median of {doc['runs']}; bound S/(2R) {doc['bound_s']:.2f} s")
    print(bl.table(["contender", "s", "x bound"], [[k, v, doc["bound_s"] / v] for k, v in m.items()]))
    print(line("blocked: bt-get fraction of S/(2R), wall", doc["blocked_fraction"], f"{m['blocked']:.2f} s", ">= 0.8"))
    print(line("blocked: after the fall-back decision", doc["blocked_fraction_after_decision"],
               f"{m['blocked'] - doc['decision_s']:.2f} s", ""))
    print(line("blocked: fall-back decision, s after bt-get's start", doc["decision_s"], "", "<= 10"))
    print(line("blocked: bt-get vs aria2c (both web seeds)", doc["blocked_vs_aria2c"], f"aria2c {m['aria2c']:.2f} s",
               ""))
    print(line("open: web-seed bytes sent while peers reachable", doc["open_web_bytes"],
               f"{doc['open_web_requests']} requests", "0"))
    print(line("open: bt-get fraction of S/(2R)", doc["open_fraction"], f"{m['open']:.2f} s", ""))
    print(f"  bytes identical in every run: {doc['identical']}")
    for key, cmd in doc["commands"].items():
        print(f"  {key}: {cmd}")


def main() -> int:
    ap = bl.parser(__doc__)
    ap.add_argument("--rate", default="100mbit", help="each site's uplink R (and the client's)")
    ap.add_argument("--size", default=None, help="dataset size (default 400M, --quick 200M)")
    args = ap.parse_args()
    bl.require_shaping("bench_webseed")
    with bl.workdir("webseed", args.keep) as work:
        doc = run(work, args)
    doc["targets"] = TARGETS
    bl.write_json(args.out, "webseed", doc)
    report(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
