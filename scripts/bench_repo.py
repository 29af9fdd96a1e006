#!/usr/bin/env python3
"""Benchmark repo: the repository under a batch start (a 1,000-job array asking for one dataset at once).

    .venv/bin/python scripts/bench_repo.py [--out DIR] [--quick] [--keep] [--runs 3]
        [--duration 5] [--connections 100] [--files 200]

A real `bt-repo run` beside a real `bt-tracker run`, on loopback. site1
publishes a dataset of --files files (default 200) with a web seed, and 49
small ones beside it (for the search), and tells the tracker it holds the
dataset (a signed heartbeat, repeated while the benchmark runs), so the
.torrent carries the site's live web seed as it would in production. wrk
(one thread, --connections keep-alive connections, default 100) then asks,
for --duration seconds each (default 5, --quick 3):

  record       GET /api/datasets/NAME           (what bt-get asks first)
  torrent      GET /datasets/NAME.torrent       (live web seeds added)
  torrent ws0  GET /datasets/NAME.torrent?web_seeds=0
  page         GET /datasets/NAME               (the HTML page)
  search       GET /api/datasets?q=WORD
  record x2, torrent x2
               the same from `bt-repo run --processes 2` on the same
               catalog (a second repository, one port, two processes)
  nginx        the same .torrent bytes as a static file from an nginx of
               our own (one worker): the baseline, in the same run

The contenders take turns, the order rotated per run; the median of
--runs runs (default 3) is reported, with the ratio of each to nginx's
requests/s within each run, and CPU µs per request (the repository's and
the tracker's, which answers its swarm questions; nginx's own). An answer
other than 2xx/3xx, a connection refused or cut makes the benchmark fail;
requests wrk waited more than 2 s for are counted and said (on a loaded
machine they measure the load). Targets: record and .torrent
>= 3,000 requests/s with p99 <= 50 ms at 100 connections.
On a shared machine compare the ratios, not the absolute figures.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
import urllib.request
import zlib
from pathlib import Path
from urllib.parse import quote

import benchlib as bl

from torrents import auth, metainfo
from torrents.devsecret import DEV_SECRET

IP = "127.0.0.1"
NAME = "data08_cos.00091949.physics_IDCosmic.merge.DPD_IDCOMM.o4_r653_p26_tid051203"
WEB_SEED = "http://127.0.0.2:8701/data/"
TARGET_RPS = 3000.0
TARGET_P99_MS = 50.0
HEARTBEAT_EVERY = 5.0  # the tracker counts a site down after 3 missed 10 s heartbeats
PATHS = {
    "record": f"/api/datasets/{quote(NAME)}",
    "torrent": f"/datasets/{quote(NAME)}.torrent",
    "torrent ws0": f"/datasets/{quote(NAME)}.torrent?web_seeds=0",
    "page": f"/datasets/{quote(NAME)}",
    "search": "/api/datasets?q=IDCosmic",
}
NGINX = "nginx"
TWO = {"record x2": PATHS["record"], "torrent x2": PATHS["torrent"]}  # from bt-repo run --processes 2
TARGETED = ("record", "torrent", "torrent ws0", *TWO)


def lua(path: str) -> str:
    return f'request = function()\n  return wrk.format("GET", "{path}")\nend\n' + bl.WRK_DONE


def sized_torrent(name: str, files: int, size: int, tracker: str) -> tuple[bytes, metainfo.Metainfo, list[dict]]:
    """A .torrent of `files` files of `size` bytes, without writing them (placeholder piece hashes:
    nothing downloads from it here)."""
    ordered = [(f"AOD/file{i:05d}.pool.root.1", size) for i in range(files)]
    total = files * size
    plen = metainfo.piece_length_for(total)
    pieces = b"\x5a" * 20 * metainfo.piece_count(total, plen)
    data = metainfo.dump(metainfo.info_dict(name, ordered, plen, pieces), tracker + "/announce")
    record = [{"lfn": lfn, "size": s, "adler32": f"{zlib.adler32(lfn.encode()):08x}"} for lfn, s in ordered]
    return data, metainfo.parse(data), record


def signed(url: str, method: str, path: str, doc: dict) -> dict:
    body = json.dumps(doc).encode()
    headers = {**auth.sign(DEV_SECRET, "site1", method, path, body), "Content-Type": "application/json"}
    req = urllib.request.Request(url + path, data=body, headers=headers, method=method)
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.load(resp)


def publish(repo: str, tracker: str, name: str, files: int, size: int, web_seeds: list[str]) -> metainfo.Metainfo:
    data, meta, record = sized_torrent(name, files, size, tracker)
    signed(repo, "PUT", f"/api/datasets/{quote(name, safe='')}", {
        "site": "site1", "torrent": base64.b64encode(data).decode(),
        "record": {"name": name, "info_hash": meta.info_hash, "description": "cosmic-ray run, bench",
                   "total_size": meta.total_size, "files": record, "web_seeds": web_seeds}})
    return meta


class Heartbeats:
    """site1's heartbeat to the tracker, holding `hashes`, every HEARTBEAT_EVERY seconds until stopped."""

    def __init__(self, tracker: str, hashes: list[str]) -> None:
        self.tracker, self.hashes = tracker, hashes
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def beat(self) -> None:
        signed(self.tracker, "POST", "/api/sites/site1/heartbeat",
               {"site": "site1", "kind": "T2", "control_url": "http://127.0.0.2:8700", "peers": ["127.0.0.2:6881"],
                "can_seed": self.hashes, "seeding": [], "load": 0, "capacity": 50})

    def _loop(self) -> None:
        while not self.stopped.wait(HEARTBEAT_EVERY):
            self.beat()

    def __enter__(self) -> "Heartbeats":
        self.beat()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(10)


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read()


