"""Benchmark cost: what a byte and a file cost each part (CPU, memory, start-up), with the limits beside.

    .venv/bin/python scripts/bench_cost.py [--out DIR] [--quick] [--keep] [--runs 3]
        [--large-size 2G] [--many-files 100000]

A real federation (`btswarm up --sites 3`) holding two datasets: a large-file
one (torrents.sample, 29 files; --quick 1 GB) and a many-file one (files of
1-7 KB; 100,000, --quick 20,000). For each dataset a warm-up bt-get first
(seeds started on demand: each piece is SHA1-checked once by the seed that
sends it, measured as "first fetch"), then every site is asked to seed, and
each run is one `bt-get --workers 1` into a fresh directory, its process
tree and the parts sampled from /proc every 0.1 s. Figures (medians):

  client   bt-get (parent + worker): CPU-s per GB, CPU-ms per file, peak RSS
           (VmHWM) of each process and its anonymous part per 10,000 files;
           start-up split into phases from the --json timeline: interpreter
           (`python -c pass`), imports, config, resolve (repository HTTP),
           torrent parse, site names (tracker HTTP), workers started, session
           listening with the torrent added, first peer connected, first byte.
  seeds    each bt-server: CPU-s per GB it sent (/api/status uploaded_total),
           CPU-ms per file; RSS idle (datasets known, no seed) and seeding.
  tracker  CPU-ms per announce-carrying fetch, RSS.
  repo     CPU of the resolve (GET /api/datasets/NAME and the .torrent)
           per 10,000 files; RSS.

Limits measured in the same run: SHA1 over memory (hashlib, one thread),
curl<-nginx on the large dataset (client and server CPU-s/GB), `tar c | tar
x` on the many-file one (CPU-ms per file). Targets (issue "what a byte and
a file cost"): client <= 1.2 CPU-s/GB, each seed <= 0.5 CPU-s/GB; bt-get
worker <= 300 MB and bt-server <= 150 MB + 1 KB per file of active seeds at
100,000 files.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from pathlib import Path

import benchlib as bl

TARGETS = {"client_cpu_s_per_gb": 1.2, "seed_cpu_s_per_gb": 0.5, "worker_rss_mb_100k": 300,
           "server_rss_mb": 150, "server_kb_per_active_file": 1.0}
MANY_MEAN = 4 * 1024  # with jitter 0.75: files of 1-7 KB


# --- /proc -------------------------------------------------------------------------------------------
def proc_status(pid: int) -> dict[str, int]:
    """VmHWM, VmRSS, RssAnon, RssFile of a process, in kB (empty when it is gone)."""
    return {k: v for k, v in bl.proclib.status_kib(pid).items() if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile")}


class Sampler:
    """Samples a process tree (a root and its descendants) and named PIDs from /proc until stopped."""

    def __init__(self, root: int | None, named: dict[str, int], interval: float = 0.1) -> None:
        self.root = root
        self.named = dict(named)
        self.interval = interval
        self.tree: dict[int, dict] = {}  # pid → {"peak": {...}, "cpu": last seen}
        self.named_peak: dict[str, dict[str, int]] = {k: {} for k in named}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self, pid: int, peak: dict[str, int]) -> bool:
        st = proc_status(pid)
        for k, v in st.items():
            peak[k] = max(peak.get(k, 0), v)
        return bool(st)

    def _run(self) -> None:
        next_scan = 0.0
        pids: list[int] = []
        while not self._stop.is_set():
            now = time.monotonic()
            if self.root is not None:
                if now >= next_scan:  # new children (the workers) appear once, early
                    pids = [self.root, *bl.children(self.root)]
                    next_scan = now + 0.3
                for pid in pids:
                    rec = self.tree.setdefault(pid, {"peak": {}, "cpu": 0.0})
                    if self._sample(pid, rec["peak"]):
                        rec["cpu"] = bl.cpu_seconds(pid)
            for label, pid in self.named.items():
                self._sample(pid, self.named_peak[label])
            self._stop.wait(self.interval)


def mb(kb: int | float) -> float:
    return kb / 1024


# --- limits ------------------------------------------------------------------------------------------
def sha1_limit() -> float:
    """CPU-s per GB of hashlib SHA1 over a buffer already in memory (one thread)."""
    buf = bytes(64 * 2**20)
    t = time.process_time()
    for _ in range(8):
        hashlib.sha1(buf).digest()
    return (time.process_time() - t) / (8 * len(buf) / 1e9)


def interpreter_start() -> float:
    return bl.median([bl.timed([sys.executable, "-c", "pass"], 60).seconds for _ in range(5)])


# --- one fetch ------------------------------------------------------------------------------------------
PHASES = (("imports", "imported"), ("config", "configured"), ("resolve", "resolved"), ("torrent parse", "parsed"),
          ("site names", "sites_named"), ("workers started", "workers_started"), ("session", "session"),
          ("torrent added", "torrent_added"), ("first connection", "connected"), ("first byte", "first_byte"))


def phases(timeline: dict[str, float], launched: float, interpreter: float) -> dict[str, float]:
    """Durations of the start-up steps, each from the previous mark (launch for the first)."""
    out = {"interpreter": interpreter}
    last = launched + interpreter
    for label, key in PHASES:
        at = timeline.get(key)
        if at is None:
            continue
        out[label] = max(0.0, at - last)
        last = max(last, at)
    return out


def fetch(fed: bl.Federation, name: str, out: Path, ip: str, parts: dict[str, int], interpreter: float,
          log: Path) -> dict:
    """One bt-get --workers 1, with its process tree and the parts sampled."""
    sites = fed.site_pids()
    up_before = {s: int(fed.site_status(s)["uploaded_total"]) for s in sites}
    cpu_before = {label: bl.cpu_seconds(pid) for label, pid in parts.items()}
    with bl.Procs() as procs:
        launched = time.time()
        with open(log, "wb") as stdout:
            p = procs.start(bl.bt_get_cmd(fed, name, out, ip, "--workers", "1"), log.with_suffix(".err"),
                            stdout=stdout)
        with Sampler(p.pid, parts) as sampler:
            code = p.wait(timeout=1800)
    if code != 0:
        raise SystemExit(f"bt-get {name}: exit {code}: {log.with_suffix('.err').read_text()[-2000:]}")
    # The client's CPU, exactly: this process's children (bt-get, and the worker it waited for).
    doc = json.loads(log.read_text())
    time.sleep(1.5)  # the sites count uploads from state updates (every 0.5-1 s)
    up_after = {s: int(fed.site_status(s)["uploaded_total"]) for s in sites}
    cpu = {label: bl.cpu_seconds(pid) - cpu_before[label] for label, pid in parts.items()}
    procs_seen = sorted(sampler.tree.items())
    parent = procs_seen[0][1] if procs_seen else {"peak": {}, "cpu": 0.0}
    workers = [rec for pid, rec in procs_seen[1:]]
    return {"doc": doc, "launched": launched, "phases": phases(doc.get("timeline", {}), launched, interpreter),
            "parent_peak": parent["peak"], "worker_peaks": [w["peak"] for w in workers],
            "worker_cpu": sum(w["cpu"] for w in workers), "parent_cpu_seen": parent["cpu"],
            "processes": len(procs_seen), "uploaded": {s: up_after[s] - up_before[s] for s in sites},
            "parts_cpu": cpu, "parts_peak": sampler.named_peak}


def client_cpu(fn) -> tuple[dict, float]:
    """Run fn(); also the CPU seconds of the children this process waited for meanwhile."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = fn()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def figures(r: dict, cpu: float, size: int, files: int) -> dict:
    gb = size / 1e9
    sites = {s: {"uploaded": up, "cpu_s": r["parts_cpu"][s]} for s, up in r["uploaded"].items()}
    per_seed = [v["cpu_s"] / (v["uploaded"] / 1e9) for v in sites.values() if v["uploaded"] > size * 0.05]
    seeds_cpu = sum(v["cpu_s"] for v in sites.values())
    return {
        "client_cpu_s": cpu, "client_cpu_s_per_gb": cpu / gb, "client_cpu_ms_per_file": cpu * 1000 / files,
        "worker_cpu_s": r["worker_cpu"], "parent_cpu_s": max(0.0, cpu - r["worker_cpu"]),
        "processes": r["processes"],
        "parent_hwm_mb": mb(r["parent_peak"].get("VmHWM", 0)),
        "parent_anon_mb": mb(r["parent_peak"].get("RssAnon", 0)),
        "worker_hwm_mb": mb(max((w.get("VmHWM", 0) for w in r["worker_peaks"]), default=0)),
        "worker_anon_mb": mb(max((w.get("RssAnon", 0) for w in r["worker_peaks"]), default=0)),
        "worker_file_mb": mb(max((w.get("RssFile", 0) for w in r["worker_peaks"]), default=0)),
        "seeds_cpu_s_per_gb": seeds_cpu / gb, "seeds_cpu_ms_per_file": seeds_cpu * 1000 / files,
        "seed_cpu_s_per_gb_sent_max": max(per_seed) if per_seed else float("nan"),
        "seed_rss_mb_max": mb(max(r["parts_peak"][s].get("VmRSS", 0) for s in sites)),
        "seed_anon_mb_max": mb(max(r["parts_peak"][s].get("RssAnon", 0) for s in sites)),
        "tracker_cpu_ms": r["parts_cpu"].get("tracker", 0.0) * 1000,
        "repo_cpu_ms": r["parts_cpu"].get("repo", 0.0) * 1000,
        "tracker_rss_mb": mb(r["parts_peak"].get("tracker", {}).get("VmRSS", 0)),
        "repo_rss_mb": mb(r["parts_peak"].get("repo", {}).get("VmRSS", 0)),
        "seconds": r["doc"]["seconds"], "first_byte_s": r["doc"]["first_byte_at"] - r["launched"],
        **{f"phase {k}": v for k, v in r["phases"].items()},
    }


