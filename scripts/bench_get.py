"""Benchmark: bt-get from 3 seeds vs curl from nginx vs aria2c from the same seeds.

    .venv/bin/python scripts/bench_get.py [--size 4G] [--runs 3] [--workers 1]

One dataset (torrents.sample), one .torrent announcing to a minimal tracker
that answers every announce with the 3 seeds (both BitTorrent clients get
the same peers), 3 seeding processes (tests/btget/seed_helper.py) on their
own 127.0.0.x, one nginx on its own address. Each client downloads into a
fresh directory, median of --runs; prints MB/s and the ratios; writes
bench-results/get.json. Every process started here is stopped by its PID.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SEED_HELPER = ROOT / "tests" / "btget" / "seed_helper.py"


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_port(host: str, port: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{host}:{port}: nothing listening after {timeout} s")


def tracker_main(port: int, peers: list[str]) -> None:
    """A tracker that knows one swarm: every announce gets the seeds (compact, BEP 23)."""
    from aiohttp import web

    from torrents import bencoding

    compact = b"".join(socket.inet_aton(p.rsplit(":", 1)[0]) + struct.pack(">H", int(p.rsplit(":", 1)[1]))
                       for p in peers)

    async def announce(_request: web.Request) -> web.Response:
        return web.Response(body=bencoding.encode({b"interval": 1800, b"peers": compact}),
                            content_type="text/plain")

    app = web.Application()
    app.router.add_get("/announce", announce)
    web.run_app(app, host="127.0.0.1", port=port, print=None, handle_signals=True)


class Started:
    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, args: list[str], log: Path) -> subprocess.Popen:
        p = subprocess.Popen(args, stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(p)
        return p

    def stop_all(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)


def timed(args: list[str], timeout: float) -> float:
    t = time.monotonic()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout)
    return time.monotonic() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="4G")
    ap.add_argument("--files", type=int, default=29)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", default="1")
    ap.add_argument("--work", default=str(ROOT / "bench-results" / "tmp"))
    ap.add_argument("--out", default=str(ROOT / "bench-results" / "get.json"))
    args = ap.parse_args()

    from torrents import build, sample
    from torrents.units import parse_size

    size = parse_size(args.size)
    work = Path(args.work)
    data = work / "data"
    root = sample.generate(data, files=args.files, total_size=size)
    started = Started()
    try:
        tracker_port = free_port("127.0.0.1")
        torrent = work / "bench.torrent"
        t = time.monotonic()
        blob, meta = build.build_torrent(root.name, [(p.name, p) for p in sorted(root.iterdir())],
                                         announce=f"http://127.0.0.1:{tracker_port}/announce")
        torrent.write_bytes(blob)
        print(f"dataset {meta.total_size / 1e6:.0f} MB in {len(meta.files)} files, hashed in "
              f"{time.monotonic() - t:.1f} s", file=sys.stderr)
        seeds = []
        for k in range(3):
            ip = f"127.0.77.{k + 2}"
            port = free_port(ip)
            started.start([sys.executable, str(SEED_HELPER), "--ip", ip, "--port", str(port), "--torrent",
                           str(torrent), "--data", str(data), "--lifetime", "7200"], work / f"seed{k}.log")
            wait_port(ip, port)
            seeds.append(f"{ip}:{port}")
        started.start([sys.executable, __file__, "_tracker", str(tracker_port), *seeds], work / "tracker.log")
        wait_port("127.0.0.1", tracker_port)
        nginx_ip, nginx_port = "127.0.77.20", free_port("127.0.77.20")
        conf = work / "nginx.conf"
        conf.write_text(f"""
daemon off; worker_processes 1; pid {work}/nginx.pid; error_log {work}/nginx-error.log;
events {{ worker_connections 64; }}
http {{ access_log off; sendfile on; tcp_nopush on;
  server {{ listen {nginx_ip}:{nginx_port}; root {data}; }} }}
""")
        started.start(["nginx", "-c", str(conf), "-p", str(work)], work / "nginx.log")
        wait_port(nginx_ip, nginx_port)

        results: dict[str, list[float]] = {"bt-get": [], "curl": [], "aria2c": []}
        for run in range(args.runs):
            for client in results:
                out = work / f"out-{client}"
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir(parents=True)
                if client == "bt-get":
                    cmd = [str(BIN / "bt-get"), str(torrent), "-o", str(out), "-q", "--workers", args.workers,
                           "--listen", "127.0.77.30", "--timeout", "1800"]
                elif client == "curl":
                    cmd = ["curl", "-sS", "--fail"]
                    for f in meta.files:
                        cmd += ["-o", str(out / f.lfn), f"http://{nginx_ip}:{nginx_port}/{root.name}/{f.lfn}"]
                else:
                    cmd = ["aria2c", "-q", "--seed-time=0", "--enable-dht=false", "--enable-dht6=false",
                           "--bt-enable-lpd=false", "--enable-peer-exchange=false", "--check-integrity=false",
                           "--file-allocation=none", "--disable-ipv6=true", "--bt-max-peers=55",
                           "--interface=127.0.77.31", f"--dir={out}", str(torrent)]
                seconds = timed(cmd, 1800)
                results[client].append(meta.total_size / seconds / 1e6)
                print(f"run {run + 1} {client:7s} {results[client][-1]:8.1f} MB/s", file=sys.stderr)
                shutil.rmtree(out, ignore_errors=True)
        med = {k: statistics.median(v) for k, v in results.items()}
        doc = {"size": meta.total_size, "files": len(meta.files), "runs": args.runs, "workers": args.workers,
               "mb_per_s": med, "all": results,
               "ratio_vs_curl": med["bt-get"] / med["curl"], "ratio_vs_aria2c": med["bt-get"] / med["aria2c"],
               "targets": {"vs_curl": 0.8, "vs_aria2c": 1.2}}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(doc, indent=2))
        for k, v in med.items():
            print(f"{k:7s} {v:8.1f} MB/s (median of {args.runs})")
        print(f"bt-get/curl   {doc['ratio_vs_curl']:.2f}  (target >= 0.8)")
        print(f"bt-get/aria2c {doc['ratio_vs_aria2c']:.2f}  (target >= 1.2)")
    finally:
        started.stop_all()
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_tracker":
        tracker_main(int(sys.argv[2]), sys.argv[3:])
    else:
        sys.exit(main())
