"""Benchmark hosts: N T3s at once on hosts of their own (`btswarm up --hosts`), bt-get with its defaults.

    sudo .venv/bin/python scripts/bench_hosts.py [--t3s 2,4] [--size 96M] [--site-link 150mbit]
        [--client-link 100mbit] [--runs 3] [--variant NAME:VAR=VALUE] [--out DIR] [--keep]

The federation as it is deployed: the tracker and the repository on one
host, each of 2 sites on its own, each T3 on its own, every uplink shaped
on its host's interface (btswarm/hosts.py). Each run starts N bt-gets at
once, one per T3 host, given only the repository (`btswarm run --host`'s
environment), and reports each T3's time, the last one against the
Kumar-Ross bound max(S/ΣR, N·S/(ΣR + N·C)) (downlinks free), and the
copies of the dataset the sites sent (their peer wire and web seeds, as
the T3s' --json counts them). `--variant` runs a second contender
alternated with the defaults, with one variable set in the T3s'
environment (e.g. `rules-off:BTSWARM_GET_SITE_SHARE=false`); medians of
the runs. Root only (network namespaces).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import benchlib as bl

from btswarm import netns, run, shaping
from torrents import units

SITES = 2


def fetch_all(fed: bl.Federation, n: int, out: Path, env: dict[str, str],
              per_host: dict[str, dict[str, str]] | None = None) -> list[dict]:
    """N bt-gets at once, one per T3 host (t3-1 first), with `env` and the host's own in `per_host`; their --json
    documents."""
    procs = []
    for k in range(1, n + 1):
        host = fed.host(f"t3-{k}")
        dest = bl.fresh_dir(out / host.name)
        argv = [str(bl.BIN / "bt-get"), fed.datasets[0], "-o", str(dest), "--json", "--timeout", "600"]
        own = (per_host or {}).get(host.name, {})
        procs.append(subprocess.Popen(argv, env=run.host_env(fed.ready, host, {**os.environ, **env, **own}),
                                      preexec_fn=netns.preexec(host.netns), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    docs = []
    for p in procs:
        out_text, err = p.communicate(timeout=900)
        if p.returncode != 0:
            raise SystemExit(f"bt-get on a T3 host: exit {p.returncode}: {err.strip()[-2000:]}")
        docs.append(json.loads(out_text))
    return docs


def figures(docs: list[dict], bound: float) -> dict:
    size = docs[0]["bytes_total"]
    from_sites = sum(v for d in docs for s, v in d["sources"].items() if s.startswith(("site", "web seed site")))
    times = sorted(d["seconds"] for d in docs)
    return {"seconds": times, "last": times[-1], "of_bound": bound / times[-1], "site_copies": from_sites / size}


def main() -> int:
    ap = bl.parser(__doc__)
    ap.add_argument("--t3s", default="2,4", help="T3 counts, comma-separated")
    ap.add_argument("--size", default="96M", help="the dataset (12 files)")
    ap.add_argument("--site-link", default="150mbit")
    ap.add_argument("--client-link", default="100mbit")
    ap.add_argument("--variant", default="", help="NAME:VAR=VALUE, alternated with the defaults")
    args = ap.parse_args()
    bl.require_shaping("hosts")
    counts = [int(c) for c in args.t3s.split(",")]
    size = units.parse_size(args.size)
    site_rate, client_rate = shaping.parse_rate(args.site_link), shaping.parse_rate(args.client_link)
    contenders = {"defaults": {}}
    if args.variant:
        name, _, assignment = args.variant.partition(":")
        var, _, value = assignment.partition("=")
        contenders[name] = {var: value}
    runs = args.runs or 3
    doc: dict = {"sites": SITES, "size": size, "site_link": args.site_link, "client_link": args.client_link,
                 "results": {}}
    with bl.workdir("hosts", args.keep) as work:
        for n in counts:
            bound = max(size * 8 / (SITES * site_rate), n * size * 8 / (SITES * site_rate + n * client_rate))
            with bl.federation(work / f"fed{n}", [], sites=SITES, args=[
                    "--hosts", "--t3-hosts", str(n), "--sample-files", "12", "--sample-size", str(size),
                    "--site-link", args.site_link, "--client-link", args.client_link]) as fed:
                fetch_all(fed, n, work / "out", {})  # the seeds up, the page cache warm
                for r in range(runs):
                    for name, env in contenders.items():
                        f = figures(fetch_all(fed, n, work / "out", env), bound)
                        doc["results"].setdefault(str(n), {}).setdefault(name, []).append(f)
                        bl.log(f"N={n} {name} run {r + 1}: last {f['last']:.2f} s ({f['of_bound']:.2f} of the "
                               f"bound {bound:.2f} s), the sites sent {f['site_copies']:.2f} copies")
            doc.setdefault("bounds", {})[str(n)] = bound
    rows = []
    for n, by in doc["results"].items():
        for name, fs in by.items():
            rows.append([n, name, bl.median([f["last"] for f in fs]), bl.median([f["of_bound"] for f in fs]),
                         bl.median([f["site_copies"] for f in fs])])
    bl.write_json(args.out, "hosts", doc)
    print(f"hosts: {SITES} sites at {args.site_link}, T3s at {args.client_link}, {size / 2**20:.0f} MiB, "
          f"median of {runs}")
    print(bl.table(["T3s", "contender", "last done, s", "of the bound", "copies from the sites"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