def dataset_runs(fed: bl.Federation, work: Path, name: str, size: int, files: int, runs: int,
                 interpreter: float) -> dict:
    parts = fed.pids()
    parts = {k: v for k, v in parts.items() if k in ("tracker", "repo") or k.startswith("site")}
    out = work / "out"
    idle = {s: proc_status(pid) for s, pid in fed.site_pids().items()}
    first, cpu = client_cpu(lambda: fetch(fed, name, bl.fresh_dir(out), bl.client_ip(0), parts, interpreter,
                                          work / f"{name}.warm.json"))
    warm = figures(first, cpu, size, files)
    bl.log(f"{name}: first fetch (seeds start, check pieces): client {warm['client_cpu_s_per_gb']:.2f} CPU-s/GB, "
           f"seeds {warm['seeds_cpu_s_per_gb']:.2f} CPU-s/GB")
    bl.start_seeds(fed, fed.info_hash(name))
    rs = []
    for k in range(runs):
        r, cpu = client_cpu(lambda: fetch(fed, name, bl.fresh_dir(out), bl.client_ip(1 + k), parts, interpreter,
                                          work / f"{name}.{k}.json"))
        rs.append(figures(r, cpu, size, files))
        f = rs[-1]
        bl.log(f"{name} run {k + 1}: {f['seconds']:.2f} s, client {f['client_cpu_s_per_gb']:.2f} CPU-s/GB "
               f"({f['client_cpu_ms_per_file']:.3f} ms/file), seeds {f['seeds_cpu_s_per_gb']:.2f} CPU-s/GB, "
               f"worker {f['worker_hwm_mb']:.0f} MB (anon {f['worker_anon_mb']:.0f}), "
               f"parent {f['parent_hwm_mb']:.0f} MB, first byte {f['first_byte_s']:.3f} s")
    seeding = {s: proc_status(pid) for s, pid in fed.site_pids().items()}
    bl.fresh_dir(out)
    med = {k: bl.median([r[k] for r in rs if k in r]) for k in rs[0]}
    return {"dataset": {"name": name, "bytes": size, "files": files}, "median": med, "first_fetch": warm,
            "runs_detail": rs,
            "server_idle_kb": {s: v for s, v in idle.items()}, "server_seeding_kb": seeding}


