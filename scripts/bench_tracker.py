#!/usr/bin/env python3
"""Benchmark tracker: announces per second and CPU per announce, bt-tracker against Debian's opentracker.

    .venv/bin/python scripts/bench_tracker.py [--out DIR] [--quick] [--keep] [--runs 3]
        [--duration 5] [--connections 16]

Both run on loopback in the same run, driven by wrk with one connection per
request (`Connection: close`, as most clients announce), each request
picking one of the same 1,000 published info-hashes at random with a
random peer id and port. bt-tracker runs with --open; opentracker reads
the 1,000 hashes from its whitelist (-w inside its -d chroot; the Debian
build accepts nothing else). CPU per announce is the tracker process's
utime+stime delta from /proc/PID/stat over the requests wrk completed,
also reported split into user and kernel time: the kernel's share (accept,
read, write, close on loopback) is what no tracker can shed, so it shows how
much of the gap is Python. bt-tracker is the real `bt-tracker run`, whose
announces go through tracker/fastpath.py.
The median of --runs runs (default 3) of --duration seconds (default 5,
--quick 3) is reported, the two trackers taking turns; JSON goes to
DIR/tracker.json. Target: bt-tracker >= 0.5x opentracker's announces/s.
On a shared machine compare the ratio, not the absolute figures.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import benchlib as bl

TARGET = 0.5
IP = "127.0.0.1"

LUA = r"""
local hashes = { %(hashes)s }
local n = #hashes
math.randomseed(%(seed)d)
local chars = "0123456789abcdefghijklmnopqrstuvwxyz"

