"""Benchmark closed: 4 T3s at once on hosts of their own, one of which accepts no inbound connection.

    sudo .venv/bin/python scripts/bench_closed.py [--t3s 4] [--size 64M] [--site-link 150mbit]
        [--client-link 100mbit] [--runs 3] [--out DIR] [--keep]

A worker node behind NAT or a closed firewall (issue 47): the last T3 host
drops every inbound connection attempt (nftables in its namespace,
btswarm/testbed/firewall.py `closed`). Three contenders, alternated within
one run on one federation (`btswarm up --hosts`):

- `open`: no firewall, every T3 reachable (the reference);
- `closed`: the firewall, and that T3's bt-get told so (`[get] closed`,
  BTSWARM_GET_CLOSED=true): it announces inbound=0, the tracker never hands
  it out;
- `closed-unsaid`: the firewall, bt-get not told: the tracker hands it out
  and the others' connection attempts to it go unanswered.

Reported per contender (medians of the runs): the closed T3's time, the
others' median and slowest, the copies of the dataset the sites sent, and
the connection attempts the closed host dropped (its counter: SYNs of
others that waited for nothing). Root only (network namespaces).
"""

from __future__ import annotations

import sys

import benchlib as bl
from bench_hosts import bt_get_all

from btswarm import shaping
from btswarm.testbed import firewall
from torrents import units

SITES = 2


def main() -> int:
    ap = bl.parser(__doc__)
    ap.add_argument("--t3s", type=int, default=4, help="T3 hosts; the last one is closed")
    ap.add_argument("--size", default="64M", help="the dataset (12 files)")
    ap.add_argument("--site-link", default="150mbit")
    ap.add_argument("--client-link", default="100mbit")
    ap.add_argument("--contenders", default="open,closed,closed-unsaid", help="which, comma-separated")
    args = ap.parse_args()
    bl.require_shaping("closed")
    bl.require("nft")
    n, size = args.t3s, units.parse_size(args.size)
    shaping.parse_rate(args.site_link), shaping.parse_rate(args.client_link)  # a bad rate stops here
    runs = args.runs or 3
    closed_host = f"t3-{n}"
    contenders = {"open": (False, {}), "closed": (True, {"BTSWARM_GET_CLOSED": "true"}),
                  "closed-unsaid": (True, {})}
    contenders = {name: contenders[name] for name in args.contenders.split(",")}
    doc: dict = {"sites": SITES, "t3s": n, "closed_host": closed_host, "size": size, "site_link": args.site_link,
                 "client_link": args.client_link, "machine": bl.machine(), "results": {}}
    with bl.workdir("closed", args.keep) as work:
        with bl.federation(work / "fed", [], sites=SITES, args=[
                "--hosts", "--t3-hosts", str(n), "--sample-files", "12", "--sample-size", str(size),
                "--site-link", args.site_link, "--client-link", args.client_link]) as fed:
            netns = fed.host(closed_host).netns
            bt_get_all(fed, n, work / "out", {})  # the seeds up, the page cache warm
            try:
                for r in range(runs):
                    for name, (closed, env) in contenders.items():
                        if closed:
                            firewall.apply(netns, firewall.closed())
                        else:
                            firewall.unblock(netns)
                        docs = dict(zip((f"t3-{k}" for k in range(1, n + 1)),
                                        bt_get_all(fed, n, work / "out", {}, per_host={closed_host: env})["docs"]))
                        f = figures(docs, closed_host, firewall.dropped(netns) if closed else 0)
                        doc["results"].setdefault(name, []).append(f)
                        bl.log(f"{name} run {r + 1}: closed T3 {f['closed_s']:.2f} s, the others median "
                               f"{f['others_median_s']:.2f} s (slowest {f['others_max_s']:.2f} s), the sites sent "
                               f"{f['site_copies']:.2f} copies, {f['dropped']} connection attempts dropped")
            finally:
                firewall.unblock(netns)
    rows = []
    for name, fs in doc["results"].items():
        rows.append([name, bl.median([f["closed_s"] for f in fs]), bl.median([f["others_median_s"] for f in fs]),
                     bl.median([f["others_max_s"] for f in fs]), bl.median([f["site_copies"] for f in fs]),
                     bl.median([f["dropped"] for f in fs])])
    bl.write_json(args.out, "closed", doc)
    print(f"closed: {SITES} sites at {args.site_link}, {n} T3s at {args.client_link} ({closed_host} closed in the "
          f"closed contenders), {size / 2**20:.0f} MiB, median of {runs}")
    print(bl.table(["contender", f"{closed_host}, s", "others median, s", "others slowest, s",
                    "copies from the sites", "SYNs dropped"], rows))
    return 0


def figures(docs: dict[str, dict], closed_host: str, dropped: int) -> dict:
    size = next(iter(docs.values()))["bytes_total"]
    others = sorted(d["seconds"] for h, d in docs.items() if h != closed_host)
    from_sites = sum(v for d in docs.values() for s, v in d["sources"].items() if s.startswith(("site", "web seed site")))
    return {"seconds": {h: d["seconds"] for h, d in docs.items()}, "closed_s": docs[closed_host]["seconds"],
            "others_median_s": bl.median(others), "others_max_s": others[-1], "site_copies": from_sites / size,
            "dropped": dropped, "sources": {h: d["sources"] for h, d in docs.items()},
            "web_seed_switches": {h: d["web_seed_switches"] for h, d in docs.items() if d["web_seed_switches"]}}


if __name__ == "__main__":
    sys.exit(main())