def start(procs: bl.Procs, work: Path, name: str, command: list[str]) -> tuple[str, int]:
    port = bl.free_port(IP)
    proc = procs.start(command + ["--listen", f"{IP}:{port}"], work / f"{name}.log", stdout=subprocess.DEVNULL)
    bl.wait_for(lambda: bl.port_open(IP, port) or proc.poll() is not None, 30, f"{name} to listen")
    if proc.poll() is not None:
        raise SystemExit(f"bench: {name} exited {proc.returncode}; see {work / (name + '.log')}")
    return f"http://{IP}:{port}", proc.pid


def measure(name: str, url: str, pids: list[int], script: Path, duration: float, connections: int) -> dict:
    cpu = bl.tree_cpu_seconds(pids)
    stats = bl.wrk(url, script, duration, connections)
    cpu = bl.tree_cpu_seconds(pids) - cpu
    result = {"contender": name, "requests_per_s": stats["requests"] / (stats["duration_us"] / 1e6),
              "cpu_us_per_request": cpu / max(1, stats["requests"]) * 1e6,
              "p50_ms": stats["p50_us"] / 1000, "p99_ms": stats["p99_us"] / 1000, **stats}
    errors = sum(stats[k] for k in ("connect_errors", "read_errors", "status_errors", "timeouts"))
    bl.log(f"  {name:12s} {result['requests_per_s']:8.0f} req/s  {result['cpu_us_per_request']:6.0f} µs CPU/req  "
           f"p50 {result['p50_ms']:6.1f} ms  p99 {result['p99_ms']:6.1f} ms  (errors: {errors})")
    return result


