#!/usr/bin/env python3
"""Announces per second and CPU per announce: bt-tracker against Debian's opentracker.

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
The median of --runs runs is reported; JSON goes to bench-results/tracker.json.
On a shared machine compare the ratio, not the absolute figures.

    .venv/bin/python scripts/bench_tracker.py [--duration 5] [--runs 3] [--connections 16]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(user, kernel) CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK  # utime, stime: fields 14, 15 of the full line


def wait_port(port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"bench: 127.0.0.1:{port}: not listening within {timeout} s")


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
    user0, sys0 = cpu_seconds(pid)
    stats = run_wrk(url, script, duration, connections)
    user1, sys1 = cpu_seconds(pid)
    reqs = max(1, stats["requests"])
    result = {"tracker": name, "announces_per_s": stats["requests"] / (stats["duration_us"] / 1e6),
              "cpu_us_per_announce": (user1 - user0 + sys1 - sys0) / reqs * 1e6,
              "user_us_per_announce": (user1 - user0) / reqs * 1e6,
              "sys_us_per_announce": (sys1 - sys0) / reqs * 1e6, **stats}
    print(f"  {name:12s} {result['announces_per_s']:8.0f} announces/s  "
          f"{result['cpu_us_per_announce']:6.1f} µs CPU/announce "
          f"({result['user_us_per_announce']:.0f} user + {result['sys_us_per_announce']:.0f} kernel)  "
          f"(errors: connect {stats['connect_errors']}, read {stats['read_errors']}, "
          f"status {stats['status_errors']}, timeout {stats['timeouts']})", file=sys.stderr)
    return result


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per wrk run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--out", default=str(ROOT / "bench-results" / "tracker.json"))
    args = ap.parse_args()
    for tool in ("wrk", "opentracker"):
        if not shutil.which(tool):
            raise SystemExit(f"bench: {tool}: not installed (apt-get install {tool})")

    rng = random.Random(1)
    hashes = [rng.randbytes(20) for _ in range(1000)]
    work = Path(tempfile.mkdtemp(prefix="bench-tracker-"))
    procs: list[subprocess.Popen] = []
    try:
        script = work / "announce.lua"
        script.write_text(LUA % {"hashes": ", ".join('"%s"' % "".join(f"%{b:02X}" for b in h) for h in hashes),
                                 "seed": 42})
        chroot = work / "ot"
        chroot.mkdir()
        (chroot / "whitelist.txt").write_text("".join(h.hex() + "\n" for h in hashes))

        bt_port, ot_port, ot_udp = free_port(), free_port(), free_port()
        bt_bin = str(Path(sys.executable).parent / "bt-tracker")
        bt = subprocess.Popen([bt_bin, "run", "--listen", f"127.0.0.1:{bt_port}", "--open"],
                              stdout=subprocess.DEVNULL, stderr=open(work / "bt-tracker.log", "wb"))
        procs.append(bt)
        ot = subprocess.Popen(["opentracker", "-i", "127.0.0.1", "-p", str(ot_port), "-P", str(ot_udp),
                               "-d", str(chroot), "-w", "whitelist.txt", "-u", "nobody"],
                              stdout=subprocess.DEVNULL, stderr=open(work / "opentracker.log", "wb"))
        procs.append(ot)
        bt_url, ot_url = f"http://127.0.0.1:{bt_port}", f"http://127.0.0.1:{ot_port}"
        wait_port(bt_port)
        wait_port(ot_port)
        check_answer(bt_url, hashes[0])
        check_answer(ot_url, hashes[0])

        runs: dict[str, list[dict]] = {"bt-tracker": [], "opentracker": []}
        for i in range(args.runs):
            print(f"run {i + 1}/{args.runs}", file=sys.stderr)
            # Alternate the order so neither always runs on a warmer machine.
            order = [("bt-tracker", bt, bt_url), ("opentracker", ot, ot_url)]
            for name, proc, url in (order if i % 2 == 0 else order[::-1]):
                runs[name].append(measure(name, proc.pid, url, script, args.duration, args.connections))

        def med(name: str, key: str) -> float:
            return statistics.median(r[key] for r in runs[name])

        summary = {name: {key: med(name, key) for key in ("announces_per_s", "cpu_us_per_announce",
                                                           "user_us_per_announce", "sys_us_per_announce")}
                   for name in runs}
        ratio = summary["bt-tracker"]["announces_per_s"] / summary["opentracker"]["announces_per_s"]
        cpu_ratio = summary["opentracker"]["cpu_us_per_announce"] / summary["bt-tracker"]["cpu_us_per_announce"]
        # Each run measures the two back to back: on a shared machine the
        # ratio within a run is steadier than the ratio of the two medians,
        # which may come from runs under different loads.
        paired = [bt["announces_per_s"] / ot["announces_per_s"]
                  for bt, ot in zip(runs["bt-tracker"], runs["opentracker"])]
        doc = {"benchmark": "tracker announces, one connection per request (wrk, Connection: close)",
               "command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
               "duration_s": args.duration, "runs": args.runs, "connections": args.connections,
               "info_hashes": len(hashes), "cores": os.cpu_count(),
               "median": summary, "ratio_announces_per_s": ratio, "ratio_cpu_efficiency": cpu_ratio,
               "ratio_announces_per_s_per_run": paired, "median_ratio_per_run": statistics.median(paired),
               "target_ratio": 0.5, "runs_detail": runs}
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=2) + "\n")
        for name, s in summary.items():
            print(f"{name:12s} median {s['announces_per_s']:8.0f} announces/s  {s['cpu_us_per_announce']:6.1f} µs CPU/announce "
                  f"({s['user_us_per_announce']:.0f} user + {s['sys_us_per_announce']:.0f} kernel)")
        print(f"ratio bt-tracker/opentracker: {ratio:.2f}× announces/s (of the medians; within each run: "
              f"{', '.join(f'{r:.2f}' for r in paired)}, median {statistics.median(paired):.2f}×), "
              f"{cpu_ratio:.2f}× CPU efficiency (target ≥ 0.5×) → {out}")
        return 0
    finally:
        for p in reversed(procs):
            stop(p)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