def baselines(fed_data: Path, work: Path, large: Path, many: Path) -> dict:
    lfns = sorted(p.name for p in large.iterdir())
    size = bl.dataset_size(large)
    out = work / "out"
    res: dict[str, list[float]] = {"curl_cpu_s_per_gb": [], "nginx_cpu_s_per_gb": [], "tar_cpu_ms_per_file": [],
                                   "tar_s": []}
    with bl.nginx(work, fed_data) as srv:
        bl.timed(bl.curl_cmd(srv, large.name, lfns, bl.fresh_dir(out) / large.name), 1800)  # warm
        for _ in range(3):
            before = bl.tree_cpu_seconds([srv.pid])
            t = bl.timed(bl.curl_cmd(srv, large.name, lfns, bl.fresh_dir(out) / large.name), 1800)
            res["nginx_cpu_s_per_gb"].append((bl.tree_cpu_seconds([srv.pid]) - before) / (size / 1e9))
            res["curl_cpu_s_per_gb"].append(t.cpu / (size / 1e9))
    files = sum(1 for _ in many.iterdir())
    for _ in range(3):
        t = bl.timed(["sh", "-c", f"tar cf - -C '{many.parent}' '{many.name}' | tar xf - -C '{bl.fresh_dir(out)}'"],
                     1800)
        res["tar_cpu_ms_per_file"].append(t.cpu * 1000 / files)
        res["tar_s"].append(t.seconds)
    bl.fresh_dir(out)
    return {k: bl.median(v) for k, v in res.items()}


