"""Benchmark hosts: N T3s at once on hosts of their own (`btswarm up --hosts`), bt-get with its defaults.

    sudo .venv/bin/python scripts/bench_hosts.py [--t3s 2,4] [--sites 2] [--size 96M] [--files 12]
        [--site-link 150mbit] [--client-link 100mbit] [--rtt 0ms 100ms] [--runs 3]
        [--variant NAME:VAR=VALUE] [--aria2c] [--ideal] [--name hosts] [--out DIR] [--keep]

The federation as it is deployed: the tracker and the repository on one
host, each site on its own, each T3 on its own, every uplink shaped on its
host's interface (btswarm/hosts.py). Each run starts N bt-gets at once,
one per T3 host, given only the repository (`btswarm run --host`'s
environment), and reports each T3's time, the last one against the
Kumar-Ross bound max(S/ΣR, N·S/(ΣR + N·C)) (downlinks free), and the
copies of the dataset the sites sent: what their uplinks' htb classes
carried (headers too), and for bt-get what its --json counts from them.
`--variant` runs a second contender alternated with the defaults, with one
variable set in the T3s' environment (e.g.
`rules-off:BTSWARM_BENCH_SITE_SHARE=off`); medians of the runs.

The wan scenarios on hosts (bench_wan_swarm.py, on the shared loopback):
`--rtt 0ms 100ms` gives every site's link that round trip (a federation
per RTT; T3s side by side), `--aria2c` alternates N aria2c BitTorrent
clients with the bt-gets in each run (the .torrent without web seeds, the
same seeds), and every contender then seeds on until the last T3 is done,
as bench_wan_swarm.py does. N = 1 is bench_wan_single.py (one T3 from
all sites). `--shards` is bench_wan_batch.py: N T3s at once, T3 k fetching
`bt-get --shard k/N`, against S/ΣR. `--ideal` adds the bound's own
schedule as plain TCP flows between the same hosts (scripts/idealflows.py):
what these links, this machine and its load allow any client, so that
bt-get's ratio to it is the product's part of the gap to the bound. Root
only (network namespaces).

    sudo .venv/bin/python scripts/bench_hosts.py --sites 3 --site-link 100mbit --client-link 100mbit \\
        --size 100M --files 29 --t3s 1,2,4 --rtt 0ms 100ms --aria2c --runs 2 --name hosts-wan
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Callable

import benchlib as bl
import idealflows
import wanlib
from wanclients import aria2c_hook, completion_times, marked_done

from btswarm import netns, run, shaping
from torrents import units

ARIA2C_PORT = 6891  # each T3 host has its own stack: one port for all
Contender = Callable[[bl.Federation, int, Path], dict]


def bt_get_all(fed: bl.Federation, n: int, work: Path, env: dict[str, str], seed: bool = False,
               shards: bool = False, per_host: dict[str, dict[str, str]] | None = None) -> dict:
    """N bt-gets at once, one per T3 host (t3-1 first), given only the repository, with `env` and the host's
    own in `per_host`; `seed`: each seeds on until the last is done; `shards`: T3 k fetches `--shard k/N`
    only. → each one's seconds to completion, the copies the sites sent by their own count, and each one's
    --json document (`docs`)."""
    name = fed.datasets[0]
    outs, logs, docs = [], [], []
    with bl.Procs() as procs:
        t0 = time.monotonic()
        for k in range(1, n + 1):
            host = fed.host(f"t3-{k}")
            outs.append(bl.fresh_dir(work / host.name))
            logs.append(work / f"{host.name}.log")
            logs[-1].write_text("")
            docs.append(work / f"{host.name}.json")
            argv = [str(bl.BIN / "bt-get"), name, "-o", str(outs[-1]), "--json", "--timeout", "900", "-v",
                    *(["--seed-time", wanlib.SEED_TIME] if seed else []), *(["--shard", f"{k}/{n}"] if shards else [])]
            procs.start(argv, logs[-1], stdout=open(docs[-1], "wb"),
                        env=run.host_env(fed.ready, host, {**os.environ, **env, **(per_host or {}).get(host.name, {})}),
                        preexec_fn=netns.preexec(host.netns))
        clients = list(procs.procs)
        times = completion_times(logs, clients, t0, 900, seed)
        codes = [procs.stop(c) for c in clients]
    if any(codes):
        raise SystemExit(f"bt-get on T3 hosts exited {codes}; see {work}/t3-*.log")
    size = 0
    from_sites = 0
    parsed = []
    for out, doc in zip(outs, docs):
        got = json.loads(doc.read_text())
        parsed.append(got)
        size += got["bytes_total"]
        wanlib.check_complete(str(out), out / name, got["bytes_total"])
        from_sites += sum(v for s, v in got["sources"].items() if s.startswith(("site", "web seed site")))
    return {"seconds": times, "site_copies": from_sites / (size if shards else size / n), "docs": parsed}


def aria2c_all(fed: bl.Federation, n: int, work: Path) -> dict:
    """N aria2c BitTorrent clients at once, one per T3 host, from the same seeds (the .torrent without web
    seeds), each seeding on until the last is done (its on-bt-download-complete hook marks completion)."""
    name = fed.datasets[0]
    torrent = wanlib.noweb_torrent(fed, name, work / "noweb.torrent")
    outs, marks = [], []
    with bl.Procs() as procs:
        t0 = time.monotonic()
        for k in range(1, n + 1):
            host = fed.host(f"t3-{k}")
            outs.append(bl.fresh_dir(work / f"aria-{host.name}"))
            mark, hook = aria2c_hook(work, f"aria-{host.name}")
            marks.append(mark)
            procs.start([*wanlib.aria2c_cmd(torrent, outs[-1], host.address, seed=True, port=ARIA2C_PORT),
                         f"--on-bt-download-complete={hook}"], work / f"aria-{host.name}.log",
                        preexec_fn=netns.preexec(host.netns))
        clients = list(procs.procs)
        done = marked_done(clients, marks, t0, lambda k: f"aria2c on t3-{k + 1}", str(work))
    for out in outs:
        wanlib.check_complete(str(out), out / name, bl.dataset_size(fed.data / name))
    return {"seconds": [done[k] for k in range(n)]}


def measured(fed: bl.Federation, contender: Contender, n: int, work: Path, size: int, bound: float) -> dict:
    """One contender's run: its figures, the last T3's time against the bound, and the copies the sites'
    uplinks carried."""
    site_ips = [fed.host(s.name).address for s in fed.sites]
    before = fed.link_bytes()
    f = contender(fed, n, work)
    sent = fed.link_bytes()
    bound = f.pop("bound", bound)
    f["seconds"] = sorted(f["seconds"])
    f.update(last=f["seconds"][-1], bound=bound, of_bound=bound / f["seconds"][-1],
             wire_copies=sum(sent[ip] - before[ip] for ip in site_ips) / size)
    return f


def parse_args():
    ap = bl.parser(__doc__)
    ap.add_argument("--t3s", default="2,4", help="T3 counts, comma-separated")
    ap.add_argument("--sites", type=int, default=2)
    ap.add_argument("--size", default="96M", help="the dataset")
    ap.add_argument("--files", type=int, default=12, help="files in the dataset")
    ap.add_argument("--site-link", default="150mbit")
    ap.add_argument("--client-link", default="100mbit")
    ap.add_argument("--rtt", nargs="+", default=["0ms"], help="the round trip each site's link adds; a federation "
                                                              "for each")
    ap.add_argument("--variant", default="", help="NAME:VAR=VALUE, alternated with the defaults")
    ap.add_argument("--aria2c", action="store_true", help="N aria2c alternated with the bt-gets; all seed on until "
                                                          "the last is done")
    ap.add_argument("--ideal", action="store_true", help="the bound's schedule as plain TCP flows between the same "
                                                         "hosts, alternated with the others")
    ap.add_argument("--shards", action="store_true", help="also N T3s fetching `--shard k/N` each (bound S/ΣR)")
    ap.add_argument("--name", default="hosts", help="the results' file: OUT/NAME.json")
    return ap.parse_args()


def contenders_of(args, size: int, site_rate: int) -> dict[str, Contender]:
    """The defaults first (the others' ratios are to them), then --variant, --aria2c, --ideal and --shards."""
    seed = args.aria2c
    contenders: dict[str, Contender] = {"defaults": lambda fed, n, work: bt_get_all(fed, n, work, {}, seed)}
    if args.variant:
        name, _, assignment = args.variant.partition(":")
        var, _, value = assignment.partition("=")
        contenders[name] = lambda fed, n, work: bt_get_all(fed, n, work, {var: value}, seed)
    if args.aria2c:
        contenders["aria2c"] = aria2c_all
    if args.ideal:
        client_rate = shaping.parse_rate(args.client_link)
        contenders["tcp-ideal"] = lambda fed, n, work: idealflows.ideal_all(fed, n, work / "ideal", size,
                                                                            site_rate / 8, client_rate / 8)
    if args.shards:
        contenders["shards"] = lambda fed, n, work: {**bt_get_all(fed, n, work, {}, shards=True),
                                                     "bound": size * 8 / (args.sites * site_rate)}
    return contenders


def alternated(fed: bl.Federation, contenders: dict[str, Contender], n: int, work: Path, runs: int, size: int,
               bound: float, tag: str) -> dict[str, list[dict]]:
    """Every contender once in each run (shards only for N > 1), after a warm-up: their figures by name."""
    wanlib.seeds_everywhere(fed, fed.info_hash(fed.datasets[0]))
    bt_get_all(fed, n, work, {})  # the seeds up, the page cache warm
    by: dict[str, list[dict]] = {}
    for r in range(runs):
        for name, contender in contenders.items():
            if name == "shards" and n == 1:
                continue
            f = measured(fed, contender, n, work, size, bound)
            by.setdefault(name, []).append(f)
            bl.log(f"{tag} N={n} {name} run {r + 1}: last {f['last']:.2f} s ({f['of_bound']:.2f} of the bound "
                   f"{f['bound']:.2f} s), the sites' uplinks carried {f['wire_copies']:.2f} copies")
    return by


def measure(args, contenders: dict[str, Contender], work: Path, doc: dict) -> None:
    """A federation for each RTT and N (T3 hosts), the contenders alternated in it; into doc's results."""
    size = doc["size"]
    site_rate, client_rate = shaping.parse_rate(args.site_link), shaping.parse_rate(args.client_link)
    for rtt in (shaping.parse_delay(r, "--rtt") for r in args.rtt):
        site_link = str(shaping.LinkSpec(site_rate, rtt))
        by_rtt = doc["results"].setdefault(shaping.format_delay(rtt), {})
        for n in (int(c) for c in args.t3s.split(",")):
            bound = wanlib.kumar_ross(size, n, [site_rate] * args.sites, client_rate)
            doc["bounds"][str(n)] = bound
            with bl.federation(work / f"fed{n}", [], sites=args.sites, args=[
                    "--hosts", "--t3-hosts", str(n), "--sample-files", str(args.files), "--sample-size",
                    str(size), "--site-link", site_link, "--client-link", args.client_link]) as fed:
                by_rtt[str(n)] = alternated(fed, contenders, n, work / "out", doc["runs"], size, bound,
                                            f"RTT {shaping.format_delay(rtt)}")


def report(doc: dict, first: str, seeding: bool) -> None:
    """Each contender's medians by RTT and N, and its ratio to `first`'s run by run."""
    print(f"hosts: {doc['sites']} sites at {doc['site_link']}, T3s at {doc['client_link']}, "
          f"{doc['size'] / 2**20:.0f} MiB in {doc['files']} files, median of {doc['runs']}"
          + (" (every contender seeds on until the last is done)" if seeding else ""))
    rows = []
    for rtt, by_n in doc["results"].items():
        for n, by in by_n.items():
            for name, fs in by.items():
                # Alternated within each run: a run's ratio compares contenders under the same load.
                ratio = bl.median([f["last"] / g["last"] for f, g in zip(fs, by[first])])
                rows.append([rtt, n, name, bl.median([f["last"] for f in fs]), bl.median([f["of_bound"] for f in fs]),
                             bl.median([f["wire_copies"] for f in fs]),
                             bl.median([f["site_copies"] for f in fs]) if "site_copies" in fs[0] else "-", ratio])
    print(bl.table(["RTT", "T3s", "contender", "last done, s", "of the bound", "copies on the sites' wire",
                    "copies (bt-get's count)", f"/ {first}"], rows))


def main() -> int:
    args = parse_args()
    bl.require_shaping("hosts")
    size = units.parse_size(args.size)
    contenders = contenders_of(args, size, shaping.parse_rate(args.site_link))
    doc: dict = {"sites": args.sites, "size": size, "files": args.files, "site_link": args.site_link,
                 "client_link": args.client_link, "runs": args.runs or 3, "results": {}, "bounds": {}}
    with bl.workdir("hosts", args.keep) as work:
        measure(args, contenders, work, doc)
    bl.write_json(args.out, args.name, doc)
    report(doc, next(iter(contenders)), args.aria2c)
    return 0


if __name__ == "__main__":
    sys.exit(main())
