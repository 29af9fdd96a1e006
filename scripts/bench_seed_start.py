"""Benchmark seed_start: how long bt-server takes to start and stop a seed (target: start well under 0.3 s).

    .venv/bin/python scripts/bench_seed_start.py [--out DIR] [--quick] [--keep] [--runs 5] [--files 10 10000]

For each file count (default 10 and 10,000): generate a sample dataset, run
a real `bt-server run` on loopback (no tracker or repository reachable),
wait until the dataset is prepared, then time signed POST /api/seeds (start)
and DELETE (stop) `--runs` times (default 5), and the time until a fresh
libtorrent client process (tests/btserver/lt_client.py) finishes
downloading it after a start. One line per file count on stdout, a table,
and DIR/seed_start.json. Target: median start <= 0.3 s. --quick is the
same sizes (the whole benchmark takes a few seconds).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import benchlib as bl
from torrents import auth
from torrents.sample import generate

CLIENT = bl.ROOT / "tests" / "btserver" / "lt_client.py"
SECRET = "bench-secret"
IP = "127.0.0.1"
TARGET_S = 0.3


def signed(url: str, method: str, path: str, payload: dict | None = None) -> tuple[int, dict]:
    body = b"" if payload is None else json.dumps(payload).encode()
    headers = auth.sign(SECRET, "bench", method, path, body)
    headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url + path, data=body if payload is not None else None, headers=headers,
                                 method=method)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.status, json.load(resp)


def ready_status(url: str) -> dict | None:
    """The site's status once its datasets are prepared; None before (or while it is not listening yet)."""
    try:
        doc = bl.get_json(url + "/api/status")
    except (OSError, urllib.error.URLError):
        return None
    return doc if doc["ready"] else None


def bench(work: Path, files: int, rounds: int) -> dict:
    root = work / f"root{files}"
    t0 = time.perf_counter()
    generate(root, name=f"bench{files}", files=files, total_size=max(files * 1024, 4 * 2**20))
    gen = time.perf_counter() - t0
    url = f"http://{IP}:{bl.free_port(IP)}"
    dead = f"http://{IP}:{bl.free_port(IP)}"
    with bl.Procs() as procs:  # the bt-server stopped by PID on the way out, errors included
        t0 = time.perf_counter()
        proc = procs.start([str(bl.BIN / "bt-server"), "run", "--site", "bench", "--listen", url.removeprefix("http://"),
                            "--peer-listen", "127.0.0.2:0", "--state", str(work / f"state{files}"),
                            "--root", str(root), "--tracker", dead, "--repo", dead],
                           work / f"server{files}.log",
                           env={**os.environ, "BTSWARM_SERVER_SECRET": SECRET})
        doc = bl.wait_for(lambda: ready_status(url) or proc.poll() is not None, 300, "datasets prepared")
        if proc.poll() is not None:
            raise SystemExit(f"bt-server exited {proc.returncode}; see {work / f'server{files}.log'}")
        ready = time.perf_counter() - t0
        ds = doc["datasets"][0]
        ih = ds["info_hash"]
        starts, stops = [], []
        for _ in range(rounds):
            t = time.perf_counter()
            code, answer = signed(url, "POST", "/api/seeds", {"info_hash": ih})
            starts.append(time.perf_counter() - t)
            if code != 200 or answer["state"] != "seeding":
                raise SystemExit(f"bench: seed start answered {code}: {answer}")
            t = time.perf_counter()
            signed(url, "DELETE", f"/api/seeds/{ih}")
            stops.append(time.perf_counter() - t)
        t = time.perf_counter()
        _, answer = signed(url, "POST", "/api/seeds", {"info_hash": ih})
        torrent = work / f"state{files}" / "torrents" / f"{ds['name']}.torrent"
        client = bl.timed([sys.executable, str(CLIENT), str(torrent), str(work / f"dl{files}"),
                           answer["peers"][0], "127.0.0.3", "120"], 180, check=False)
        fetched = time.perf_counter() - t
        ms = [f"{x * 1000:.1f}" for x in starts]
        print(f"files={files} size={ds['total_size']} generate={gen:.2f}s daemon_ready={ready:.2f}s "
              f"start_ms median={bl.median(starts) * 1000:.1f} max={max(starts) * 1000:.1f} "
              f"(all: {' '.join(ms)}) stop_ms median={bl.median(stops) * 1000:.1f} "
              f"start+client_download={fetched:.2f}s client_rc={client.returncode}", flush=True)
        daemon_exit = procs.stop(proc)
    print(f"files={files} daemon_exit={daemon_exit}", flush=True)
    return {"files": files, "bytes": ds["total_size"], "generate_s": gen, "daemon_ready_s": ready,
            "median": {"start_s": bl.median(starts), "stop_s": bl.median(stops)}, "max_start_s": max(starts),
            "start_s": starts, "stop_s": stops, "start_and_client_download_s": fetched,
            "client_rc": client.returncode, "daemon_exit": daemon_exit, "target_start_s": TARGET_S}


def main() -> int:
    ap = bl.parser(__doc__)
    ap.add_argument("--files", type=int, nargs="+", default=[10, 10000], help="file counts (default 10 10000)")
    args = ap.parse_args()
    runs = args.runs or 5
    with bl.workdir("seed_start", args.keep) as work:
        sets = [bench(work, n, runs) for n in args.files]
    bl.write_json(args.out, "seed_start", {"runs": runs, "target_start_s": TARGET_S,
                                           "sets": {f"{s['files']} files": s for s in sets}})
    print(f"seed_start: signed POST/DELETE /api/seeds on a prepared dataset, median of {runs}")
    print(bl.table(["dataset", "start ms", "max start ms", "stop ms", "target ms", "start + client download s"],
                   [[f"{s['files']} files", s["median"]["start_s"] * 1000, s["max_start_s"] * 1000,
                     s["median"]["stop_s"] * 1000, TARGET_S * 1000, s["start_and_client_download_s"]]
                    for s in sets]))
    failed = [s["files"] for s in sets if s["client_rc"] != 0]
    if failed:
        raise SystemExit(f"bench: the libtorrent client did not finish for {failed} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