def run(work: Path, large_size: int, many_files: int, runs: int) -> dict:
    from torrents import sample

    data = work / "data"
    large = sample.generate(data, name="bench.cost.large", files=29, total_size=large_size)
    many = sample.generate(data, name="bench.cost.many", files=many_files, total_size=many_files * MANY_MEAN,
                           jitter=0.75)
    sets = {"large": (large.name, bl.dataset_size(large), 29), "many": (many.name, bl.dataset_size(many), many_files)}
    for label, (name, size, files) in sets.items():
        bl.log(f"dataset {label}: {name}, {files} files, {size / 1e6:.0f} MB")
    limits = {"sha1_cpu_s_per_gb": bl.median([sha1_limit() for _ in range(3)])}
    interpreter = interpreter_start()
    doc: dict = {"runs": runs, "sites": 3, "sets": {}}
    t = time.monotonic()
    with bl.federation(work / "fed", data, sites=3, timeout=1800) as fed:
        doc["federation_ready_s"] = time.monotonic() - t
        for label, (name, size, files) in sets.items():
            doc["sets"][label] = dataset_runs(fed, work, name, size, files, runs, interpreter)
        limits.update(baselines(data, work, large, many))
    doc["limits"] = limits
    doc["interpreter_s"] = interpreter
    doc["targets"] = TARGETS
    return doc


