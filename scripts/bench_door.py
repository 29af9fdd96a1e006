#!/usr/bin/env python3
"""Benchmark door: a storage door as the only web seed, bt-get from a real XRootD door (XrdHttp) against nginx, on a shaped link.

Debian's xrootd-server 5.5.3 does not answer pipelined requests (scripts/probe_pipelining.py);
bt-get asks every http web seed through its relay (btget/worker/doorrelay.py), so the door should
serve at the rate of a server that does pipeline. Each contender serves the same copy of a
generated multi-file dataset from a network namespace of its own making, where the door's and
nginx's answers (their source ports) leave through an htb class at RATE and everything else,
the relay's loopback hop included, is unshaped; bt-get runs there with `--web-seed URL` and
nothing else. Printed: median seconds of each, and door / nginx (the target: the door within
0.8 of nginx's rate, i.e. a ratio of seconds of at most 1.25).

    sudo python3 scripts/bench_door.py            # 30 files, 40 MiB, 100mbit, 3 runs
    sudo python3 scripts/bench_door.py --quick    # 12 files, 12 MiB

Root: a network namespace and tc.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import benchlib
from btswarm import netns
from torrents import build, sample

MiB = 2**20


def shaped(rate: str) -> list[list[str]]:
    """htb on lo: class 1:10 at `rate` (for the answers of the ports `through` puts there), all else unshaped."""
    return [["tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "20", "r2q", "1000"],
            ["tc", "class", "add", "dev", "lo", "parent", "1:", "classid", "1:10", "htb", "rate", rate],
            ["tc", "class", "add", "dev", "lo", "parent", "1:", "classid", "1:20", "htb", "rate", "10gbit"]]


def through(namespace: str, port: int) -> None:
    """What leaves `port` (a server's answers) takes the shaped class."""
    subprocess.run(["tc", "-n", namespace, "filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip", "prio", "1",
                    "u32", "match", "ip", "sport", str(port), "0xffff", "flowid", "1:10"], check=True)


def xrootd_config(home: Path, port: int, http: int) -> Path:
    cfg = home / "xrootd.cfg"
    cfg.write_text(f"all.export /\noss.localroot {home}/data\nall.adminpath {home}/admin\nall.pidpath {home}/admin\n"
                   f"xrd.port {port}\nxrd.protocol XrdHttp:{http} libXrdHttp.so\nhttp.listingdeny true\n")
    return cfg


def main() -> int:
    ap = benchlib.parser(__doc__)
    ap.add_argument("--rate", default="100mbit", help="the doors' link (tc rate)")
    args = ap.parse_args()
    benchlib.require("xrootd", "nginx", "setpriv")
    benchlib.require_shaping("bench_door")
    files, size = (12, 12 * MiB) if args.quick else (30, 40 * MiB)
    runs = args.runs or 3
    with benchlib.workdir("door", args.keep) as work:
        # Served from a directory of its own: xrootd runs as nobody (it refuses root), who cannot
        # read the 0700 work directory.
        home = Path(tempfile.mkdtemp(prefix="btswarm-door-", dir="/tmp"))
        name = netns.unique_name("btswarm-door")
        procs = benchlib.Procs()
        try:
            root = sample.generate(home / "data", files=files, total_size=size)
            data, _meta = build.build_torrent(root.name, [(p.name, p) for p in sorted(root.iterdir())])
            torrent = work / f"{root.name}.torrent"
            torrent.write_bytes(data)
            subprocess.run(["chown", "-R", "nobody:nogroup", str(home)], check=True)
            os.chmod(home, 0o755)
            ports = {k: benchlib.free_port("127.0.0.1") for k in ("xrootd", "door")}
            netns.create(name, shaped(args.rate))
            through(name, ports["door"])
            with netns.entered(name):
                procs.start(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "xrootd", "-c",
                             str(xrootd_config(home, ports["xrootd"], ports["door"])), "-l", str(home / "xrootd.log"),
                             "-n", "door"], work / "xrootd.stderr", cwd=str(home))
                benchlib.wait_for(lambda: benchlib.port_open("127.0.0.1", ports["door"]), 30, "xrootd's HTTP door")
                with benchlib.nginx(work, home / "data", ip="127.0.0.1") as web:
                    through(name, web.port)
                    urls = {"xrootd door": f"http://127.0.0.1:{ports['door']}/", "nginx": web.url("")}
                    seconds: dict[str, list[float]] = {k: [] for k in urls}
                    for run in range(runs):
                        for label, url in urls.items():
                            out = benchlib.fresh_dir(work / "out")
                            t = benchlib.timed([str(benchlib.BIN / "bt-get"), str(torrent), "-o", str(out),
                                                "--web-seed", url, "--json", "-q"], timeout=600)
                            doc = json.loads(t.stdout)
                            seconds[label].append(doc["seconds"])
                            benchlib.log(f"run {run + 1} {label}: {doc['seconds']:.2f} s")
        finally:
            procs.stop_all()
            netns.delete(name)
            shutil.rmtree(home, ignore_errors=True)
        door, web_s = benchlib.median(seconds["xrootd door"]), benchlib.median(seconds["nginx"])
        print(f"{files} files, {size / MiB:.0f} MiB, one web seed on a {args.rate} link, median of {runs}")
        print(benchlib.table(["web seed", "seconds (median)", "runs"],
                             [[k, f"{benchlib.median(v):.2f}", " ".join(f"{x:.2f}" for x in v)]
                              for k, v in seconds.items()]))
        print(f"xrootd door / nginx: {door / web_s:.2f}x the time, {web_s / door:.2f} of the rate (target >= 0.8)")
        benchlib.write_json(args.out, "door", {"machine": benchlib.machine(), "files": files, "bytes": size,
                                               "rate": args.rate, "seconds": seconds,
                                               "rate_ratio": web_s / door})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