local function peer_id()
  local t = {"-WR0001-"}
  for i = 1, 12 do
    local k = math.random(1, #chars)
    t[#t + 1] = chars:sub(k, k)
  end
  return table.concat(t)
end

request = function()
  local path = "/announce?info_hash=" .. hashes[math.random(1, n)] ..
    "&peer_id=" .. peer_id() .. "&port=" .. math.random(1025, 65535) ..
    "&uploaded=0&downloaded=0&left=" .. (math.random(0, 3) == 0 and 0 or 1048576) ..
    "&compact=1&numwant=50&event=started"
  return wrk.format("GET", path, {["Connection"] = "close"})
end

done = function(summary, latency, requests)
  io.write(string.format("WRKJSON {\"requests\": %%d, \"connect_errors\": %%d, \"read_errors\": %%d, " ..
    "\"status_errors\": %%d, \"timeouts\": %%d, \"duration_us\": %%d}\n",
    summary.requests, summary.errors.connect, summary.errors.read, summary.errors.status,
    summary.errors.timeout, summary.duration))
end
"""


def check_answer(url: str, info_hash: bytes) -> bytes:
    """One real announce, to be sure the tracker accepts the published hashes (not just answers failures)."""
    from urllib.parse import quote_from_bytes
    q = (f"/announce?info_hash={quote_from_bytes(info_hash)}&peer_id=-CHECK0-000000000000&port=7000"
         "&uploaded=0&downloaded=0&left=1&compact=1")
    with urllib.request.urlopen(url + q, timeout=5) as resp:
        body = resp.read()
    if b"failure reason" in body:
        raise SystemExit(f"bench: {url}: announce refused: {body[:200]!r}")
    return body


def run_wrk(url: str, script: Path, duration: float, connections: int) -> dict:
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{duration:g}s", "-s", str(script), url],
                         capture_output=True, text=True, timeout=duration + 30)
    m = re.search(r"WRKJSON (\{.*\})", out.stdout)
    if not m:
        raise SystemExit(f"bench: wrk gave no summary:\n{out.stdout}\n{out.stderr}")
    return json.loads(m.group(1))


def measure(name: str, pid: int, url: str, script: Path, duration: float, connections: int) -> dict:
    user0, sys0 = bl.cpu_times(pid)
    stats = run_wrk(url, script, duration, connections)
    user1, sys1 = bl.cpu_times(pid)
    reqs = max(1, stats["requests"])
    result = {"tracker": name, "announces_per_s": stats["requests"] / (stats["duration_us"] / 1e6),
              "cpu_us_per_announce": (user1 - user0 + sys1 - sys0) / reqs * 1e6,
              "user_us_per_announce": (user1 - user0) / reqs * 1e6,
              "sys_us_per_announce": (sys1 - sys0) / reqs * 1e6, **stats}
    bl.log(f"  {name:12s} {result['announces_per_s']:8.0f} announces/s  "
           f"{result['cpu_us_per_announce']:6.1f} µs CPU/announce "
           f"({result['user_us_per_announce']:.0f} user + {result['sys_us_per_announce']:.0f} kernel)  "
           f"(errors: connect {stats['connect_errors']}, read {stats['read_errors']}, "
           f"status {stats['status_errors']}, timeout {stats['timeouts']})")
    return result


def run(work: Path, duration: float, runs: int, connections: int) -> dict:
    rng = random.Random(1)
    hashes = [rng.randbytes(20) for _ in range(1000)]
    script = work / "announce.lua"
    script.write_text(LUA % {"hashes": ", ".join('"%s"' % "".join(f"%{b:02X}" for b in h) for h in hashes),
                             "seed": 42})
    chroot = work / "ot"
    chroot.mkdir()
    (chroot / "whitelist.txt").write_text("".join(h.hex() + "\n" for h in hashes))
    bt_port, ot_port, ot_udp = bl.free_port(IP), bl.free_port(IP), bl.free_port(IP)
    with bl.Procs() as procs:  # both trackers stopped by PID on the way out, errors included
        bt = procs.start([str(bl.BIN / "bt-tracker"), "run", "--listen", f"{IP}:{bt_port}", "--open"],
                         work / "bt-tracker.log", stdout=subprocess.DEVNULL)
        ot = procs.start(["opentracker", "-i", IP, "-p", str(ot_port), "-P", str(ot_udp),
                          "-d", str(chroot), "-w", "whitelist.txt", "-u", "nobody"],
                         work / "opentracker.log", stdout=subprocess.DEVNULL)
        for proc, port in ((bt, bt_port), (ot, ot_port)):
            bl.wait_for(lambda: bl.port_open(IP, port) or proc.poll() is not None, 15, f"{IP}:{port} to listen")
            if proc.poll() is not None:
                raise SystemExit(f"bench: {proc.args[0]} exited {proc.returncode}; see {work}")
        bt_url, ot_url = f"http://{IP}:{bt_port}", f"http://{IP}:{ot_port}"
        check_answer(bt_url, hashes[0])
        check_answer(ot_url, hashes[0])
        detail: dict[str, list[dict]] = {"bt-tracker": [], "opentracker": []}
        for i in range(runs):
            bl.log(f"run {i + 1}/{runs}")
            # Alternate the order so neither always runs on a warmer machine.
            order = [("bt-tracker", bt, bt_url), ("opentracker", ot, ot_url)]
            for name, proc, url in (order if i % 2 == 0 else order[::-1]):
                detail[name].append(measure(name, proc.pid, url, script, duration, connections))
    summary = {name: {key: bl.median([r[key] for r in rs]) for key in
                      ("announces_per_s", "cpu_us_per_announce", "user_us_per_announce", "sys_us_per_announce")}
               for name, rs in detail.items()}
    ratio = summary["bt-tracker"]["announces_per_s"] / summary["opentracker"]["announces_per_s"]
    cpu_ratio = summary["opentracker"]["cpu_us_per_announce"] / summary["bt-tracker"]["cpu_us_per_announce"]
    # Each run measures the two back to back: on a shared machine the
    # ratio within a run is steadier than the ratio of the two medians,
    # which may come from runs under different loads.
    paired = [b["announces_per_s"] / o["announces_per_s"]
              for b, o in zip(detail["bt-tracker"], detail["opentracker"])]
    return {"what": "tracker announces, one connection per request (wrk, Connection: close)",
            "duration_s": duration, "runs": runs, "connections": connections, "info_hashes": len(hashes),
            "median": summary, "ratio_announces_per_s": ratio, "ratio_cpu_efficiency": cpu_ratio,
            "ratio_announces_per_s_per_run": paired, "median_ratio_per_run": bl.median(paired),
            "target_ratio": TARGET, "runs_detail": detail}


def main() -> int:
    ap = bl.parser(__doc__)
    ap.add_argument("--duration", type=float, default=None, help="seconds per wrk run (default 5, --quick 3)")
    ap.add_argument("--connections", type=int, default=16)
    args = ap.parse_args()
    for tool in ("wrk", "opentracker"):
        if not shutil.which(tool):
            raise SystemExit(f"bench: {tool}: not installed (apt-get install {tool})")
    duration = args.duration or (3.0 if args.quick else 5.0)
    with bl.workdir("tracker", args.keep) as work:
        doc = run(work, duration, args.runs or 3, args.connections)
    bl.write_json(args.out, "tracker", doc)
    med, paired = doc["median"], doc["ratio_announces_per_s_per_run"]
    print(f"tracker: {doc['runs']} runs of {duration:g} s, {doc['connections']} connections, one per announce")
    print(bl.table(["tracker", "announces/s", "µs CPU/announce", "µs user", "µs kernel"],
                   [[k, v["announces_per_s"], v["cpu_us_per_announce"], v["user_us_per_announce"],
                     v["sys_us_per_announce"]] for k, v in med.items()]))
    print(f"ratio bt-tracker/opentracker: {doc['ratio_announces_per_s']:.2f}x announces/s (of the medians; "
          f"within each run: {', '.join(f'{r:.2f}' for r in paired)}, median {doc['median_ratio_per_run']:.2f}x), "
          f"{doc['ratio_cpu_efficiency']:.2f}x CPU efficiency (target >= {TARGET}x announces/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
