"""Benchmark rucio: datasets read from a real Rucio: how soon a new one is published, what a refresh costs.

    .venv/bin/python scripts/bench_rucio.py [--out DIR] [--quick] [--keep] [--runs N]

Both parts run against a local Rucio server (btswarm/localrucio.py, the PyPI
`rucio` package on SQLite, one werkzeug worker).

appear: `btswarm up --rucio --sites 1 --rucio-refresh R` on that Rucio. Per
run a new dataset of 1,000 files is placed at the site's RSE and registered
(add_replicas with bytes and adler32, add_dataset, attach_dids); measured
from the end of the registration until the repository's record names the
site (polled every 50 ms). Baseline, same run: R plus the time `bt-server
make-torrent` takes to hash the same 1,000 files (the target: "within one
refresh interval plus its hashing time"); a ratio <= 1 meets it. Then
`bt-get scope:name` of that dataset, launch to first payload byte (the
--json first_byte_at), against the same .torrent given as a file (target
1 s, "as today for a name").

refresh: 1,000 datasets of 3 files at one RSE, read by one bt-server (no
tracker, no repository) with a refresh interval of an hour, so that only
SIGHUP (a refresh now) starts one. After the first refresh has prepared
everything, each run sends SIGHUP and measures bt-server's CPU seconds
(user + system, /proc/PID/stat) until its log says the preparation that
followed is done, and counts the torrents built meanwhile (target: under
5 s of CPU, none built). Baseline, same run: the same 1,000 datasets as
directories under a root of a second bt-server, rescanned by SIGHUP (the
same preparation without Rucio). Rucio's own CPU is shown beside it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import benchlib as bl

from btswarm.localrucio import LocalRucio

TARGET_REFRESH_CPU = 5.0
READY_LINE = re.compile(r"datasets ready: (\d+); gone: \d+; problems: \d+")


def make_files(directory: Path, count: int, size: int, prefix: str = "f") -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    out = {}
    for i in range(count):
        p = directory / f"{prefix}.{i:05d}.root"
        p.write_bytes(os.urandom(size))
        out[p.name] = p
    return out


# --- appear ---------------------------------------------------------------------------------------
def appear(work: Path, rucio: LocalRucio, runs: int, files: int, size: int, refresh: float) -> dict:
    data = work / "sample"
    sample = data / "bench.rucio.seed"
    make_files(sample, 2, 1024)  # btswarm up wants one dataset to start with
    source = make_files(work / "source", files, size)
    scope = "bench"
    log_path = work / "up.log"
    proc, fed = bl.fedlib.launch(work / "state", ["--rucio", "--rucio-dir", str(rucio.root), "--rucio-scope", scope,
                                                  "--rucio-refresh", f"{refresh}s", "--sites", "1",
                                                  "--data", str(data), "--heartbeat", "1s"],
                                 ready_file=work / "ready.json", log_path=log_path, timeout=300)
    try:
        rse = fed.ready.rucio.rses["site1"].rse
        hash_s = bl.median([bl.timed([str(bl.BIN / "bt-server"), "make-torrent", str(work / "source"), "-o",
                                      str(work / "baseline.torrent"), "--tracker", fed.announce], 600).seconds
                            for _ in range(3)])
        rows = []
        for k in range(runs):
            name = f"bench.rucio.appear.{int(time.time())}.{k}"
            lfns = {f"{name}.{lfn}": path for lfn, path in source.items()}
            t0 = time.monotonic()
            placed = rucio.place(rse, scope, lfns, link=True)
            rucio.register_files(rse, scope, placed)
            rucio.add_dataset(scope, name, placed)
            registered = time.monotonic()
            did = f"{scope}:{name}"

            def published() -> bool:
                try:
                    return "site1" in bl.get_json(f"{fed.repo}/api/datasets/{did}", timeout=5)["sites"]
                except OSError:
                    return False

            bl.wait_for(published, refresh + 600, f"{did} in the repository")
            seen = time.monotonic() - registered
            rows.append({"register_s": registered - t0, "appear_s": seen})
            bl.log(f"appear run {k + 1}: registered in {registered - t0:.2f} s, in the repository "
                   f"{seen:.2f} s later (refresh {refresh:g} s, hashing alone {hash_s:.2f} s)")
        first = first_byte(work, fed, did, runs)
    finally:
        bl.proclib.stop(proc, timeout=60)
    med = bl.median([r["appear_s"] for r in rows])
    baseline = refresh + hash_s
    return {"files": files, "file_size": size, "refresh_s": refresh, "hash_s": hash_s,
            "register_s": bl.median([r["register_s"] for r in rows]), "appear_s": med, "baseline_s": baseline,
            "ratio": med / baseline, "runs_detail": rows, "first_byte": first}


def first_byte(work: Path, fed: bl.Federation, did: str, runs: int) -> dict:
    """`bt-get scope:name` launch → first payload byte, against the same torrent given as a file
    (no repository, no DID placement); seeds already started by a first, uncounted get."""
    torrent = work / "did.torrent"
    torrent.write_bytes(fed.torrent(did))
    out: dict[str, list[float]] = {"did": [], "torrent file": []}
    codes: dict[str, list[int]] = {"did": [], "torrent file": []}
    for k in range(runs + 1):  # the first DID get only starts the seeds
        for label, target in (("did", did), ("torrent file", str(torrent)))[: 1 if k == 0 else 2]:
            launched = time.time()
            # check=False: exit 5 (an adler32 read before bt-get's own writes reached the
            # file, see docs/benchmarks.md) still has a first byte worth counting.
            t = bl.timed(bl.bt_get_cmd(fed, target, bl.fresh_dir(work / "get"), bl.client_ip(0)), 600, check=False)
            if t.returncode not in (0, 5):
                raise SystemExit(f"bt-get {target}: exit {t.returncode}")
            if k:
                out[label].append(json.loads(t.stdout)["first_byte_at"] - launched)
                codes[label].append(t.returncode)
    med = {k: bl.median(v) for k, v in out.items()}
    bl.log(f"first byte: bt-get {did} {med['did']:.3f} s, the same .torrent as a file {med['torrent file']:.3f} s; "
           f"exit codes {codes}")
    return {"median_s": med, "ratio": med["did"] / med["torrent file"], "runs_detail": out, "exit_codes": codes,
            "target_s": 1.0}


# --- refresh --------------------------------------------------------------------------------------
def server_config(path: Path, state: Path, port: int, extra: str) -> Path:
    path.write_text(f"""[server]