def run(work: Path, duration: float, runs: int, connections: int, files: int) -> dict:
    with bl.Procs() as procs:
        tracker, tracker_pid = start(procs, work, "tracker", [str(bl.BIN / "bt-tracker"), "run", "--open"])
        (work / "repo.toml").write_text(f'[repo]\ntracker = "{tracker}"\n')
        repo_cmd = [str(bl.BIN / "bt-repo"), "run", "--state", str(work / "repo"), "--config", str(work / "repo.toml")]
        repo, repo_pid = start(procs, work, "repo", repo_cmd)
        repo2, repo2_pid = start(procs, work, "repo2", repo_cmd + ["--processes", "2"])
        meta = publish(repo, tracker, NAME, files, 64 << 20, [WEB_SEED])
        for i in range(49):
            publish(repo, tracker, f"mc23_13p6TeV.{700000 + i}.Sh_2214_Zee.deriv.DAOD_PHYS.e8514_p{6000 + i}",
                    3, 1 << 20, [])
        with Heartbeats(tracker, [meta.info_hash]):
            torrent = get(repo + PATHS["torrent"])
            if metainfo.parse(torrent).url_list != (WEB_SEED,):
                raise SystemExit("bench: the .torrent does not list the live web seed")
            root = bl.fresh_dir(work / "www")
            (root / "dataset.torrent").write_bytes(torrent)
            with bl.nginx(work, root) as srv:
                bases = {**{name: repo for name in PATHS}, **{name: repo2 for name in TWO}, NGINX: srv.url("")}
                # The repository's CPU with the tracker's (it answers the swarm questions), nginx's own.
                pids = {**{name: [repo_pid, tracker_pid] for name in PATHS},
                        **{name: [repo2_pid, tracker_pid] for name in TWO}, NGINX: [srv.pid]}
                scripts = {}
                for name, path in {**PATHS, **TWO, NGINX: "/dataset.torrent"}.items():
                    scripts[name] = work / f"{name.replace(' ', '-')}.lua"
                    scripts[name].write_text(lua(path))
                detail: dict[str, list[dict]] = {name: [] for name in bases}
                names = list(bases)
                for i in range(runs):
                    bl.log(f"run {i + 1}/{runs}")
                    k = i % len(names)  # rotated: none always runs on a warmer machine
                    for name in names[k:] + names[:k]:
                        detail[name].append(measure(name, bases[name], pids[name], scripts[name], duration, connections))
    keys = ("requests_per_s", "cpu_us_per_request", "p50_ms", "p99_ms")
    summary = {name: {key: bl.median([r[key] for r in rs]) for key in keys} for name, rs in detail.items()}
    # Within a run, back to back: steadier on a shared machine than a ratio of two medians.
    ratios = {name: [r["requests_per_s"] / b["requests_per_s"] for r, b in zip(rs, detail[NGINX])]
              for name, rs in detail.items() if name != NGINX}
    errors = {name: {k: sum(r[k] for r in rs) for k in ("connect_errors", "read_errors", "status_errors", "timeouts")}
              for name, rs in detail.items()}
    return {"what": f"bt-repo under wrk, {connections} keep-alive connections, a {files}-file dataset",
            "duration_s": duration, "runs": runs, "connections": connections, "files": files,
            "torrent_bytes": len(torrent), "median": summary, "ratios_to_nginx_per_run": ratios,
            "median_ratio_to_nginx": {k: bl.median(v) for k, v in ratios.items()}, "errors": errors,
            "targets": {"requests_per_s": TARGET_RPS, "p99_ms": TARGET_P99_MS, "for": list(TARGETED)},
            "runs_detail": detail}


def main() -> int:
    ap = bl.parser(__doc__)
    ap.add_argument("--duration", type=float, default=None, help="seconds per wrk run (default 5, --quick 3)")
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--files", type=int, default=200)
    args = ap.parse_args()
    bl.require("wrk", "nginx")
    duration = args.duration or (3.0 if args.quick else 5.0)
    with bl.workdir("repo", args.keep) as work:
        doc = run(work, duration, args.runs or 3, args.connections, args.files)
    bl.write_json(args.out, "repo", doc)
    med = doc["median"]
    print(f"repo: {doc['runs']} runs of {duration:g} s, {doc['connections']} connections, "
          f"{doc['files']}-file dataset ({doc['torrent_bytes']} B .torrent)")
    print(bl.table(["contender", "req/s", "µs CPU/req", "p50 ms", "p99 ms", "x nginx", "errors"],
                   [[k, v["requests_per_s"], v["cpu_us_per_request"], v["p50_ms"], v["p99_ms"],
                     doc["median_ratio_to_nginx"].get(k, 1.0), sum(doc["errors"][k].values())] for k, v in med.items()]))
    for name in TARGETED:
        ok = med[name]["requests_per_s"] >= TARGET_RPS and med[name]["p99_ms"] <= TARGET_P99_MS
        print(f"{name}: {med[name]['requests_per_s']:.0f} req/s, p99 {med[name]['p99_ms']:.1f} ms "
              f"(target >= {TARGET_RPS:.0f} req/s, p99 <= {TARGET_P99_MS:.0f} ms): {'met' if ok else 'NOT met'}")
    slow = {k: e["timeouts"] for k, e in doc["errors"].items() if e["timeouts"]}
    if slow:
        print(f"repo: requests wrk waited more than 2 s for: {slow}")
    failed = {k: e for k, e in doc["errors"].items() if e["status_errors"] or e["read_errors"] or e["connect_errors"]}
    if failed:
        print(f"repo: errors under load: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
