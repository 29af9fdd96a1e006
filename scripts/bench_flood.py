"""Benchmark flood: a site's rate to a real bt-get while its peer port is flooded, against the same unloaded.

    .venv/bin/python scripts/bench_flood.py [--out DIR] [--quick] [--keep] [--runs 5] [--rate BYTES_PER_S]

A federation of one site (`btswarm up --sites 1`, its uploads limited to
`--rate`, default 16 MB/s: a site's uplink) holding a 64 MiB dataset
(32 MiB with --quick). After a warm-up fetch that starts the seed, each run
is one bt-get unloaded and one while scripts/peerflood.py floods the site's
peer port: 1,000 connections opened and closed, 200 held idle without a
handshake, 5,000 bogus handshakes (random info-hash or 68 random bytes),
paced over ~8 s; the fetch starts once the idle connections are up. Figure:
bt-get's rate (--json `rate`) under the flood / unloaded, median of the
runs; target >= 0.8. Also the site's RSS and open file descriptors before
the flood and after it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import benchlib as bl

TARGET = 0.8
PEERFLOOD = Path(__file__).with_name("peerflood.py")


def fetch(fed: bl.Federation, name: str, out: Path) -> float:
    t = bl.timed(bl.bt_get_cmd(fed, name, bl.fresh_dir(out), bl.client_ip(0)), 600)
    return float(json.loads(t.stdout)["rate"])


fds = bl.proclib.fd_count


def rss_kib(pid: int) -> int:
    return bl.proclib.status_kib(pid).get("VmRSS", 0)


def flooded_fetch(fed: bl.Federation, name: str, out: Path, log: Path) -> tuple[float, dict]:
    with open(log, "w") as f:
        flood = subprocess.Popen([sys.executable, str(PEERFLOOD), fed.sites[0].peer, "--hold", "8"],
                                 stdout=f, stderr=subprocess.STDOUT)
    try:
        bl.wait_for(lambda: '"flooding"' in log.read_text() or flood.poll() is not None, 30, "the flood to start")
        rate = fetch(fed, name, out)
        if flood.poll() is not None:
            raise SystemExit("bench_flood: the flood ended before the fetch; a larger dataset is needed")
        flood.wait(90)
    finally:
        if flood.poll() is None:
            flood.terminate()
            flood.wait(10)
    return rate, json.loads(log.read_text().strip().splitlines()[-1])


def run(work: Path, runs: int, size: int, rate_limit: int) -> dict:
    from torrents import sample

    name = "bench.flood"
    sample.generate(work / "data", name=name, files=8, total_size=size)
    rows = []
    with bl.federation(work / "fed", work / "data", sites=1, idle_ttl="10m",
                       env={"BTSWARM_SERVER_UPLOAD_RATE_LIMIT": str(rate_limit)} if rate_limit else None) as fed:
        pid = next(p for label, p in fed.pids().items() if label == fed.sites[0].name)
        fetch(fed, name, work / "out")  # starts the seed
        for k in range(runs):
            unloaded = fetch(fed, name, work / "out")
            fds_before, rss_before = fds(pid), rss_kib(pid)
            loaded, counts = flooded_fetch(fed, name, work / "out", work / f"flood-{k}.log")
            rss_after = rss_kib(pid)
            bl.wait_for(lambda: fds(pid) <= fds_before + 5, 30, "the site to close the flood's sockets", interval=0.5)
            time.sleep(1)
            rows.append({"unloaded_mb_s": unloaded / 1e6, "flooded_mb_s": loaded / 1e6, "ratio": loaded / unloaded,
                         "fds_before": fds_before, "fds_after": fds(pid), "rss_before_kib": rss_before,
                         "rss_after_kib": rss_after, "flood": counts})
            bl.log(f"run {k + 1}: {unloaded / 1e6:.1f} MB/s unloaded, {loaded / 1e6:.1f} MB/s flooded "
                   f"({loaded / unloaded:.2f}x); fds {fds_before} -> {fds(pid)}, RSS {rss_before} -> {rss_after} KiB")
    med = {key: bl.median([r[key] for r in rows]) for key in ("unloaded_mb_s", "flooded_mb_s", "ratio")}
    return {"runs": runs, "bytes": size, "upload_rate_limit": rate_limit, "median": med, "target": TARGET,
            "runs_detail": rows}


def main() -> int:
    ap = bl.parser(__doc__)
    ap.add_argument("--rate", type=int, default=16_000_000, help="the site's upload limit, bytes/s (0: none)")
    args = ap.parse_args()
    runs = args.runs or (3 if args.quick else 5)
    size = (32 if args.quick else 64) * 2**20
    with bl.workdir("flood", args.keep) as work:
        doc = run(work, runs, size, args.rate)
    bl.write_json(args.out, "flood", doc)
    m = doc["median"]
    print(f"flood: bt-get from one site under a peer-port flood, median of {runs}")
    print(bl.table(["unloaded MB/s", "flooded MB/s", "ratio", "target"],
                   [[m["unloaded_mb_s"], m["flooded_mb_s"], m["ratio"], TARGET]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