site = "bench"
listen = "127.0.0.1:{port}"
peer_listen = "127.0.0.1:0"
state = "{state}"
tracker = ""
repo = ""
{extra}""")
    return path


def ready_count(log_path: Path) -> int:
    return len(READY_LINE.findall(log_path.read_text(errors="replace")))


def built_count(log_path: Path) -> int:
    return log_path.read_text(errors="replace").count(": built ")


def cpu_of_rescans(procs: bl.Procs, conf: Path, log_path: Path, runs: int, rucio_pid: int | None,
                   timeout: float = 900) -> list[dict]:
    """Start bt-server, wait for its first full preparation, then time `runs` SIGHUP rescans."""
    p = procs.start([str(bl.BIN / "bt-server"), "run", "--config", str(conf), "-v"], log_path)
    want = 2 if rucio_pid is not None else 1  # the start-up prepare, then the one after the first refresh
    bl.wait_for(lambda: ready_count(log_path) >= want and READY_LINE.findall(log_path.read_text())[-1] == "1000",
                timeout, "the first preparation of 1,000 datasets", interval=0.5)
    rows = []
    for k in range(runs):
        before, built = ready_count(log_path), built_count(log_path)
        cpu, rcpu = bl.cpu_seconds(p.pid), bl.cpu_seconds(rucio_pid) if rucio_pid else 0.0
        t = time.monotonic()
        os.kill(p.pid, signal.SIGHUP)
        bl.wait_for(lambda: ready_count(log_path) > before, timeout, "the rescan to finish", interval=0.05)
        rows.append({"wall_s": time.monotonic() - t, "cpu_s": bl.cpu_seconds(p.pid) - cpu,
                     "rucio_cpu_s": (bl.cpu_seconds(rucio_pid) - rcpu) if rucio_pid else 0.0,
                     "built": built_count(log_path) - built})
        bl.log(f"  rescan {k + 1}: {rows[-1]['cpu_s']:.2f} s CPU, {rows[-1]['wall_s']:.2f} s, "
               f"{rows[-1]['built']} torrents built")
    procs.stop(p)
    return rows


def refresh(work: Path, rucio: LocalRucio, runs: int, datasets: int) -> dict:
    rse, scope = "BENCH_REFRESH", "benchr"
    prefix = rucio.add_rse(rse, work / "rse")
    rucio.add_scope(scope)
    content = make_files(work / "content", 3, 4096, prefix="c")
    roots = work / "roots"
    t = time.monotonic()
    names: dict[str, list[str]] = {}
    wanted: dict[str, Path] = {}  # LFN → the content file it links to
    for i in range(datasets):
        name = f"bench.refresh.{i:04d}"
        names[name] = [f"{name}.{c}" for c in content]
        wanted.update({f"{name}.{c}": path for c, path in content.items()})
    placed = rucio.place(rse, scope, wanted, link=True)
    rucio.register_files(rse, scope, placed)
    rucio.add_datasets(scope, names)
    bl.log(f"refresh: {datasets} datasets of 3 files registered in {time.monotonic() - t:.1f} s")
    # the same datasets as directories: links to the RSE's files, named by their LFNs
    for name, lfns in names.items():
        (roots / name).mkdir(parents=True)
        for lfn in lfns:
            os.link(placed[lfn], roots / name / lfn)
    rows: dict[str, list[dict]] = {}
    with bl.Procs() as procs:
        rucio_conf = server_config(work / "rucio-site.toml", work / "state-rucio", bl.free_port(), f"""
