#!/usr/bin/env python3
"""Benchmark scale: a 40-site federation with 100 concurrent T3s, and how the tracker grows.

    .venv/bin/python scripts/bench_scale.py [--out DIR] [--quick] [--keep] [--runs 3]
        [--sites 40] [--clients 100] [--datasets 10] [--parts federation growth server tracker]

federation: SITES bt-server processes (127.0.0.2...), a tracker and a
  repository, DATASETS datasets each held by an overlapping subset of the
  sites (site i holds dataset j when (i - j) mod DATASETS < DATASETS * 2/5;
  the files hard-linked into each site's own root), every site's upload
  capped (--site-rate) so the CPU is not the bottleneck; then CLIENTS bt-get
  processes at once, each on its own 127.0.0.x, client k fetching dataset
  k mod DATASETS and seeding on. Once every one has completed they are
  stopped by PID. Reported: all complete with bytes identical to the
  source; T2 egress per dataset (what the sites uploaded for it, over its
  size); the tracker's CPU over the run and per announce it counted
  (heartbeats and seed starts included); the tracker's own announce
  latency p50/p99 (its btswarm_tracker_announce_seconds histogram, one
  announce in 8, interpolated within buckets) and the latency seen by a
  prober that announces on a fresh connection every 50 ms during the run
  (the host's run queue included); the RSS of every daemon. Once with the
  memory store, once with Redis.
growth: one bt-tracker (memory store, then Redis) fed by a signed heartbeat
  registering N info-hashes, each of which gets a peer (N = 1 ... 100,000),
  then one swarm with P peers (P = 10 ... 10,000); after each step the
  tracker's RSS (and redis-server's) and the p50/p99 of 500 announces, each on
  a fresh connection.
server: one bt-server holding 1,000 one-file datasets: its RSS once ready.
tracker: announces/s of 1 and 2 Redis-store processes and of the memory store
  against opentracker (scripts/bench_tracker.py, in the same run).

Targets: every client completes with identical bytes; tracker RSS <= 200 MB
with 100,000 registered info-hashes; bt-server RSS <= 150 MB with 1,000
datasets; the announce-rate targets of bench_tracker. --quick: 10 sites,
20 clients, 5 datasets, growth to 10,000 / 1,000, 200 datasets.
"""

from __future__ import annotations

import json
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import benchlib as bl
import bench_tracker
from btswarm import topology
from btswarm.redisserver import RedisServer

TRACKER_RSS_MB = 200
SERVER_RSS_MB = 150
PROBE_EVERY = 0.05


# --- small HTTP helpers: raw announces on fresh connections -----------------------------------
def announce_query(h: bytes, peer: int, port: int, left: int, numwant: int = 50, event: str = "") -> bytes:
    q = {"info_hash": h, "peer_id": b"-BS0001-%012d" % peer, "port": port, "uploaded": 0, "downloaded": 0,
         "left": left, "compact": 1, "numwant": numwant}
    if event:
        q["event"] = event
    # quote, not quote_plus: a space byte must be %20 (the tracker reads '+' as a literal plus)
    return f"/announce?{urllib.parse.urlencode(q, quote_via=urllib.parse.quote)}".encode()


def request(target: bytes, keep: bool = False) -> bytes:
    return b"GET %s HTTP/1.1\r\nHost: t\r\n%s\r\n" % (target, b"" if keep else b"Connection: close\r\n")


def one_announce(host: str, port: int, target: bytes) -> tuple[float, bytes]:
    """Seconds for connect + request + whole answer, and the body."""
    t = time.perf_counter()
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(request(target))
        chunks = []
        while True:
            b = s.recv(65536)
            if not b:
                break
            chunks.append(b)
    return time.perf_counter() - t, b"".join(chunks).partition(b"\r\n\r\n")[2]


def pipelined(host: str, port: int, targets: list[bytes], batch: int = 500) -> None:
    """Many announces down one kept-alive connection (the fast path answers them in order)."""
    with socket.create_connection((host, port), timeout=60) as s:
        f = s.makefile("rb")
        for i in range(0, len(targets), batch):
            part = targets[i:i + batch]
            s.sendall(b"".join(request(t, keep=True) for t in part))
            for _ in part:
                length = 0
                while True:
                    line = f.readline()
                    if line in (b"\r\n", b""):
                        break
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                f.read(length)


