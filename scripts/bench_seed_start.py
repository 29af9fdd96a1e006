"""How long does bt-server take to start a seed? (target: well under 0.3 s)

    .venv/bin/python scripts/bench_seed_start.py [--files 10 --files 10000] [--rounds 5] [--keep DIR]

For each file count: generate a sample dataset, run a real `bt-server run`
on loopback (no tracker or repository reachable), wait until the dataset
is prepared, then time signed POST /api/seeds (start) and DELETE (stop)
`rounds` times, and the time until a fresh libtorrent client process
finishes downloading it after a start. Figures on stdout, one line each.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import click

from torrents import auth
from torrents.sample import generate

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
CLIENT = HERE.parent / "tests" / "btserver" / "lt_client.py"
SECRET = "bench-secret"


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def signed(url: str, method: str, path: str, payload: dict | None = None) -> tuple[int, dict]:
    body = b"" if payload is None else json.dumps(payload).encode()
    headers = auth.sign(SECRET, "bench", method, path, body)
    headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url + path, data=body if payload is not None else None, headers=headers,
                                 method=method)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.status, json.load(resp)


def status(url: str) -> dict:
    with urllib.request.urlopen(url + "/api/status", timeout=5) as resp:
        return json.load(resp)


def wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def bench(workdir: Path, files: int, rounds: int) -> None:
    root = workdir / f"root{files}"
    t0 = time.perf_counter()
    generate(root, name=f"bench{files}", files=files, total_size=max(files * 1024, 4 * 2**20))
    gen = time.perf_counter() - t0
    port = free_port("127.0.0.1")
    url = f"http://127.0.0.1:{port}"
    dead = f"http://127.0.0.1:{free_port('127.0.0.1')}"
    log = open(workdir / f"server{files}.log", "wb")
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(BIN / "bt-server"), "run", "--site", "bench", "--listen", f"127.0.0.1:{port}",
                             "--peer-listen", "127.0.0.2:0", "--state", str(workdir / f"state{files}"),
                             "--root", str(root), "--tracker", dead, "--repo", dead],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "BTSWARM_SERVER_SECRET": SECRET})
    try:
        doc = wait(lambda: (s := status(url))["ready"] and s, 300, "datasets prepared")
        ready = time.perf_counter() - t0
        ds = doc["datasets"][0]
        ih = ds["info_hash"]
        starts, stops = [], []
        for _ in range(rounds):
            t = time.perf_counter()
            code, answer = signed(url, "POST", "/api/seeds", {"info_hash": ih})
            starts.append(time.perf_counter() - t)
            assert code == 200 and answer["state"] == "seeding", answer
            t = time.perf_counter()
            signed(url, "DELETE", f"/api/seeds/{ih}")
            stops.append(time.perf_counter() - t)
        t = time.perf_counter()
        _, answer = signed(url, "POST", "/api/seeds", {"info_hash": ih})
        torrent = workdir / f"state{files}" / "torrents" / f"{ds['name']}.torrent"
        out = subprocess.run([sys.executable, str(CLIENT), str(torrent), str(workdir / f"dl{files}"),
                              answer["peers"][0], "127.0.0.3", "120"], capture_output=True, text=True)
        fetched = time.perf_counter() - t
        ms = [f"{x * 1000:.1f}" for x in starts]
        print(f"files={files} size={ds['total_size']} generate={gen:.2f}s daemon_ready={ready:.2f}s "
              f"start_ms median={statistics.median(starts) * 1000:.1f} max={max(starts) * 1000:.1f} "
              f"(all: {' '.join(ms)}) stop_ms median={statistics.median(stops) * 1000:.1f} "
              f"start+client_download={fetched:.2f}s client_rc={out.returncode}")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()
        print(f"files={files} daemon_exit={proc.returncode}")


@click.command()
@click.option("--files", "counts", type=int, multiple=True, default=(10, 10000), show_default=True)
@click.option("--rounds", type=int, default=5, show_default=True)
@click.option("--keep", type=click.Path(file_okay=False), help="Work in DIR and keep it (else a temp dir).")
def main(counts: tuple[int, ...], rounds: int, keep: str | None) -> None:
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for n in counts:
            bench(Path(keep), n, rounds)
        return
    with tempfile.TemporaryDirectory(prefix="bench-seed-") as tmp:
        for n in counts:
            bench(Path(tmp), n, rounds)


if __name__ == "__main__":
    main()