[server.rucio]
server = "{rucio.url}"
account = "root"
username = "btswarm"
password_file = "{rucio.password_file}"
rse = "{rse}"
datasets = ["{scope}:bench.refresh.*"]
pfn_map = {{"file://localhost{prefix}/" = "{prefix}/"}}
refresh = 3600
""")
        bl.log("refresh: bt-server reading the datasets from Rucio")
        rows["rucio"] = cpu_of_rescans(procs, rucio_conf, work / "site-rucio.log", runs, rucio.proc.pid)
        dir_conf = server_config(work / "dir-site.toml", work / "state-dir", bl.free_port(),
                                 f'roots = ["{roots}"]\n')
        bl.log("refresh: bt-server scanning the same datasets as directories (baseline)")
        rows["directories"] = cpu_of_rescans(procs, dir_conf, work / "site-dir.log", runs, None)
    med = {k: {m: bl.median([r[m] for r in v]) for m in ("cpu_s", "wall_s", "rucio_cpu_s", "built")}
           for k, v in rows.items()}
    return {"datasets": datasets, "files_each": 3, "median": med, "runs_detail": rows,
            "ratio": med["rucio"]["cpu_s"] / med["directories"]["cpu_s"], "target_cpu_s": TARGET_REFRESH_CPU}


def main() -> int:
    ap = bl.parser(__doc__)
    args = ap.parse_args()
    runs = args.runs or (3 if args.quick else 5)
    size = 32 * 1024 if args.quick else 256 * 1024
    interval = 5.0 if args.quick else 10.0
    with bl.workdir("rucio", args.keep) as work:
        rucio = LocalRucio(work / "rucio")
        try:
            rucio.start()
            doc = {"runs": runs, "appear": appear(work / "appear", rucio, runs, 1000, size, interval),
                   "refresh": refresh(work / "refresh", rucio, runs, 1000)}
        finally:
            rucio.stop()
    bl.write_json(args.out, "rucio", doc)
    a, r = doc["appear"], doc["refresh"]
    print(f"rucio: a new 1,000-file dataset ({a['file_size'] // 1024} KiB files) from registration to the "
          f"repository, median of {runs}")
    print(bl.table(["refresh s", "hash s", "baseline s", "appear s", "ratio", "register s"],
                   [[a["refresh_s"], a["hash_s"], a["baseline_s"], a["appear_s"], a["ratio"], a["register_s"]]]))
    fb = a["first_byte"]
    print(f"rucio: bt-get scope:name (1,000 files) launch to first byte, median of {runs}")
    print(bl.table(["target", "first byte s", "target s", "ratio to the .torrent file"],
                   [["scope:name", fb["median_s"]["did"], fb["target_s"], fb["ratio"]],
                    [".torrent file", fb["median_s"]["torrent file"], "", ""]]))
    print(f"rucio: one refresh of 1,000 unchanged datasets (3 files each), bt-server CPU, median of {runs}")
    print(bl.table(["source", "CPU s", "target s", "wall s", "built", "Rucio server CPU s"],
                   [[k, m["cpu_s"], TARGET_REFRESH_CPU if k == "rucio" else "", m["wall_s"], int(m["built"]),
                     m["rucio_cpu_s"] if k == "rucio" else ""] for k, m in r["median"].items()]))
    print(f"ratio rucio/directories CPU: {r['ratio']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
