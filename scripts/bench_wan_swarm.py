"""Benchmark wan_swarm: N T3s at once on shaped links, each seeding on until the last is done, against Kumar-Ross.

    sudo .venv/bin/python scripts/bench_wan_swarm.py [--out DIR] [--quick] [--keep] [--runs N]
        [--rate 100mbit] [--client-rate 100mbit] [--rtt 0ms 40ms 100ms] [--client-rtt 0ms] [--link-mtu 65536]
        [--size 200M] [--clients 1 2 4 8] [--aria2c 8] [--no-curl] [--slow-clients 16 32] [--slow-rate 10mbit]

N T3s at once (N = 1, 2, 4, 8), each keeps seeding until the last is
done: time to the last completion vs N curls from one nginx behind R;
Kumar-Ross bound max(S/3R, N.S/(3R+N.C)); T2 egress (sites' bytes uploaded
/ S as libtorrent counts them, also what it wrote to sockets a T3 then
closed; and "wire": what the sites' uplinks, their htb classes, carried).
In the same runs, for N > 1, the same N bt-gets with btget/worker/siteshare.py
off ("every site") and, for N in --aria2c (8), N aria2c BitTorrent clients
(the .torrent with ?web_seeds=0, the same seeds, seeding on); each bt-get's
time to its first byte, and the fraction of the bound from the median first
byte on. The first run of the largest N <= 8 keeps a timeline of each
site's and client's uplink and each client's bytes on disk (plot_bench.py
draws wan-timeline.png). --no-curl leaves the curl baseline out; the curl
baseline (N x S/R by construction) is measured once per N, and in --quick
only up to N = 4 (larger N: N x the N = 1 time, marked).

Each bt-get run also says whether this host's cores were the limit: the
share of all cores busy over the run, to the median first byte and after
it (/proc/stat), and each part's CPU (clients, sites, tracker, repository,
btswarm up).

Then N = 16 and 32 (--slow-clients) in a federation of their own whose
sites and T3s all have --slow-rate (10 Mbit/s): at R = C = 100 Mbit/s 16 or
more bt-gets make this host's 2 cores the limit, not the links (the CPU
line says how busy they were). Bound and egress as above; no every-site,
curl or aria2c arm; one run per RTT with --quick. The links, the RTTs and
the results (OUT/wan_swarm.json) as every wan scenario: scripts/wanlib.py.
Root only (a network namespace).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import benchlib as bl
import wanlib
from wanclients import aria2c_many, bt_get_many, curl_many
from wanmeters import cpu_summary

from btswarm import shaping
from torrents import measuring

TARGETS = {  # issue 25's for 8 T3s and aria2c, the earlier ones for 16 and 32
    "swarm8_fraction": 0.85, "swarm8_egress_x": 1.2, "swarm8_vs_aria2c": 1.5,
    "swarm16_fraction": 0.8, "swarm16_egress_x": 1.3, "swarm32_fraction": 0.8, "swarm32_egress_x": 1.3,
}
EVERY_SITE = "bt-get, every site"  # the T3s as before btget/worker/siteshare.py: each keeps every site that unchokes it
# What each arm's runs are called in the results: its details, and the prefix of its medians in a row.
ARM_KEYS = {"bt-get": ("runs_detail", ""), EVERY_SITE: ("every_site_detail", "every_site_"),
            "aria2c": ("aria2c_detail", "aria2c_")}
RATIOS = {EVERY_SITE: "vs_every_site", "aria2c": "vs_aria2c"}


def options(ap) -> None:
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--aria2c", type=int, nargs="*", default=[8], help="N of the swarm also run with N aria2c")
    ap.add_argument("--no-curl", action="store_true", help="no curl baseline (diagnosis runs)")
    ap.add_argument("--slow-clients", type=int, nargs="*", default=[16, 32],
                    help="these N on links of --slow-rate, in a federation of their own (none: skip)")
    ap.add_argument("--slow-rate", default="10mbit", help="R = C of the --slow-clients swarm")


Runner = Callable[[int, bool], dict]  # (N, keep a timeline) -> one run's figures


def arms(fed: bl.Federation, work: Path, ds: dict, counts: list[int], aria2c_counts: list[int], every_site: bool
         ) -> dict[str, tuple[list[int], Runner]]:
    """The contenders of a swarm, in the order each run takes them: label -> (its N, runner(n, trace))."""
    torrent = wanlib.noweb_torrent(fed, ds["name"], work / f"{ds['name']}.noweb.torrent")

    def bt_get(env: dict[str, str] | None) -> Runner:
        return lambda n, trace: bt_get_many(fed, work, ds, [["--workers", "1"]] * n, True, [ds["bytes"]] * n,
                                            timeline=trace, env=env)

    out = {EVERY_SITE: ([n for n in counts if n > 1], bt_get({measuring.SITE_SHARE: "off"}))} \
        if every_site else {}
    out["bt-get"] = (counts, bt_get(None))
    out["aria2c"] = (aria2c_counts, lambda n, trace: aria2c_many(fed, work, ds, n, torrent, timeline=trace))
    return out


def run_arms(arms_: dict[str, tuple[list[int], Runner]], runs: int, counts: list[int], traced: int | None
             ) -> tuple[dict, dict]:
    """Every arm for every N in each run, alternated: label -> N -> runs; and the timelines kept."""
    detail = {label: {n: [] for n in ns} for label, (ns, _) in arms_.items()}
    timelines: dict[str, dict] = {}
    for run_no in range(runs):
        for n in counts:
            for label, (ns, runner) in arms_.items():
                if n not in ns:
                    continue
                trace = run_no == 0 and n == traced
                r = runner(n, trace)
                if trace:
                    timelines[label] = r.pop("timeline")
                detail[label][n].append(r)
                bl.log(f"swarm run {run_no + 1} {n:2d} {label}: last done {r['seconds']:6.2f} s, T2 egress "
                       f"{r['egress_x']:.2f}x (wire {r['wire_egress_x']:.2f}x)"
                       + (f", first byte {r['first_byte_s']:.1f} s" if "first_byte_s" in r else "")
                       + f", each {' '.join(f'{t:.1f}' for t in sorted(r['each_s']))}")
    return detail, timelines


def curl_times(srv: bl.Nginx | None, work: Path, ds: dict, counts: list[int], curl_upto: int) -> dict[int, dict]:
    """N curls from one nginx behind R for N <= `curl_upto` (and 1), N x the N = 1 time above; none if < 0."""
    curl: dict[int, dict] = {}
    for n in counts:
        if curl_upto < 0:  # --no-curl
            curl[n] = {"seconds": float("nan"), "measured": False}
            continue
        if n <= curl_upto or n == 1:
            curl[n] = {"seconds": curl_many(srv, work, ds, n), "measured": True}
        else:
            curl[n] = {"seconds": n * curl[1]["seconds"], "measured": False}
        bl.log(f"swarm {n:2d} curl: {curl[n]['seconds']:6.2f} s{'' if curl[n]['measured'] else ' (N x the N=1 time)'}")
    return curl


def row(detail: dict, n: int, bound: float, curl: dict) -> dict:
    """The medians of N T3s: bt-get against the bound and curl, the other arms beside it, the cores."""
    rs = detail["bt-get"][n]
    t = bl.median([r["seconds"] for r in rs])
    out = {"seconds": t, "bound_s": bound, "fraction": bound / t, "curl_s": curl["seconds"],
           "curl_measured": curl["measured"], "vs_curl": curl["seconds"] / t}
    for label, (_, prefix) in ARM_KEYS.items():
        others = detail.get(label, {}).get(n)
        if others:
            out.update({f"{prefix}egress_x": bl.median([r["egress_x"] for r in others]),
                        f"{prefix}wire_egress_x": bl.median([r["wire_egress_x"] for r in others])})
        if others and label in RATIOS:
            other_t = bl.median([r["seconds"] for r in others])
            out.update({f"{prefix}s": other_t, RATIOS[label]: other_t / t})
    out["first_byte_s"] = bl.median([r["first_byte_s"] for r in rs])
    shares = [cpu_summary(r["cpu"]) for r in rs]
    out["cpu"] = {k: bl.median([sh[k] for sh in shares]) for k in shares[0]}
    # The swarm without bt-get's process start (16 Python processes on this host's 2 cores): from the
    # median first byte of a run to its last completion.
    out["after_first_byte_s"] = bl.median([r["seconds"] - r["first_byte_s"] for r in rs])
    return out


def swarm(fed: bl.Federation, srv: bl.Nginx | None, work: Path, ds: dict, runs: int, counts: list[int],
          links: wanlib.Links, curl_upto: int, aria2c_counts: list[int], site_rates: list[int] | None = None,
          every_site: bool = True) -> dict:
    """N bt-gets at once, and N aria2c from the same seeds (the .torrent without web seeds) in the same runs;
    the first run of the largest N <= 8 keeps its timeline (who waited on whom). `site_rates`: the sites'
    uplinks when they differ (hetero), for the bound. `every_site`: also the same N with the site share off.
    `srv` (nginx) may be None when there is no curl baseline (`curl_upto` < 0)."""
    wanlib.seeds_everywhere(fed, fed.info_hash(ds["name"]))
    traced = max((n for n in counts if n <= 8), default=None)
    detail, timelines = run_arms(arms(fed, work, ds, counts, aria2c_counts, every_site), runs, counts, traced)
    curl = curl_times(srv, work, ds, counts, curl_upto)
    rates = site_rates or [links.rate] * len(fed.sites)
    rows = {str(n): row(detail, n, wanlib.kumar_ross(ds["bytes"], n, rates, links.client_rate), curl[n])
            for n in counts}
    return {"clients": counts, "median": rows, "timeline_n": traced, "timelines": timelines,
            **{key: {str(n): rs for n, rs in detail.get(label, {}).items()} for label, (key, _) in ARM_KEYS.items()}}


def run(work: Path, args, links: wanlib.Links, runs: int, doc: dict) -> None:
    ds = wanlib.wan_dataset(work, args, doc)
    with wanlib.noted(doc, "swarm"), wanlib.federation(work, links, ds["name"]) as (fed, srv):
        curl_upto = -1 if args.no_curl else 4 if args.quick else max(args.clients)
        doc["swarm"] = swarm(fed, srv, work, ds, runs, args.clients, links, curl_upto, args.aria2c)
    if not args.slow_clients:
        return
    slow = links.at(shaping.parse_rate(args.slow_rate, "--slow-rate"))
    # The warm-up fetches the dataset at 3 x --slow-rate: a longer timeout.
    with wanlib.noted(doc, "swarm_slow"), \
            wanlib.federation(work, slow, ds["name"], where="fedslow", baseline=False, timeout=1800) as (fed, _):
        doc["swarm_slow"] = swarm(fed, None, work, ds, 1 if args.quick else runs, args.slow_clients, slow, -1, [],
                                  every_site=False)
        doc["swarm_slow"]["rate"] = slow.rate


def report(doc: dict) -> None:
    if "swarm" in doc:
        print("swarm: N T3s at once")
        swarm_report(doc["swarm"]["median"])
    if "swarm_slow" in doc:
        print(f"swarm: N T3s at once, every site and T3 at {shaping.format_rate(doc['swarm_slow']['rate'])} "
              "(at the full rates this host's cores would be the limit)")
        swarm_report(doc["swarm_slow"]["median"])


def swarm_table(m: dict) -> str:
    return bl.table(["N", "bt-get s", "KR bound s", "fraction", "egress x", "wire x", "1st byte s", "every site s",
                     "egress x", "wire x", "curl s", "x curl", "aria2c s", "egress x", "wire x", "x aria2c"],
                    [[n, r["seconds"], r["bound_s"], r["fraction"], r["egress_x"], r.get("wire_egress_x", "-"),
                      r.get("first_byte_s", "-"), r.get("every_site_s", "-"), r.get("every_site_egress_x", "-"),
                      r.get("every_site_wire_egress_x", "-"),
                      f"{r['curl_s']:.1f}{'' if r['curl_measured'] else '*'}", r["vs_curl"],
                      r.get("aria2c_s", "-"), r.get("aria2c_egress_x", "-"), r.get("aria2c_wire_egress_x", "-"),
                      r.get("vs_aria2c", "-")]
                     for n, r in m.items()])


def swarm_report(m: dict) -> None:
    """The table of N T3s at once, how busy the host was, and the issue's targets for N = 8, 16 and 32."""
    line = wanlib.line
    print(swarm_table(m))
    print("  (every site: the T3s keep every site that unchokes them, as before btget/worker/siteshare.py; "
          "aria2c: the same .torrent without web seeds, from the same seeds; egress: what the sites' libtorrent "
          "wrote to its sockets, wire: what their uplinks carried)")
    for n, r in m.items():
        if "cpu" in r:
            c = r["cpu"]
            print(f"  {n} T3s: the host's cores {c['host_busy']:.0%} busy over the run ("
                  f"{c['host_busy_to_first_byte']:.0%} to the median first byte, {c['host_busy_after_first_byte']:.0%} "
                  f"after); a bt-get (parent and worker) {c['client_core_share']:.0%} of a core, the busiest "
                  f"site {c['site_core_share']:.0%}")
    for n, r in m.items():
        print(line(f"{n} T3s: from the median first byte to the last done: fraction of the bound",
                   r["bound_s"] / r["after_first_byte_s"], f"{r['after_first_byte_s']:.2f} s", "(start left out)"))
    if "8" in m:
        print(line("8 T3s: fraction of the Kumar-Ross bound", m["8"]["fraction"], "", ">= 0.85"))
        print(line("8 T3s: T2 egress (x dataset)", m["8"]["egress_x"], "", "<= 1.2"))
        print(line("8 T3s: T2 egress on the wire (x dataset)", m["8"]["wire_egress_x"], "", "<= 1.2"))
        if "vs_aria2c" in m["8"]:
            print(line("8 T3s: 8 aria2c last done / 8 bt-get last done", m["8"]["vs_aria2c"],
                       f"aria2c {m['8']['aria2c_s']:.2f} s", ">= 1.5"))
    for n in ("16", "32"):
        if n in m:
            print(line(f"{n} T3s: fraction of the Kumar-Ross bound", m[n]["fraction"], "", ">= 0.8"))
            print(line(f"{n} T3s: T2 egress on the wire (x dataset)", m[n]["wire_egress_x"],
                       f"counted {m[n]['egress_x']:.2f}x", "<= 1.3"))


def figures(doc: dict) -> dict[str, float]:
    out = {f"{n} T3s at once, last done": r["seconds"] for n, r in doc.get("swarm", {}).get("median", {}).items()}
    if "swarm_slow" in doc:
        slow = shaping.format_rate(doc["swarm_slow"]["rate"])
        out.update({f"{n} T3s at once at {slow}, last done": r["seconds"]
                    for n, r in doc["swarm_slow"]["median"].items()})
    return out


if __name__ == "__main__":
    sys.exit(wanlib.main(wanlib.Scenario("swarm", __doc__, run, report, TARGETS, options, figures)))