def report(doc: dict) -> str:
    lim = doc["limits"]
    L, M = doc["sets"]["large"], doc["sets"]["many"]
    lm, mm = L["median"], M["median"]
    files_m = M["dataset"]["files"]
    per10k = 10_000 / files_m
    rows = [
        ["client CPU-s/GB (large)", lm["client_cpu_s_per_gb"], f"SHA1 {lim['sha1_cpu_s_per_gb']:.2f}; "
         f"curl {lim['curl_cpu_s_per_gb']:.2f}", f"<= {TARGETS['client_cpu_s_per_gb']}"],
        ["  of it: worker / parent", f"{lm['worker_cpu_s'] / (L['dataset']['bytes'] / 1e9):.2f} / "
         f"{lm['parent_cpu_s'] / (L['dataset']['bytes'] / 1e9):.2f}", "", ""],
        ["client CPU-ms/file (many)", mm["client_cpu_ms_per_file"], f"tar {lim['tar_cpu_ms_per_file']:.3f}", ""],
        ["seeds CPU-s/GB sent, steady (large)", lm["seeds_cpu_s_per_gb"], f"nginx {lim['nginx_cpu_s_per_gb']:.2f}",
         f"<= {TARGETS['seed_cpu_s_per_gb']} each"],
        ["  busiest seed, per GB it sent", lm["seed_cpu_s_per_gb_sent_max"], "", ""],
        ["seeds CPU-s/GB, first fetch (piece checks)", L["first_fetch"]["seeds_cpu_s_per_gb"],
         f"SHA1 {lim['sha1_cpu_s_per_gb']:.2f}", ""],
        ["seeds CPU-ms/file (many)", mm["seeds_cpu_ms_per_file"], "", ""],
        ["bt-get worker peak RSS MB (many)", mm["worker_hwm_mb"], "", f"<= {TARGETS['worker_rss_mb_100k']} at 100k"],
        ["  anonymous / file-backed MB", f"{mm['worker_anon_mb']:.0f} / {mm['worker_file_mb']:.0f}", "", ""],
        ["  per 10,000 files MB (all of it counted as per file)", mm["worker_hwm_mb"] * per10k, "", ""],
        ["bt-get parent peak RSS MB (many)", mm["parent_hwm_mb"], "", ""],
        ["bt-get worker peak RSS MB (large)", lm["worker_hwm_mb"], "", ""],
        ["bt-server RSS MB, both datasets known, no seed",
         max(mb(v.get("VmRSS", 0)) for v in L["server_idle_kb"].values()), "", f"<= {TARGETS['server_rss_mb']}"],
        ["bt-server RSS MB seeding both", mm["seed_rss_mb_max"], "", "+ 1 KB/file"],
        ["bt-server peak (VmHWM) MB, incl. hashing",
         max(mb(v.get("VmHWM", 0)) for v in M["server_seeding_kb"].values()), "", ""],
        ["tracker CPU-ms per fetch (many) / RSS MB", f"{mm['tracker_cpu_ms']:.0f} / {mm['tracker_rss_mb']:.0f}", "",
         ""],
        ["repo CPU-ms per fetch per 10,000 files / RSS MB",
         f"{mm['repo_cpu_ms'] * per10k:.0f} / {mm['repo_rss_mb']:.0f}", "", ""],
        ["launch -> first byte s (large / many)", f"{lm['first_byte_s']:.3f} / {mm['first_byte_s']:.3f}", "", ""],
        ["processes per fetch (bt-get tree)", f"{lm['processes']:.0f}", "", ""],
    ]
    lines = [bl.table(["measure", "btswarm", "limit / peer", "target"], rows), "",
             f"start-up phases, s (many: {files_m} files; large: 29 files):"]
    names = [k[len("phase "):] for k in mm if k.startswith("phase ")]
    lines.append(bl.table(["phase", "large", "many"], [[n, lm.get("phase " + n, float("nan")),
                                                         mm.get("phase " + n, float("nan"))] for n in names]))
    return "\n".join(lines)


def main() -> int:
    ap = bl.parser(__doc__)
    ap.add_argument("--large-size", default=None, help="large dataset (default 2G, --quick 1G)")
    ap.add_argument("--many-files", type=int, default=None, help="many-file dataset (default 100000, --quick 20000)")
    args = ap.parse_args()
    from torrents.units import parse_size

    size = parse_size(args.large_size or ("1G" if args.quick else "2G"))
    many = args.many_files or (20_000 if args.quick else 100_000)
    with bl.workdir("cost", args.keep) as work:
        doc = run(work, size, many, args.runs or 3)
    bl.write_json(args.out, "cost", doc)
    print(f"cost: 3 sites, bt-get --workers 1, median of {doc['runs']}")
    print(report(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