def percentiles(seconds: list[float]) -> dict:
    ms = sorted(x * 1000 for x in seconds)
    if not ms:
        return {"p50_ms": float("nan"), "p99_ms": float("nan"), "n": 0}
    return {"p50_ms": statistics.median(ms), "p99_ms": ms[min(len(ms) - 1, int(0.99 * len(ms)))], "n": len(ms)}


def rss_mb(pid: int) -> float:
    rss = bl.proclib.status_kib(pid).get("VmRSS")
    return rss / 1024 if rss is not None else float("nan")


def signed_post(url: str, site: str, secret: str, doc: dict) -> int:
    from torrents import auth

    body = json.dumps(doc).encode()
    path = urllib.parse.urlsplit(url).path
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={**auth.sign(secret, site, "POST", path, body),
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return resp.status


def metric(url: str, name: str, labels: str = "") -> float:
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + (labels or "")) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def histogram(url: str, name: str) -> list[tuple[float, float]]:
    """A Prometheus histogram from /metrics: [(upper bound, cumulative count)], +Inf last."""
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    out = []
    for line in text.splitlines():
        if line.startswith(name + "_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            out.append((float("inf") if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
    return out


def histogram_quantiles(before: list, after: list, qs=(0.5, 0.99)) -> dict:
    """Quantiles of what was observed between two readings, interpolated within buckets (ms)."""
    counts = [(le, a - b) for (le, a), (_, b) in zip(after, before)]
    total = counts[-1][1] if counts else 0
    out: dict = {"n": total}
    for q in qs:
        target, lo, prev = q * total, 0.0, 0.0
        value = float("nan")
        for le, c in counts:
            if c >= target and total:
                hi = le if le != float("inf") else lo * 2
                value = (lo + (hi - lo) * ((target - prev) / max(c - prev, 1e-9))) * 1000
                break
            lo, prev = le, c
        out[f"p{int(q * 100)}_ms"] = value
    return out


# --- growth: one tracker, more and more swarms, then one ever larger swarm ---------------------
def tracker_process(procs: bl.Procs, work: Path, label: str, store: str, redis_url: str) -> tuple[int, int]:
    port = bl.free_port("127.0.0.1")
    conf = work / f"{label}.toml"
    extra = f'store = "redis"\nredis_url = "{redis_url}"\nredis_prefix = "{label}:"\n' if store == "redis" else ""
    conf.write_text(f'[tracker]\nlisten = "127.0.0.1:{port}"\nsite_secrets = {{ bench = "bench-secret" }}\n'
                    f'heartbeat_interval = "1h"\ninterval = 1800\n{extra}')
    proc = procs.start([str(bl.BIN / "bt-tracker"), "run", "--config", str(conf)], work / f"{label}.log")
    bl.wait_for(lambda: bl.port_open("127.0.0.1", port) or proc.poll() is not None, 20, f"{label} to listen")
    return proc.pid, port


def latency_sample(port: int, make_target, n: int) -> dict:
    return percentiles([one_announce("127.0.0.1", port, make_target(i))[0] for i in range(n)])


def growth(work: Path, store: str, redis: RedisServer | None, swarm_steps: list[int], peer_steps: list[int],
           probes: int) -> dict:
    rng = random.Random(7)
    with bl.Procs() as procs:
        pid, port = tracker_process(procs, work, f"growth-{store}", store, redis.url if redis else "")
        url = f"http://127.0.0.1:{port}"
        redis_rss = (lambda: redis_used_mb(redis)) if redis else (lambda: 0.0)
        hashes: list[bytes] = []
        rows = []
        for n in swarm_steps:
            new = [rng.randbytes(20) for _ in range(n - len(hashes))]
            hashes += new
            # The site's heartbeat registers every hash; then each swarm gets one peer (a seed).
            status = signed_post(f"{url}/api/sites/bench/heartbeat", "bench", "bench-secret",
                                 {"site": "bench", "control_url": "http://127.0.0.250:9", "peers": [],
                                  "can_seed": [h.hex() for h in hashes], "seeding": [], "load": 0, "capacity": 1})
            assert status == 200
            time.sleep(1.2)  # a Redis-store tracker re-reads the registry every second
            pipelined("127.0.0.1", port, [announce_query(h, len(hashes) + i, 1 + i % 60000, 0, 0)
                                          for i, h in enumerate(new)])
            lat = latency_sample(port, lambda i: announce_query(rng.choice(hashes), 10**9 + i, 20000 + i, 1), probes)
            rows.append({"swarms": n, "tracker_rss_mb": rss_mb(pid), "redis_mb": redis_rss(), **lat})
            bl.log(f"  growth {store}: {n:7d} swarms  tracker RSS {rows[-1]['tracker_rss_mb']:6.1f} MB  "
                   f"redis {rows[-1]['redis_mb']:6.1f} MB  p50 {lat['p50_ms']:.2f} ms  p99 {lat['p99_ms']:.2f} ms")
        peer_rows = []
        big = hashes[0]
        have = 1
        for p in peer_steps:
            pipelined("127.0.0.1", port, [announce_query(big, 5 * 10**8 + i, 1 + i, 1 if i % 4 else 0, 0)
                                          for i in range(have, p)])
            have = p
            lat = latency_sample(port, lambda i: announce_query(big, 10**9 + i, 30000 + i % 30000, 1), probes)
            peer_rows.append({"peers": p, "tracker_rss_mb": rss_mb(pid), "redis_mb": redis_rss(), **lat})
            bl.log(f"  growth {store}: {p:7d} peers in a swarm  p50 {lat['p50_ms']:.2f} ms  p99 {lat['p99_ms']:.2f} ms")
        cpu = bl.cpu_seconds(pid)
    return {"store": store, "by_swarms": rows, "by_peers": peer_rows, "tracker_cpu_s": cpu}


def redis_used_mb(redis: RedisServer) -> float:
    with socket.create_connection((redis.host, redis.port), timeout=5) as s:
        s.sendall(b"*2\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n")
        data = b""
        while b"used_memory_rss:" not in data or not data.endswith(b"\r\n"):
            data += s.recv(65536)
    for line in data.split(b"\r\n"):
        if line.startswith(b"used_memory_rss:"):
            return int(line.split(b":")[1]) / 2**20
    return float("nan")


# --- server: one bt-server with many datasets ----------------------------------------------------
def server_rss(work: Path, datasets: int) -> dict:
    from torrents import sample

    root = work / "many"
    for j in range(datasets):
        sample.generate(root, name=f"bench.many.{j:05d}", files=1, total_size=4096, seed=j)
    port, peer = bl.free_port("127.0.0.2"), bl.free_port("127.0.0.2")
    dead = f"http://127.0.0.2:{bl.free_port('127.0.0.2')}"  # no tracker or repository: the daemon alone
    with bl.Procs() as procs:
        proc = procs.start([str(bl.BIN / "bt-server"), "run", "--site", "many", "--listen", f"127.0.0.2:{port}",
                            "--peer-listen", f"127.0.0.2:{peer}", "--state", str(work / "many-state"),
                            "--root", str(root), "--tracker", dead, "--repo", dead], work / "many.log")
        t = time.monotonic()
        bl.wait_for(lambda: _ready(f"http://127.0.0.2:{port}") or proc.poll() is not None, 600,
                    f"bt-server to prepare {datasets} datasets", interval=0.5)
        if proc.poll() is not None:
            raise SystemExit(f"bench: bt-server exited {proc.returncode}; see {work / 'many.log'}")
        status = bl.get_json(f"http://127.0.0.2:{port}/api/status", timeout=30)
        return {"datasets": len(status["datasets"]), "rss_mb": rss_mb(proc.pid), "prepare_s": time.monotonic() - t}


def _ready(url: str) -> bool:
    try:
        return bool(bl.get_json(url + "/api/status", timeout=10).get("ready"))
    except OSError:
        return False


# --- federation: many sites, many clients --------------------------------------------------------
class Prober(threading.Thread):
    """Announces (leecher, then stopped) for the federation's swarms on fresh connections, every PROBE_EVERY s."""

    def __init__(self, port: int, hashes: list[bytes]) -> None:
        super().__init__(daemon=True)
        self.port, self.hashes = port, hashes
        self.seconds: list[float] = []
        self.failures = 0
        self.reasons: dict[str, int] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stop.wait(PROBE_EVERY) and i < 100_000:
            h = self.hashes[i % len(self.hashes)]
            try:
                took, body = one_announce("127.0.0.1", self.port, announce_query(h, 7 * 10**8 + i, 40000 + i % 20000,
                                                                                   1, 50))
                one_announce("127.0.0.1", self.port, announce_query(h, 7 * 10**8 + i, 40000 + i % 20000, 1, 0,
                                                                     "stopped"))
                if b"failure reason" in body:
                    self.failures += 1
                    reason = f"{h.hex()[:8]}: " + body[-120:].decode(errors="replace")
                    self.reasons[reason] = self.reasons.get(reason, 0) + 1
                else:
                    self.seconds.append(took)
            except OSError as exc:
                self.failures += 1
                self.reasons[str(exc)] = self.reasons.get(str(exc), 0) + 1
            i += 1


def holds(i: int, j: int, datasets: int) -> bool:
    return (i - j) % datasets < max(1, datasets * 2 // 5)


def federation(work: Path, store: str, n_sites: int, n_clients: int, n_datasets: int, files: int, size: int,
               site_rate: int) -> dict:
    from torrents import sample

    src = work / "source"
    names = []
    for j in range(n_datasets):
        names.append(sample.generate(src, name=f"bench.scale.d{j:02d}", files=files, total_size=size, seed=j).name)
    site_dirs = []
    for i in range(n_sites):
        d = bl.fresh_dir(work / "roots" / f"site{i + 1}")
        for j, name in enumerate(names):
            if holds(i, j, n_datasets):
                (d / name).mkdir()
                for f in (src / name).iterdir():
                    os.link(f, d / name / f.name)
        site_dirs.append(d)
    state = bl.fresh_dir(work / f"state-{store}")
    sites = tuple(topology.Site(topology.site_name(i), topology.site_ip(i), bl.free_port(topology.site_ip(i)),
                            bl.free_port(topology.site_ip(i)), os.urandom(8).hex()) for i in range(n_sites))
    redis_port = bl.free_port("127.0.0.1") if store == "redis" else 0
    fed = topology.Layout(state=state, data=site_dirs[0], tracker_port=bl.free_port("127.0.0.1"),
                          repo_port=bl.free_port("127.0.0.1"), sites=sites, idle_ttl=1800.0, heartbeat_interval=5.0,
                          site_data=tuple(site_dirs), redis_port=redis_port)
    (state / "config").mkdir(parents=True)
    (state / "redis").mkdir()
    for label, sections in topology.configs(fed).items():
        (state / "config" / f"{label}.toml").write_text(topology.toml(sections))
    env = {**os.environ, "BTSWARM_SERVER_UPLOAD_RATE_LIMIT": str(site_rate)}
    size_of = {n: bl.dataset_size(src / n) for n in names}
    with bl.Procs() as procs:
        pids: dict[str, int] = {}
        t = time.monotonic()
        for service in topology.services(fed, bl.BIN):
            p = procs.start(list(service.argv), work / f"{store}-{service.label}.log", env=env)
            pids[service.label] = p.pid
            if not service.label.startswith("site"):
                bl.wait_for(lambda: _healthy(service.health_url) or p.poll() is not None, 30, service.label)
        bl.wait_for(lambda: all(_healthy(s.health_url) for s in topology.services(fed, bl.BIN)[-n_sites:]), 120,
                    "every site to answer")
        want = {n: {sites[i].name for i in range(n_sites) if holds(i, j, n_datasets)} for j, n in enumerate(names)}

        def published() -> bool:
            try:
                return all(set(bl.get_json(f"{fed.repo_url}/api/datasets/{n}")["sites"]) == want[n] for n in names)
            except OSError:
                return False
        bl.wait_for(published, 600, "every dataset published by its sites", interval=0.5)
        ready_s = time.monotonic() - t
        bl.log(f"{store}: {n_sites} sites up and {n_datasets} datasets published in {ready_s:.1f} s")
        hashes = {n: bl.get_json(f"{fed.repo_url}/api/datasets/{n}")["info_hash"] for n in names}
        tracker_pid = pids["tracker"]
        ok0 = metric(fed.tracker_url, "btswarm_tracker_announces_total", '{result="ok"}')
        hist0 = histogram(fed.tracker_url, "btswarm_tracker_announce_seconds")
        cpu0 = bl.cpu_seconds(tracker_pid)
        prober = Prober(fed.tracker_port, [bytes.fromhex(h) for h in hashes.values()])
        prober.start()
        outs, clients = [], []
        t = time.monotonic()
        for k in range(n_clients):
            name = names[k % n_datasets]
            out = bl.fresh_dir(work / f"{store}-clients" / f"c{k}")
            outs.append((out, name))
            cmd = [str(bl.BIN / "bt-get"), name, "--repo", fed.repo_url, "-o", str(out), "--listen", bl.client_ip(k),
                   "--json", "--timeout", "900", "--workers", "1", "--seed-time", "30m", "-v"]
            clients.append(procs.start(cmd, work / f"{store}-c{k}.log", stdout=open(work / f"{store}-c{k}.json", "wb")))
            time.sleep(0.02)
        logs = [work / f"{store}-c{k}.log" for k in range(n_clients)]
        def all_done() -> bool:
            done = sum(" complete in " in p.read_text(errors="replace") for p in logs)
            return done == n_clients or any(c.poll() is not None for c in clients)
        bl.wait_for(all_done, 1200, f"{n_clients} clients to complete", interval=0.5)
        seconds = time.monotonic() - t
        prober.stop.set()
        prober.join(10)
        cpu = bl.cpu_seconds(tracker_pid) - cpu0
        announces = metric(fed.tracker_url, "btswarm_tracker_announces_total", '{result="ok"}') - ok0
        served = histogram_quantiles(hist0, histogram(fed.tracker_url, "btswarm_tracker_announce_seconds"))
        daemons = {label: rss_mb(pid) for label, pid in pids.items()}
        site_rss = [v for k, v in daemons.items() if k.startswith("site")]
        # Each bt-get (its process and its worker), seeding now that it is complete.
        rss_clients = [sum(rss_mb(q) for q in (c.pid, *bl.children(c.pid))) for c in clients]

        def per_dataset() -> dict[str, int]:
            up = {n: 0 for n in names}
            by_hash = {h: n for n, h in hashes.items()}
            for s in sites:
                for seed in bl.get_json(f"{s.control_url}/api/status", timeout=30)["seeds"]:
                    if seed["info_hash"] in by_hash:
                        up[by_hash[seed["info_hash"]]] += int(seed["uploaded"])
            return up
        # Sites count uploads from libtorrent's state updates (every second or so): read until settled.
        uploaded, last = per_dataset(), None
        deadline = time.monotonic() + 15
        while uploaded != last and time.monotonic() < deadline:
            time.sleep(1.2)
            last, uploaded = uploaded, per_dataset()
        codes = [procs.stop(c) for c in clients]
    bad = []
    for k, (out, name) in enumerate(outs):
        diff = subprocess.run(["diff", "-r", "-q", "-x", ".bt-get", str(src / name), str(out / name)],
                              capture_output=True, text=True)
        if diff.returncode != 0:
            bad.append(k)
    return {"store": store, "sites": n_sites, "clients": n_clients, "datasets": n_datasets,
            "dataset_bytes": size_of, "holders_per_dataset": {n: len(w) for n, w in want.items()},
            "ready_s": ready_s, "seconds": seconds, "complete_identical": n_clients - len(bad), "bad_clients": bad,
            "client_exit_codes": sorted(set(codes)),
            "egress_x": {n: uploaded[n] / size_of[n] for n in names},
            "clients_per_dataset": n_clients / n_datasets,
            "tracker_announces": announces, "tracker_cpu_s": cpu,
            "tracker_cpu_us_per_announce": cpu / max(1, announces) * 1e6,
            "tracker_latency": served,
            "probe": {**percentiles(prober.seconds), "failures": prober.failures, "failure_reasons": prober.reasons},
            "rss_mb": {"tracker": daemons.get("tracker"), "repo": daemons.get("repo"), "redis": daemons.get("redis"),
                       "site_median": statistics.median(site_rss), "site_max": max(site_rss),
                       "client_median": statistics.median(rss_clients) if rss_clients else None,
                       "client_max": max(rss_clients) if rss_clients else None}}


def _healthy(url: str) -> bool:
    if url.startswith("redis://"):
        host, _, port = url[8:].split("/")[0].rpartition(":")
        return bl.port_open(host, int(port))
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def main() -> int:
    ap = bl.parser(__doc__)
    ap.add_argument("--sites", type=int, default=None)
    ap.add_argument("--clients", type=int, default=None)
    ap.add_argument("--datasets", type=int, default=None)
    ap.add_argument("--site-rate", type=int, default=4_000_000, help="each site's upload cap, bytes/s")
    ap.add_argument("--parts", nargs="+", default=["federation", "growth", "server", "tracker"],
                    choices=["federation", "growth", "server", "tracker"])
    args = ap.parse_args()
    q = args.quick
    n_sites, n_clients, n_datasets = args.sites or (10 if q else 40), args.clients or (20 if q else 100), \
        args.datasets or (5 if q else 10)
    swarm_steps = [1, 100, 1000, 10_000] + ([] if q else [100_000])
    peer_steps = [10, 100, 1000] + ([] if q else [10_000])
    doc: dict = {"parts": args.parts}
    with bl.workdir("scale", args.keep) as work:
        if "federation" in args.parts:
            doc["federation"] = [federation(work, store, n_sites, n_clients, n_datasets, 4, 4 * 2**20, args.site_rate)
                                 for store in ("memory", "redis")]
        if "growth" in args.parts:
            with RedisServer(work / "growth-redis") as redis:
                doc["growth"] = [growth(work, "memory", None, swarm_steps, peer_steps, 500),
                                 growth(work, "redis", redis, swarm_steps, peer_steps, 500)]
        if "server" in args.parts:
            doc["server"] = server_rss(work, 200 if q else 1000)
        if "tracker" in args.parts:
            tw = bl.fresh_dir(work / "tracker")
            doc["tracker"] = bench_tracker.run(tw, 3.0 if q else 5.0, args.runs or 3, 16)
    doc["targets"] = {"tracker_rss_mb_at_100k": TRACKER_RSS_MB, "server_rss_mb_at_1000": SERVER_RSS_MB}
    bl.write_json(args.out, "scale", doc)
    report(doc)
    return 0


def report(doc: dict) -> None:
    for f in doc.get("federation", []):
        print(f"federation, {f['store']} store: {f['sites']} sites, {f['clients']} clients, {f['datasets']} datasets: "
              f"{f['complete_identical']}/{f['clients']} complete with identical bytes in {f['seconds']:.1f} s")
        print(f"  T2 egress per dataset (x its size, {f['clients_per_dataset']:.0f} clients each): "
              + ", ".join(f"{v:.2f}" for v in f["egress_x"].values()))
        lat = f["tracker_latency"]
        print(f"  tracker: {f['tracker_cpu_s']:.1f} CPU s over the run for {f['tracker_announces']:.0f} announces "
              f"({f['tracker_cpu_us_per_announce']:.0f} µs each, heartbeats and seed starts included); "
              f"answered in p50 {lat['p50_ms']:.2f} ms p99 {lat['p99_ms']:.2f} ms ({lat['n']:.0f} sampled); "
              f"a prober's fresh connections: p50 {f['probe']['p50_ms']:.2f} ms p99 {f['probe']['p99_ms']:.2f} ms "
              f"({f['probe']['n']} probes, {f['probe']['failures']} failed)")
        r = f["rss_mb"]
        print(f"  RSS MB: tracker {r['tracker']:.0f}, repo {r['repo']:.0f}"
              + (f", redis {r['redis']:.0f}" if r.get("redis") else "")
              + f", site median {r['site_median']:.0f} max {r['site_max']:.0f}"
              + (f", bt-get median {r['client_median']:.0f} max {r['client_max']:.0f}" if r["client_median"] else ""))
    for g in doc.get("growth", []):
        print(f"growth, {g['store']} store:")
        print(bl.table(["swarms", "tracker RSS MB", "redis MB", "p50 ms", "p99 ms"],
                       [[r["swarms"], r["tracker_rss_mb"], r["redis_mb"], r["p50_ms"], r["p99_ms"]]
                        for r in g["by_swarms"]]))
        print(bl.table(["peers in a swarm", "tracker RSS MB", "redis MB", "p50 ms", "p99 ms"],
                       [[r["peers"], r["tracker_rss_mb"], r["redis_mb"], r["p50_ms"], r["p99_ms"]]
                        for r in g["by_peers"]]))
    if "server" in doc:
        s = doc["server"]
        print(f"bt-server holding {s['datasets']} datasets: RSS {s['rss_mb']:.0f} MB (target <= {SERVER_RSS_MB})")
    if "tracker" in doc:
        t = doc["tracker"]
        print(bl.table(["tracker", "announces/s", "µs CPU", "p50 ms", "p99 ms"],
                       [[k, v["announces_per_s"], v["cpu_us_per_announce"], v["p50_ms"], v["p99_ms"]]
                        for k, v in t["median"].items()]))
        print("ratios: " + ", ".join(f"{k} {v:.2f}x" for k, v in t["median_ratios"].items()))


if __name__ == "__main__":
    sys.exit(main())
