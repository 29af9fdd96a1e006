"""Benchmark wan: btswarm on shaped links (htb uplinks in a private network namespace) against the bound.

    .venv/bin/python scripts/bench_wan.py [--out DIR] [--quick] [--keep] [--runs N]
        [--rate 100mbit] [--client-rate 100mbit] [--rtt 0ms 40ms 100ms] [--client-rtt 0ms] [--size 200M]
        [--small-files 20000]
        [--link-mtu 65536] [--clients 1 2 4 8] [--slow-clients 16 32] [--slow-rate 10mbit]
        [--shards 4 8] [--aria2c 8] [--no-curl]
        [--only single swarm batch hetero smallfiles hung arrival]

Every site's uplink is R (--rate), every client's C (--client-rate), the
nginx baseline's R (`btswarm up --site-link R --client-link C`, see
btswarm/shaping.py); downlinks are free. --rtt adds a round trip to each
site's link and the baseline's (`--site-link R/RTT`): a T3 and a site are
RTT apart, two sites 2 RTT, T3s among themselves 0 unless --client-rtt
gives the clients' links a delay too (`--client-link C/CRTT`: two T3s 2 CRTT
apart, a T3 and a site RTT + CRTT). The scenarios run once
for each RTT given (0, 40 and 100 ms unless told), and a last table sets
each figure beside its value at the smallest (the target: within 15% at
100 ms). --link-mtu 9000 gives the shaped loopback jumbo frames instead of
its 64 KiB packets (`btswarm up --link-mtu`). S is the
dataset (torrents.sample, 29 files; --quick 100 MB). Scenarios, each with
its baseline and its bound measured or computed in the same run:

  single      one T3 <- 3 sites: bt-get vs curl from nginx behind one R vs
              aria2c from the same 3 seeds; bound S/(3R).
  swarm       N T3s at once (N = 1, 2, 4, 8), each keeps seeding until
              the last is done: time to the last completion vs N curls from
              one nginx behind R; Kumar-Ross bound max(S/3R, N.S/(3R+N.C));
              T2 egress (sites' bytes uploaded / S as libtorrent counts them,
              also what it wrote to sockets a T3 then closed; and "wire":
              what the sites' uplinks, their htb classes, carried). In the
              same runs, for N > 1, the same N bt-gets with
              btget/siteshare.py off ("every site") and, for N in --aria2c
              (8), N aria2c BitTorrent clients
              (the .torrent with ?web_seeds=0, the same seeds, seeding on);
              each bt-get's time to its first byte, and the fraction of the
              bound from the median first byte on. The first run of the
              largest N <= 8 keeps a timeline of each site's and client's
              uplink and each client's bytes on disk (plot_bench.py draws
              wan-timeline.png). --no-curl leaves the curl baseline out.
              Each bt-get run also says whether this host's cores were the
              limit: the share of all cores busy over the run, to the median
              first byte and after it (/proc/stat), and each part's CPU
              (clients, sites, tracker, repository, btswarm up).
              Then N = 16 and 32 (--slow-clients) in a federation of their
              own whose sites and T3s all have --slow-rate (10 Mbit/s): at
              R = C = 100 Mbit/s 16 or more bt-gets make this host's 2
              cores the limit, not the links (the CPU line says how busy
              they were). Bound and egress as above; no every-site, curl or
              aria2c arm; one run per RTT with --quick.
  batch       `bt-get --shard K/n` on n client addresses at once (n in
              --shards, 4 and 8) vs one client fetching everything; bound
              S/(3R).
  hetero      3 sites, site3 at R/10: one T3 (bound of the two fast sites
              S/(2R)), and 8 T3s at once (Kumar-Ross bound with the slow site).
  smallfiles  20,000 files of 1-50 KB (--quick 5,000): files/s vs curl from
              nginx behind R (one connection, files in sequence); bound S/(3R).
  hung        2 sites (separate replicas, site2's read through a bindfs FUSE
              mount): a third of the way in, site2's bt-server is SIGSTOPped,
              or (separately) its bindfs is SIGSTOPped so that its storage
              reads block while its control API and heartbeat go on; bound:
              the whole dataset from site1 alone, S/R. Bytes compared.
  arrival     a second T3 arriving while site2's storage is frozen (as in
              hung: the first T3 froze it a third of the way in; the second
              starts once the first is done and stuck_after + 3 s after the
              freeze), with site1's seed still running or stopped (idle);
              before (bt-server stuck_after = 0: detection off) and after
              (stuck_after 10 s: the tracker drops site2's seed and starts
              site1's); bound S/R from site1 alone. Bytes compared.

Wall time of each command, process start included. Medians of the runs;
the curl baseline of the swarm (N x S/R by construction) is measured once per
N, and in --quick only up to N = 4 (larger N: N x the N = 1 time, marked).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import benchlib as bl

from btswarm import federation as fedlib, shaping
from btswarm.testbed import frozenfs
from torrents import urls

SCENARIOS = ("single", "swarm", "batch", "hetero", "smallfiles", "hung", "arrival")
TARGETS = {  # issue 25's where it set one (single, swarm 8, batch, aria2c), the earlier ones elsewhere
    "single_fraction": 0.92, "single_vs_curl": 2.7, "single_vs_aria2c": 1.5,
    "swarm8_fraction": 0.85, "swarm8_egress_x": 1.2, "swarm8_vs_aria2c": 1.5,
    "swarm16_fraction": 0.8, "swarm16_egress_x": 1.3, "swarm32_fraction": 0.8, "swarm32_egress_x": 1.3,
    "hetero_fraction": 0.85, "batch_x_bound": 1.15, "hung_fraction": 0.7,
}
STUCK_AFTER = 10.0  # bt-server's default [server] stuck_after
ARRIVAL_CAP = 90  # s: a second T3 still running then is stopped and counted as this long (marked)
SEED_TIME = "30m"  # swarm clients seed until all are done, then are stopped by PID
CLIENTS = 40  # shaped client addresses (a swarm of 32, the single contenders, the warm-up's)
MEAN_SMALL = 25 * 1024 + 512  # with jitter 0.96: 1-50 KB files, as bench_smallfiles
SITE_RTT = 0.0  # s, --rtt: the round trip every site's link adds (set once by main)
CLIENT_RTT = 0.0  # s, --client-rtt: the round trip every client's link adds (two T3s are twice that apart)
LINK_MTU = shaping.LO_MTU  # --link-mtu: the namespace's loopback MTU (btswarm up --link-mtu)


@contextlib.contextmanager
def noted(doc: dict, key: str) -> Iterator[None]:
    """Run one scenario; a failure is recorded (and printed) instead of losing the other scenarios."""
    t = time.monotonic()
    try:
        yield
    except (SystemExit, Exception) as e:  # noqa: BLE001  (SystemExit: benchlib's one-line failures)
        if isinstance(e, SystemExit) and e.code in (0, None):
            raise
        doc.setdefault("failed", {})[key] = str(e)[-2000:]
        bl.log(f"{key}: FAILED: {e}")
    bl.log(f"{key}: {time.monotonic() - t:.0f} s")


def shaped_args(rate: int, client_rate: int, overrides: dict[str, int] | None = None) -> list[str]:
    args = ["--site-link", str(shaping.LinkSpec(rate, SITE_RTT))]
    for name, r in (overrides or {}).items():
        args += ["--site-link", f"{name}={shaping.LinkSpec(r, SITE_RTT)}"]
    args += ["--client-link", str(shaping.LinkSpec(client_rate, CLIENT_RTT)), "--client-addresses", str(CLIENTS)]
    return args + (["--link-mtu", str(LINK_MTU)] if LINK_MTU != shaping.LO_MTU else [])


def curl_cmd(srv: bl.Nginx, name: str, lfns: list[str], out: Path, ip: str, config: Path | None = None) -> list[str]:
    cmd = bl.curl_config_cmd(srv, name, lfns, out, config) if config else bl.curl_cmd(srv, name, lfns, out)
    return [cmd[0], "--interface", ip, *cmd[1:]]


def aria2c_cmd(torrent: Path, out: Path, ip: str, seed: bool = False, port: int | None = None) -> list[str]:
    """aria2c as a BitTorrent client on `ip` (listening on `port`, default a free one); `seed`: it seeds on
    (until stopped by PID) once complete."""
    seeding = ["--seed-time=60", "--seed-ratio=0.0"] if seed else ["--seed-time=0"]
    return ["aria2c", "-q", "--enable-dht=false", "--enable-dht6=false", "--bt-enable-lpd=false",
            "--enable-peer-exchange=false", *seeding, "--file-allocation=none", "--check-integrity=false",
            "--disable-ipv6=true", f"--interface={ip}", f"--listen-port={port or bl.free_port(ip)}",
            "--summary-interval=0", "--console-log-level=warn", f"--dir={out}", str(torrent)]


def seeds_everywhere(fed: bl.Federation, info_hash: str) -> None:
    """Every site seeding `info_hash` and listed so at the tracker (all contenders get the same seeds)."""
    bl.start_seeds(fed, info_hash)
    n = len(fed.sites)
    bl.wait_for(lambda: len(bl.get_json(f"{fed.tracker_url}/api/swarms/{info_hash}")["sites"]) >= n, 30,
                f"all {n} sites seeding at the tracker", interval=0.2)


def check_complete(label: str, directory: Path, size: int) -> None:
    got = bl.dataset_size(directory) if directory.is_dir() else 0
    if got != size:
        raise SystemExit(f"{label}: {got} of {size} bytes arrived in {directory}")


# --- one command at a time ------------------------------------------------------------------------
def timed_contenders(contenders: dict, runs: int, dest_of, size: int, name: str, tag: str) -> dict[str, list[float]]:
    seconds: dict[str, list[float]] = {k: [] for k in contenders}
    for run_no in range(runs):
        for label, make in contenders.items():
            dest = bl.fresh_dir(dest_of(label))
            t = bl.timed(make(dest), 1800)
            check_complete(label, dest / name, size)
            seconds[label].append(t.seconds)
            bl.log(f"{tag} run {run_no + 1} {label:10s} {t.seconds:6.2f} s")
            bl.fresh_dir(dest)
    return seconds


def single(fed: bl.Federation, srv: bl.Nginx, work: Path, ds: dict, runs: int, rate: int) -> dict:
    name, size = ds["name"], ds["bytes"]
    torrent = work / f"{name}.torrent"
    torrent.write_bytes(fed.torrent(name))
    seeds_everywhere(fed, fed.info_hash(name))
    contenders = {
        "bt-get": lambda o: bl.bt_get_cmd(fed, name, o, bl.client_ip(0)),
        "curl<-nginx": lambda o: curl_cmd(srv, name, ds["lfns"], o / name, bl.client_ip(1)),
        "aria2c": lambda o: aria2c_cmd(torrent, o, bl.client_ip(2)),
    }
    seconds = timed_contenders(contenders, runs, lambda label: work / "out", size, name, "single")
    med = {k: bl.median(v) for k, v in seconds.items()}
    bound = size * 8 / (3 * rate)
    return {"bound_s": bound, "median_s": med, "runs_s": seconds,
            "fraction": bound / med["bt-get"], "vs_curl": med["curl<-nginx"] / med["bt-get"],
            "vs_aria2c": med["aria2c"] / med["bt-get"], "curl_fraction_of_its_bound": size * 8 / rate / med["curl<-nginx"]}


# --- many at once ---------------------------------------------------------------------------------------
def completion_times(logs: list[Path], procs: list[subprocess.Popen], t0: float, timeout: float, seeding: bool
                      ) -> list[float]:
    """Seconds from t0 until each bt-get logged its completion (seeding: it then seeds on) or exited 0."""
    done: dict[int, float] = {}
    deadline = time.monotonic() + timeout
    while len(done) < len(logs):
        for k, path in enumerate(logs):
            if k in done:
                continue
            code = procs[k].poll()
            if seeding and " complete in " in path.read_text(errors="replace") or code == 0:
                done[k] = time.monotonic() - t0
            elif code is not None:
                raise SystemExit(f"client {k} exited {code} before completing; see {path}")
        if time.monotonic() > deadline:
            raise SystemExit(f"{len(logs) - len(done)} of {len(logs)} clients not complete after {timeout:.0f} s")
        time.sleep(0.05)
    return [done[k] for k in range(len(logs))]


def bt_get_many(fed: bl.Federation, work: Path, ds: dict, extra: list[list[str]], seed: bool, sizes: list[int],
                timeline: bool = False, env: dict[str, str] | None = None) -> dict:
    """len(extra) bt-gets at once (client k: client_ip(k) with extra[k]); times to completion; T2 egress."""
    name = ds["name"]
    n = len(extra)
    before, wire = bl.settled_uploaded_total(fed), sites_wire_bytes(fed)
    outs = [bl.fresh_dir(work / f"client{k}") for k in range(n)]
    logs = [work / f"client{k}.log" for k in range(n)]
    for p in logs:
        p.write_text("")
    seeding = ["--seed-time", SEED_TIME] if seed else []
    tl = Timeline(fed, outs) if timeline else contextlib.nullcontext()
    with bl.Procs() as procs, tl:
        meter = CpuMeter(fed)
        t0, wall0 = time.monotonic(), time.time()
        clients = [procs.start(bl.bt_get_cmd(fed, name, outs[k], bl.client_ip(k), "-v", *seeding, *extra[k]), logs[k],
                               stdout=open(work / f"client{k}.json", "wb"), env={**os.environ, **(env or {})})
                   for k in range(n)]
        times = completion_times(logs, clients, t0, 900, seed)
        # Clients that seed on are still running; the others have exited, their CPU no longer readable.
        meter.clients([c.pid for c in clients] if seed else [])
        codes = [procs.stop(c) for c in clients]
    if any(codes):
        raise SystemExit(f"bt-get clients exited {codes}; see {work}/client*.log")
    from_sites = 0
    each_sources, starts = [], []
    for k in range(n):
        check_complete(f"client {k}", outs[k] / name, sizes[k])
        bl.fresh_dir(outs[k])
        doc = json.loads((work / f"client{k}.json").read_text())
        sources = doc.get("sources", {})
        each_sources.append(sources)
        marks = {**doc.get("timeline", {}), "first_byte": doc.get("first_byte_at")}
        starts.append({m: round(at - wall0, 3) for m, at in marks.items() if isinstance(at, (int, float))})
        from_sites += sum(v for src, v in sources.items() if src.startswith("site"))
    uploaded = bl.settled_uploaded_total(fed) - before
    out = {"seconds": max(times), "each_s": times, "egress_x": uploaded / ds["bytes"],
           "wire_egress_x": (sites_wire_bytes(fed) - wire) / ds["bytes"], "from_sites_x": from_sites / ds["bytes"],
           "sources": each_sources, "starts": starts,
           "first_byte_s": bl.median([m.get("first_byte", float("nan")) for m in starts]), "cpu": meter.doc}
    # The start (Python processes on shared cores) against the transfer: busy until the median first byte, and after.
    out["cpu"]["host_busy_to_first_byte"] = meter.busy(0.0, out["first_byte_s"])
    out["cpu"]["host_busy_after_first_byte"] = meter.busy(out["first_byte_s"], meter.doc["wall_s"])
    if timeline:
        out["timeline"] = tl.doc()
    return out


class Timeline:
    """Who waited on whom: every `interval` s, each site's and client's uplink bytes (the htb class counters)
    and each client's bytes on disk (allocated blocks: the files are written sparse), in a thread."""

    def __init__(self, fed: bl.Federation, outs: list[Path], interval: float = 0.25) -> None:
        self.fed, self.outs, self.interval = fed, outs, interval
        self.sites = {s.name: site_ip(s) for s in fed.sites}
        self.clients = [bl.client_ip(k) for k in range(len(outs))]
        self.samples: list[tuple[float, dict[str, int], list[int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Timeline":
        self.t0 = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            t = time.monotonic() - self.t0
            sent = self.fed.link_bytes()
            got = [_allocated(o) for o in self.outs]
            self.samples.append((t, sent, got))
            self._stop.wait(self.interval)

    def doc(self) -> dict:
        """Cumulative bytes from the start: t, sites' uplinks by name, clients' uplinks and bytes on disk."""
        if not self.samples:
            return {}
        base = self.samples[0][1]
        return {"t": [round(t, 3) for t, _, _ in self.samples],
                "site_sent": {n: [s.get(ip, 0) - base.get(ip, 0) for _, s, _ in self.samples]
                              for n, ip in self.sites.items()},
                "client_sent": [[s.get(ip, 0) - base.get(ip, 0) for _, s, _ in self.samples] for ip in self.clients],
                "client_got": [[g[k] for _, _, g in self.samples] for k in range(len(self.outs))]}


def _allocated(directory: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(directory):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(root, f)).st_blocks * 512
    return total


def site_ip(site) -> str:
    return site.control_url.split("//")[1].rsplit(":", 1)[0]


def sites_wire_bytes(fed: bl.Federation) -> int:
    """Bytes the sites' uplinks have carried (their htb classes: headers and all). The sites' own count
    (egress_x) is what libtorrent wrote to its sockets, also what a T3 that let the site go never read."""
    sent = fed.link_bytes()
    return sum(sent.get(site_ip(s), 0) for s in fed.sites)


def host_jiffies() -> tuple[int, int]:
    """(busy, total) clock ticks of all this host's cores since boot (/proc/stat's first line)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)


class CpuMeter:
    """Whether this host's cores were the limit of a run (16 and 32 T3s on 2 cores): the share of all
    cores busy over it (/proc/stat: every process on the host, other users' too), and the CPU seconds
    of each part (all its threads: a site's seeds are libtorrent threads of its bt-server): the
    federation's processes and `btswarm up` (the delay line is its thread), each
    client's process tree (parent and workers, read by `clients` just before they are stopped), and
    this benchmark itself (its pollers and timeline)."""

    def __init__(self, fed: bl.Federation, interval: float = 0.25) -> None:
        self.parts = {**fed.pids(), "btswarm up": fed.up_pid}
        self.doc: dict = {}
        self.t0, self.own0 = time.monotonic(), sum(os.times()[:2])
        self.part0 = {label: bl.cpu_seconds(pid) for label, pid in self.parts.items()}
        self.samples = [(0.0, *host_jiffies())]  # (s since t0, busy, total), every `interval` s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(interval,), daemon=True)
        self._thread.start()

    def _sample(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.samples.append((time.monotonic() - self.t0, *host_jiffies()))

    def busy(self, start: float, end: float) -> float:
        """The share of the host's cores busy between two instants (s since t0, to the nearest sample)."""
        a = min(self.samples, key=lambda x: abs(x[0] - start))
        b = min(self.samples, key=lambda x: abs(x[0] - end))
        return (b[1] - a[1]) / (b[2] - a[2]) if b[2] > a[2] else float("nan")

    def clients(self, pids: list[int]) -> dict:
        """Read at the run's end, the clients still running: the figures of the run (kept in `doc`)."""
        self._stop.set()
        self._thread.join(5)
        wall = time.monotonic() - self.t0
        self.samples.append((wall, *host_jiffies()))
        cores = os.cpu_count() or 1
        self.doc = {"wall_s": round(wall, 3), "cores": cores, "host_busy": self.busy(0.0, wall),
                    "parts_cpu_s": {label: round(bl.cpu_seconds(pid) - self.part0[label], 3)
                                    for label, pid in self.parts.items()},
                    "clients_cpu_s": [round(bl.tree_cpu_seconds([p]), 3) for p in pids],
                    "bench_cpu_s": round(sum(os.times()[:2]) - self.own0, 3)}
        return self.doc


def cpu_summary(cpu: dict) -> dict:
    """Host busy share, the median client's and the busiest site's CPU as a share of one core."""
    wall = cpu["wall_s"]
    sites = [v for k, v in cpu["parts_cpu_s"].items() if k.startswith("site")]
    return {"host_busy": cpu["host_busy"], "host_busy_to_first_byte": cpu["host_busy_to_first_byte"],
            "host_busy_after_first_byte": cpu["host_busy_after_first_byte"],
            "client_core_share": bl.median(cpu["clients_cpu_s"]) / wall if cpu["clients_cpu_s"] else float("nan"),
            "site_core_share": max(sites, default=0.0) / wall}


def aria2c_many(fed: bl.Federation, work: Path, ds: dict, n: int, torrent: Path, timeline: bool = False) -> dict:
    """n aria2c BitTorrent clients at once (client_ip(k)), the same .torrent without web seeds, each seeding on
    until the last is done: times to completion (aria2c's on-bt-download-complete hook), T2 egress."""
    name = ds["name"]
    before, wire = bl.settled_uploaded_total(fed), sites_wire_bytes(fed)
    outs = [bl.fresh_dir(work / f"aria{k}") for k in range(n)]
    marks = [work / f"aria{k}.done" for k in range(n)]
    hooks = []
    for k in range(n):
        marks[k].unlink(missing_ok=True)
        hook = work / f"aria{k}.hook"
        hook.write_text(f"#!/bin/sh\ntouch {marks[k]}\n")
        hook.chmod(0o755)
        hooks.append(hook)
    tl = Timeline(fed, outs) if timeline else contextlib.nullcontext()
    with bl.Procs() as procs, tl:
        t0 = time.monotonic()
        clients = [procs.start([*aria2c_cmd(torrent, outs[k], bl.client_ip(k), seed=True),
                                f"--on-bt-download-complete={hooks[k]}"], work / f"aria{k}.log") for k in range(n)]
        done = marked_done(clients, marks, t0, lambda k: f"aria2c {k}", f"{work}/aria{{k}}.log")
    for k in range(n):
        check_complete(f"aria2c {k}", outs[k] / name, ds["bytes"])
        bl.fresh_dir(outs[k])
    uploaded = bl.settled_uploaded_total(fed) - before
    times = [done[k] for k in range(n)]
    out = {"seconds": max(times), "each_s": times, "egress_x": uploaded / ds["bytes"],
           "wire_egress_x": (sites_wire_bytes(fed) - wire) / ds["bytes"]}
    if timeline:
        out["timeline"] = tl.doc()
    return out


def marked_done(clients: list[subprocess.Popen], marks: list[Path], t0: float, label, log: str,
                timeout: float = 900) -> dict[int, float]:
    """Until each client k has written marks[k] (aria2c's on-bt-download-complete hook): its seconds since
    t0. A client that exits first, or `timeout`, ends the benchmark (`label(k)` names it, `log` with {k}
    where its output is)."""
    done: dict[int, float] = {}
    while len(done) < len(clients):
        for k, client in enumerate(clients):
            if k not in done and marks[k].exists():
                done[k] = time.monotonic() - t0
            elif k not in done and client.poll() is not None:
                raise SystemExit(f"{label(k)} exited {client.returncode}; see {log.format(k=k)}")
        if time.monotonic() > t0 + timeout:
            raise SystemExit(f"aria2c: {len(clients) - len(done)} of {len(clients)} not complete after "
                             f"{timeout:g} s")
        time.sleep(0.05)
    return done


def curl_many(srv: bl.Nginx, work: Path, ds: dict, n: int) -> float:
    outs = [bl.fresh_dir(work / f"curl{k}") for k in range(n)]
    with bl.Procs() as procs:
        t0 = time.monotonic()
        clients = [procs.start(curl_cmd(srv, ds["name"], ds["lfns"], outs[k], bl.client_ip(k)), work / f"curl{k}.log")
                   for k in range(n)]
        for c in clients:
            c.wait(max(1.0, t0 + 1800 - time.monotonic()))
        seconds = time.monotonic() - t0
    if any(c.returncode for c in clients):
        raise SystemExit(f"curl exited {[c.returncode for c in clients]}; see {work}/curl*.log")
    for o in outs:
        check_complete("curl", o, ds["bytes"])
        bl.fresh_dir(o)
    return seconds


def kumar_ross(size: int, n: int, site_rates: list[int], client_rate: int) -> float:
    """Minimum time to deliver `size` bytes to n peers: max(S/ΣR, n·S/(ΣR + n·C)) (free downlinks)."""
    bits, total = size * 8, sum(site_rates)
    return max(bits / total, n * bits / (total + n * client_rate))


def swarm(fed: bl.Federation, srv: bl.Nginx | None, work: Path, ds: dict, runs: int, counts: list[int], rate: int,
          client_rate: int, curl_upto: int, aria2c_counts: list[int], site_rates: list[int] | None = None,
          every_site: bool = True) -> dict:
    """N bt-gets at once, and N aria2c from the same seeds (the .torrent without web seeds) in the same runs;
    the first run of the largest N <= 8 keeps its timeline (who waited on whom). `site_rates`: the sites'
    uplinks when they differ (hetero), for the bound. `every_site`: also the same N with the site share off.
    `srv` (nginx) may be None when there is no curl baseline (`curl_upto` < 0)."""
    seeds_everywhere(fed, fed.info_hash(ds["name"]))
    torrent = work / f"{ds['name']}.noweb.torrent"
    torrent.write_bytes(fedlib.get_bytes(f"{fed.repo}{urls.dataset_torrent(ds['name'])}?web_seeds=0"))
    traced = max((n for n in counts if n <= 8), default=None)
    detail: dict[int, list[dict]] = {n: [] for n in counts}
    before: dict[int, list[dict]] = {n: [] for n in counts if n > 1 and every_site}
    aria: dict[int, list[dict]] = {n: [] for n in aria2c_counts}
    timelines: dict[str, dict] = {}
    for run_no in range(runs):
        for n in counts:
            trace = run_no == 0 and n == traced
            if n in before:  # the T3s as before btget/siteshare.py: each keeps every site that unchokes it
                b = bt_get_many(fed, work, ds, [["--workers", "1"]] * n, True, [ds["bytes"]] * n, timeline=trace,
                                env={"BTSWARM_GET_SITE_SHARE": "false"})
                if trace:
                    timelines["bt-get, every site"] = b.pop("timeline")
                before[n].append(b)
                bl.log(f"swarm run {run_no + 1} {n:2d} bt-get, every site: last done {b['seconds']:6.2f} s, "
                       f"T2 egress {b['egress_x']:.2f}x (wire {b['wire_egress_x']:.2f}x), first byte {b['first_byte_s']:.1f} s")
            r = bt_get_many(fed, work, ds, [["--workers", "1"]] * n, True, [ds["bytes"]] * n, timeline=trace)
            if trace:
                timelines["bt-get"] = r.pop("timeline")
            detail[n].append(r)
            bl.log(f"swarm run {run_no + 1} {n:2d} bt-get: last done {r['seconds']:6.2f} s, "
                   f"T2 egress {r['egress_x']:.2f}x (wire {r['wire_egress_x']:.2f}x), first byte {r['first_byte_s']:.1f} s, each "
                   f"{' '.join(f'{t:.1f}' for t in sorted(r['each_s']))}")
            if n in aria:
                a = aria2c_many(fed, work, ds, n, torrent, timeline=trace)
                if trace:
                    timelines["aria2c"] = a.pop("timeline")
                aria[n].append(a)
                bl.log(f"swarm run {run_no + 1} {n:2d} aria2c: last done {a['seconds']:6.2f} s, "
                       f"T2 egress {a['egress_x']:.2f}x (wire {a['wire_egress_x']:.2f}x), each {' '.join(f'{t:.1f}' for t in sorted(a['each_s']))}")
    curl: dict[int, dict] = {}
    for n in counts:
        if curl_upto < 0:  # --no-curl
            curl[n] = {"seconds": float("nan"), "measured": False}
        elif n <= curl_upto or n == 1:
            curl[n] = {"seconds": curl_many(srv, work, ds, n), "measured": True}
        else:
            curl[n] = {"seconds": n * curl[1]["seconds"], "measured": False}
        if curl_upto >= 0:
            bl.log(f"swarm {n:2d} curl: {curl[n]['seconds']:6.2f} s{'' if curl[n]['measured'] else ' (N x the N=1 time)'}")
    rows = {}
    for n in counts:
        t = bl.median([r["seconds"] for r in detail[n]])
        bound = kumar_ross(ds["bytes"], n, site_rates or [rate] * len(fed.sites), client_rate)
        rows[str(n)] = {"seconds": t, "bound_s": bound, "fraction": bound / t,
                        "egress_x": bl.median([r["egress_x"] for r in detail[n]]),
                        "wire_egress_x": bl.median([r["wire_egress_x"] for r in detail[n]]),
                        "curl_s": curl[n]["seconds"], "curl_measured": curl[n]["measured"],
                        "vs_curl": curl[n]["seconds"] / t}
        if before.get(n):
            b = bl.median([r["seconds"] for r in before[n]])
            rows[str(n)].update({"every_site_s": b, "every_site_egress_x": bl.median([r["egress_x"] for r in before[n]]),
                                 "every_site_wire_egress_x": bl.median([r["wire_egress_x"] for r in before[n]]),
                                 "vs_every_site": b / t})
        rows[str(n)]["first_byte_s"] = bl.median([r["first_byte_s"] for r in detail[n]])
        shares = [cpu_summary(r["cpu"]) for r in detail[n]]
        rows[str(n)]["cpu"] = {k: bl.median([sh[k] for sh in shares]) for k in shares[0]}
        # The swarm without bt-get's process start (16 Python processes on this host's 2 cores): from the
        # median first byte of a run to its last completion.
        rows[str(n)]["after_first_byte_s"] = bl.median([r["seconds"] - r["first_byte_s"] for r in detail[n]])
        if aria.get(n):
            a = bl.median([r["seconds"] for r in aria[n]])
            rows[str(n)].update({"aria2c_s": a, "aria2c_egress_x": bl.median([r["egress_x"] for r in aria[n]]),
                                 "aria2c_wire_egress_x": bl.median([r["wire_egress_x"] for r in aria[n]]),
                                 "vs_aria2c": a / t})
    return {"clients": counts, "median": rows, "timeline_n": traced, "timelines": timelines,
            "runs_detail": {str(n): rs for n, rs in detail.items()},
            "aria2c_detail": {str(n): rs for n, rs in aria.items()},
            "every_site_detail": {str(n): rs for n, rs in before.items()}}


def batch(fed: bl.Federation, work: Path, ds: dict, runs: int, rate: int, counts: list[int]) -> dict:
    """`--shard K/n` on n client addresses at once, for each n in `counts`, and one client fetching
    everything in the same runs (the shards' baseline)."""
    seeds_everywhere(fed, fed.info_hash(ds["name"]))
    sizes = {n: shard_bytes(fed, ds, n) for n in counts}
    shards: dict[int, list[float]] = {n: [] for n in counts}
    details: dict[int, list[dict]] = {n: [] for n in counts}
    whole: list[float] = []
    for run_no in range(runs):
        for n in counts:
            r = bt_get_many(fed, work, ds, [["--shard", f"{k + 1}/{n}"] for k in range(n)], False, sizes[n])
            shards[n].append(r["seconds"])
            details[n].append(r)
            c = cpu_summary(r["cpu"])
            bl.log(f"batch run {run_no + 1}: {n} shards, last done {r['seconds']:6.2f} s, first byte "
                   f"{r['first_byte_s']:.2f} s, cores busy {c['host_busy_to_first_byte']:.0%} to it, "
                   f"{c['host_busy_after_first_byte']:.0%} after")
        w = bt_get_many(fed, work, ds, [[]], False, [ds["bytes"]])
        whole.append(w["seconds"])
        bl.log(f"batch run {run_no + 1}: one client, all {w['seconds']:6.2f} s")
    bound = ds["bytes"] * 8 / (3 * rate)
    by = {str(n): {"shards_s": bl.median(shards[n]), "x_bound": bl.median(shards[n]) / bound,
                   "shard_bytes": sizes[n], "runs_s": shards[n],
                   "first_byte_s": bl.median([r["first_byte_s"] for r in details[n]]),
                   "each_s": [r["each_s"] for r in details[n]], "starts": [r["starts"] for r in details[n]],
                   "cpu": [r["cpu"] for r in details[n]]} for n in counts}
    return {"bound_s": bound, "whole_s": bl.median(whole), "whole_runs_s": whole, "by_shards": by}


def shard_bytes(fed: bl.Federation, ds: dict, n: int) -> list[int]:
    """What each `--shard K/n` fetches, as bt-get says it (`--list-files --json`: no download)."""
    sizes = []
    for k in range(1, n + 1):
        listed = bl.timed([str(bl.BIN / "bt-get"), ds["name"], "--repo", fed.repo, "--shard", f"{k}/{n}",
                           "--list-files", "--json"], timeout=60)
        sizes.append(json.loads(listed.stdout)["total_size"])
    return sizes


def single_only(fed: bl.Federation, srv: bl.Nginx, work: Path, ds: dict, runs: int, bound: float, tag: str,
                config: Path | None = None) -> dict:
    """bt-get vs curl<-nginx on one dataset (seeds at every site): seconds, fraction of `bound`."""
    name, size = ds["name"], ds["bytes"]
    seeds_everywhere(fed, fed.info_hash(name))
    contenders = {
        "bt-get": lambda o: bl.bt_get_cmd(fed, name, o, bl.client_ip(0)),
        "curl<-nginx": lambda o: curl_cmd(srv, name, ds["lfns"], o / name, bl.client_ip(1), config),
    }
    seconds = timed_contenders(contenders, runs, lambda label: work / "out", size, name, tag)
    med = {k: bl.median(v) for k, v in seconds.items()}
    return {"bound_s": bound, "median_s": med, "runs_s": seconds, "fraction": bound / med["bt-get"],
            "vs_curl": med["curl<-nginx"] / med["bt-get"]}


# --- a site that hangs ------------------------------------------------------------------------------------
def restart_seed(fed: bl.Federation, site: str, info_hash: str) -> None:
    """Stop and start `site`'s seed (it closes and reopens its files: nothing of them stays mapped)."""
    from torrents import auth
    import urllib.request

    s = fed.site(site)
    path = f"/api/seeds/{info_hash}"
    headers = auth.sign(bl.site_secret(fed, site), site, "DELETE", path, b"")
    req = urllib.request.Request(s.control_url + path, headers=headers, method="DELETE")
    with contextlib.suppress(urllib.error.HTTPError), urllib.request.urlopen(req, timeout=10) as resp:
        resp.read()
    bl.wait_for(lambda: info_hash not in [x["info_hash"] for x in fed.site_status(site)["seeds"]], 20,
                f"{site} to stop its seed")


def hung_run(fed: bl.Federation, work: Path, ds: dict, k: int, fault: str, site_pid: int, fuse_pid: int) -> dict:
    """One bt-get from both sites; `fault` (none, sigstop, fuse) hits site2 once a third has arrived."""
    from btswarm.trees import compare_trees

    name, size = ds["name"], ds["bytes"]
    out = bl.fresh_dir(work / "hung-out")
    start = fed.link_bytes()
    site_ips = [s.control_url.split("//")[1].rsplit(":", 1)[0] for s in fed.sites]
    target = {"sigstop": site_pid, "fuse": fuse_pid}.get(fault)
    with bl.Procs() as procs:
        t0 = time.monotonic()
        proc = procs.start(bl.bt_get_cmd(fed, name, out, bl.client_ip(k), "--json"), work / "hung.log",
                           stdout=open(work / "hung.json", "wb"))
        try:
            if target is not None:
                bl.wait_for(lambda: sum(fed.link_bytes()[ip] - start[ip] for ip in site_ips) >= size / 3
                            or proc.poll() is not None, 300, "a third of the dataset to arrive", interval=0.05)
                os.kill(target, signal.SIGSTOP)
                fault_at = time.monotonic() - t0
            else:
                fault_at = None
            code = proc.wait(900)
            seconds = time.monotonic() - t0
        finally:
            if target is not None:
                os.kill(target, signal.SIGCONT)
    if code != 0:
        raise SystemExit(f"hung {fault}: bt-get exited {code}; see {work}/hung.log")
    doc = json.loads((work / "hung.json").read_text())
    bad = compare_trees(ds["root"], out / name)
    return {"seconds": seconds, "fault_at_s": fault_at, "identical": not bad, "differing": bad[:5],
            "sources": doc.get("sources", {})}


def hung(fed: bl.Federation, work: Path, ds: dict, runs: int, rate: int, fuse_pid: int, fuse_mount: Path) -> dict:
    info_hash = fed.info_hash(ds["name"])
    detail: dict[str, list[dict]] = {"none": [], "sigstop": [], "fuse": []}
    k = 0
    for run_no in range(runs):
        for fault in detail:
            site_pid = fed.site_pids()["site2"]
            if fault == "fuse":
                restart_seed(fed, "site2", info_hash)
                frozenfs.drop_cached(fuse_mount)
            seeds_everywhere(fed, info_hash)
            r = hung_run(fed, work, ds, k % CLIENTS, fault, site_pid, fuse_pid)
            k += 1
            detail[fault].append(r)
            bl.log(f"hung run {run_no + 1} {fault:8s} {r['seconds']:6.2f} s (fault at {r['fault_at_s']}), "
                   f"identical {r['identical']}, sources {r['sources']}")
            # site2 back to normal before the next run: its heartbeat seen again by the tracker
            bl.wait_for(lambda: any(s.get("name") == "site2" and s.get("up")
                                    for s in bl.get_json(f"{fed.tracker_url}/api/sites").get("sites", [])),
                        60, "site2 up again at the tracker", interval=0.2)
    bound = ds["bytes"] * 8 / rate
    rows = {}
    for fault, rs in detail.items():
        t = bl.median([r["seconds"] for r in rs])
        rows[fault] = {"seconds": t, "fraction": bound / t, "identical": all(r["identical"] for r in rs)}
    return {"bound_s": bound, "median": rows, "runs_detail": detail}


def arrival_run(fed: bl.Federation, work: Path, ds: dict, k: int, fuse_pid: int, fuse_mount: Path,
                site1_idle: bool, detecting: bool) -> dict:
    """The first T3 freezes site2's storage a third of the way in; once it is done (and stuck_after + 3 s after
    the freeze) a second T3 starts; site2 is continued after it. The second one's time, sources, bytes."""
    from btswarm.trees import compare_trees

    name, size = ds["name"], ds["bytes"]
    info_hash = fed.info_hash(name)
    restart_seed(fed, "site2", info_hash)
    frozenfs.drop_cached(fuse_mount)
    seeds_everywhere(fed, info_hash)
    site_ips = [s.control_url.split("//")[1].rsplit(":", 1)[0] for s in fed.sites]
    first_out, second_out = bl.fresh_dir(work / "arrival-1"), bl.fresh_dir(work / "arrival-2")
    start = fed.link_bytes()
    stuck_seen = None
    with bl.Procs() as procs:
        first = procs.start(bl.bt_get_cmd(fed, name, first_out, bl.client_ip(k)), work / "arrival-1.log",
                            stdout=subprocess.DEVNULL)
        try:
            bl.wait_for(lambda: sum(fed.link_bytes()[ip] - start[ip] for ip in site_ips) >= size / 3
                        or first.poll() is not None, 300, "a third of the dataset to arrive", interval=0.05)
            os.kill(fuse_pid, signal.SIGSTOP)
            frozen = time.monotonic()
            if first.wait(900) != 0:
                raise SystemExit(f"arrival: the first bt-get exited {first.returncode}; see {work}/arrival-1.log")
            if site1_idle:
                restart_seed(fed, "site1", info_hash)  # its seed went idle: nothing of site1 in the swarm
            time.sleep(max(0.0, frozen + STUCK_AFTER + 3 - time.monotonic()))
            if detecting:
                stuck_seen = bool(any(s["info_hash"] == info_hash for s in fed.site_status("site2")["stuck"]))
            t0 = time.monotonic()
            second = procs.start(bl.bt_get_cmd(fed, name, second_out, bl.client_ip(k + 1), "--timeout",
                                               f"{ARRIVAL_CAP}s"), work / "arrival-2.log",
                                 stdout=open(work / "arrival-2.json", "wb"))
            try:
                code = second.wait(ARRIVAL_CAP + 30)
            except subprocess.TimeoutExpired:
                code = None
            seconds = time.monotonic() - t0
        finally:
            os.kill(fuse_pid, signal.SIGCONT)
    capped = code != 0
    doc = {} if capped else json.loads((work / "arrival-2.json").read_text() or "{}")
    bad = [] if capped else compare_trees(ds["root"], second_out / name)
    return {"seconds": ARRIVAL_CAP if capped else seconds, "capped": capped, "exit": code,
            "identical": not capped and not bad, "sources": doc.get("sources", {}), "stuck_seen": stuck_seen}


def arrival(fed: bl.Federation, work: Path, ds: dict, runs: int, rate: int, fuse_pid: int, fuse_mount: Path,
            detecting: bool) -> dict:
    rows: dict[str, list[dict]] = {"site1 seeding": [], "site1 idle": []}
    k = 0
    for run_no in range(runs):
        for variant, rs in rows.items():
            r = arrival_run(fed, work, ds, k % (CLIENTS - 1), fuse_pid, fuse_mount, variant == "site1 idle",
                            detecting)
            k += 2
            rs.append(r)
            bl.log(f"arrival run {run_no + 1} {'after' if detecting else 'before'} {variant}: {r['seconds']:6.2f} s"
                   f"{' (capped)' if r['capped'] else ''}, identical {r['identical']}, sources {r['sources']}, "
                   f"stuck seen {r['stuck_seen']}")
            bl.wait_for(lambda: not fed.site_status("site2")["stuck"], 60, "site2 to recover", interval=0.2)
    bound = ds["bytes"] * 8 / rate
    return {"bound_s": bound, "median": {v: {"seconds": bl.median([r["seconds"] for r in rs]),
                                             "fraction": bound / bl.median([r["seconds"] for r in rs]),
                                             "capped": sum(r["capped"] for r in rs),
                                             "identical": all(r["identical"] for r in rs),
                                             "site2_bytes": [r["sources"].get("site2", 0) for r in rs]}
                                         for v, rs in rows.items()},
            "runs_detail": rows}


# --- the whole benchmark ---------------------------------------------------------------------------------
def dataset(data: Path, name: str, files: int, size: int, jitter: float = 0.3) -> dict:
    from torrents import sample

    root = sample.generate(data, name=name, files=files, total_size=size, jitter=jitter)
    lfns = sorted(p.name for p in root.iterdir())
    return {"name": name, "root": root, "lfns": lfns, "sizes": [(root / f).stat().st_size for f in lfns],
            "bytes": bl.dataset_size(root), "files": len(lfns)}


def warm_up(fed: bl.Federation, work: Path, name: str, timeout: float = 900) -> None:
    """A first fetch of `name` from the spare client address: seeds started, page cache warm."""
    bl.timed(bl.bt_get_cmd(fed, name, bl.fresh_dir(work / "warm"), bl.client_ip(CLIENTS - 1)), timeout)
    bl.fresh_dir(work / "warm")


def public(ds: dict) -> dict:
    return {"name": ds["name"], "bytes": ds["bytes"], "files": ds["files"]}


def run(work: Path, args, only: list[str], runs: int) -> dict:
    rate, client_rate = shaping.parse_rate(args.rate), shaping.parse_rate(args.client_rate)
    from torrents.units import parse_size

    size = parse_size(args.size or ("100M" if args.quick else "200M"))
    small_files = args.small_files or (5000 if args.quick else 20000)
    counts = args.clients
    doc: dict = {"rate": rate, "client_rate": client_rate, "rtt": SITE_RTT, "client_rtt": CLIENT_RTT,
                 "link_mtu": LINK_MTU, "runs": runs,
                 "scenarios": only}
    data = work / "data"
    big = dataset(data, "bench.wan.dataset", 29, size)
    small = dataset(data, "bench.wan.smallfiles", small_files, small_files * MEAN_SMALL, 0.96) \
        if "smallfiles" in only else None
    doc["dataset"] = public(big)
    bl.log(f"dataset {big['name']}: {big['bytes'] / 1e6:.0f} MB in {big['files']} files; R {args.rate}, C "
           f"{args.client_rate}")
    if {"single", "swarm", "batch", "smallfiles"} & set(only):
        with bl.federation(work / "fed3", data, sites=3, args=shaped_args(rate, client_rate)) as fed, \
                bl.nginx(work / "fed3", data) as srv:
            warm_up(fed, work, big["name"])
            if "single" in only:
                with noted(doc, "single"):
                    doc["single"] = single(fed, srv, work, big, runs, rate)
            if "swarm" in only:
                with noted(doc, "swarm"):
                    doc["swarm"] = swarm(fed, srv, work, big, runs, counts, rate, client_rate,
                                         -1 if args.no_curl else 4 if args.quick else max(counts),
                                         args.aria2c)
            if "batch" in only:
                with noted(doc, "batch"):
                    doc["batch"] = batch(fed, work, big, runs, rate, args.shards)
            if small is not None:
                with noted(doc, "smallfiles"):
                    warm_up(fed, work, small["name"])
                    r = single_only(fed, srv, work, small, runs, small["bytes"] * 8 / (3 * rate), "smallfiles",
                                    config=work / "curl-small.cfg")
                    r["files_per_s"] = {k: small["files"] / v for k, v in r["median_s"].items()}
                    r["dataset"] = public(small)
                    doc["smallfiles"] = r
    if "swarm" in only and args.slow_clients:
        slow = shaping.parse_rate(args.slow_rate, "--slow-rate")
        with noted(doc, "swarm_slow"), \
                bl.federation(work / "fedslow", data, sites=3, args=shaped_args(slow, slow)) as fed:
            warm_up(fed, work, big["name"], timeout=1800)  # 105 MB at 3 x 10 Mbit/s
            doc["swarm_slow"] = swarm(fed, None, work, big, 1 if args.quick else runs, args.slow_clients, slow, slow,
                                      -1, [], every_site=False)
            doc["swarm_slow"]["rate"] = slow
    if "hetero" in only:
        with noted(doc, "hetero"), \
                bl.federation(work / "fedh", data, sites=3, args=shaped_args(rate, client_rate,
                                                                            {"site3": rate // 10})) as fed, \
                bl.nginx(work / "fedh", data) as srv:
            warm_up(fed, work, big["name"])
            r = single_only(fed, srv, work, big, runs, big["bytes"] * 8 / (2 * rate), "hetero")
            r["strict_bound_s"] = big["bytes"] * 8 / (2.1 * rate)
            doc["hetero"] = r
            # A busy swarm with the slow site: its slice must not hold the T3s back (btget/siteshare.py).
            doc["hetero_swarm"] = swarm(fed, srv, work, big, runs, [8], rate, client_rate, -1, [],
                                        site_rates=[rate, rate, rate // 10])
    if "hung" in only:
        with noted(doc, "hung"):
            # Two replicas (hard links: no copy of the bytes); site2 reads its own through bindfs.
            one, two, mount = work / "replica1", work / "replica2", work / "replica2-fuse"
            for d in (one, two):
                d.mkdir()
                subprocess.run(["cp", "-al", str(big["root"]), str(d / big["name"])], check=True)
            with frozenfs.bindfs(two, mount, work / "bindfs.log") as fuse, \
                    bl.federation(work / "fed2", [one, mount], sites=2,
                                  args=shaped_args(rate, client_rate)) as fed:
                doc["hung"] = hung(fed, work, big, runs, rate, fuse.pid, mount)
    if "arrival" in only:
        with noted(doc, "arrival"):
            doc["arrival"] = {}
            for mode, after in (("before", "0"), ("after", f"{STUCK_AFTER:g}s")):
                one, two = work / f"arr-{mode}-1", work / f"arr-{mode}-2"
                mount = work / f"arr-{mode}-2-fuse"
                for d in (one, two):
                    d.mkdir()
                    subprocess.run(["cp", "-al", str(big["root"]), str(d / big["name"])], check=True)
                with frozenfs.bindfs(two, mount, work / "bindfs.log") as fuse, \
                        bl.federation(work / f"fed-arrival-{mode}", [one, mount], sites=2,
                                      args=shaped_args(rate, client_rate),
                                      env={"BTSWARM_SERVER_STUCK_AFTER": after}) as fed:
                    doc["arrival"][mode] = arrival(fed, work, big, runs, rate, fuse.pid, mount, mode == "after")
    return doc


def report(doc: dict) -> None:
    def line(what: str, value: float, bound: str, target: str) -> str:
        return f"  {what:58s} {value:7.2f}   {bound:28s} {target}"

    print(f"wan: R {shaping.format_rate(doc['rate'])} per site, C {shaping.format_rate(doc['client_rate'])} per "
          f"client, site RTT {shaping.format_delay(doc.get('rtt', 0.0))}, "
          + (f"client RTT {shaping.format_delay(doc['client_rtt'])}, " if doc.get("client_rtt") else "")
          + (f"MTU {doc['link_mtu']}, " if doc.get("link_mtu", shaping.LO_MTU) != shaping.LO_MTU else "")
          + f"S {doc['dataset']['bytes'] / 1e6:.0f} MB in {doc['dataset']['files']} files, median of "
          f"{doc['runs']}")
    if "single" in doc:
        s = doc["single"]
        print("single: one T3 <- 3 sites")
        print(bl.table(["contender", "s", "x bound S/3R"],
                       [[k, v, s["bound_s"] / v] for k, v in s["median_s"].items()]))
        print(line("bt-get: fraction of S/(3R)", s["fraction"], f"bound {s['bound_s']:.2f} s", ">= 0.92"))
        print(line("bt-get vs curl<-nginx behind R", s["vs_curl"], "", ">= 2.7"))
        print(line("bt-get vs aria2c", s["vs_aria2c"], "", ">= 1.5"))
    if "swarm" in doc:
        print("swarm: N T3s at once")
        swarm_report(doc["swarm"]["median"], line)
    if "swarm_slow" in doc:
        print(f"swarm: N T3s at once, every site and T3 at {shaping.format_rate(doc['swarm_slow']['rate'])} "
              "(at the full rates this host's cores would be the limit)")
        swarm_report(doc["swarm_slow"]["median"], line)
    if "batch" in doc:
        b = doc["batch"]
        for n, r in b["by_shards"].items():
            print(line(f"batch: {n} shards at once, last done / S/(3R)", r["x_bound"],
                       f"{r['shards_s']:.2f} s vs {b['bound_s']:.2f} s",
                       f"<= 1.15 (one client: {b['whole_s']:.2f} s = {b['whole_s'] / b['bound_s']:.2f})"))
    if "hetero" in doc:
        h = doc["hetero"]
        print(line("hetero: site3 at R/10: fraction of S/(2R)", h["fraction"], f"bound {h['bound_s']:.2f} s",
                   f">= 0.85 (x curl {h['vs_curl']:.2f})"))
    if "hetero_swarm" in doc:
        r = doc["hetero_swarm"]["median"]["8"]
        print(line("hetero: 8 T3s, site3 at R/10: fraction of the Kumar-Ross bound", r["fraction"],
                   f"{r['seconds']:.2f} s, egress {r['egress_x']:.2f}x",
                   f"every site {r['every_site_s']:.2f} s, {r['every_site_egress_x']:.2f}x"))
    if "smallfiles" in doc:
        s = doc["smallfiles"]
        f = s["files_per_s"]
        print(line(f"smallfiles ({s['dataset']['files']} files): bt-get files/s", f["bt-get"],
                   f"curl {f['curl<-nginx']:.0f} files/s", f"x curl {s['vs_curl']:.2f}, "
                                                             f"fraction of S/3R {s['fraction']:.2f}"))
    if "hung" in doc:
        h = doc["hung"]
        for fault, r in h["median"].items():
            print(line(f"hung site ({fault}): fraction of S/R (site1 alone)", r["fraction"],
                       f"{r['seconds']:.2f} s vs {h['bound_s']:.2f} s",
                       f">= 0.7, bytes identical: {r['identical']}" if fault != "none" else "(no fault)"))
    if "arrival" in doc:
        for mode, a in doc["arrival"].items():
            for variant, r in a["median"].items():
                print(line(f"second T3, site2 frozen, {variant}, stuck detection {mode}: x S/R", r["fraction"],
                           f"{r['seconds']:.2f} s vs {a['bound_s']:.2f} s",
                           f"capped {r['capped']}, site2 bytes {r['site2_bytes']}, identical {r['identical']}"))
    for key, why in doc.get("failed", {}).items():
        print(f"FAILED {key}: {why}")


def swarm_report(m: dict, line) -> None:
    """The table of N T3s at once, how busy the host was, and the issue's targets for N = 8, 16 and 32."""
    print(bl.table(["N", "bt-get s", "KR bound s", "fraction", "egress x", "wire x", "1st byte s", "every site s",
                    "egress x", "wire x", "curl s", "x curl", "aria2c s", "egress x", "wire x", "x aria2c"],
                   [[n, r["seconds"], r["bound_s"], r["fraction"], r["egress_x"], r.get("wire_egress_x", "-"),
                     r.get("first_byte_s", "-"), r.get("every_site_s", "-"), r.get("every_site_egress_x", "-"),
                     r.get("every_site_wire_egress_x", "-"),
                     f"{r['curl_s']:.1f}{'' if r['curl_measured'] else '*'}", r["vs_curl"],
                     r.get("aria2c_s", "-"), r.get("aria2c_egress_x", "-"), r.get("aria2c_wire_egress_x", "-"),
                     r.get("vs_aria2c", "-")]
                    for n, r in m.items()]))
    print("  (every site: the T3s keep every site that unchokes them, as before btget/siteshare.py; "
          "aria2c: the same .torrent without web seeds, from the same seeds; egress: what the sites' libtorrent "
          "wrote to its sockets, wire: what their uplinks carried)")
    for n, r in m.items():
        if "cpu" in r:
            c = r["cpu"]
            print(f"  {n} T3s: the host's cores {c['host_busy']:.0%} busy over the run ("
                  f"{c['host_busy_to_first_byte']:.0%} to the median first byte, {c['host_busy_after_first_byte']:.0%} "
                  f"after); a bt-get (parent and worker) {c['client_core_share']:.0%} of a core, the busiest "
                  f"site {c['site_core_share']:.0%}")
    for n, r in m.items():
        print(line(f"{n} T3s: from the median first byte to the last done: fraction of the bound",
                   r["bound_s"] / r["after_first_byte_s"], f"{r['after_first_byte_s']:.2f} s", "(start left out)"))
    if "8" in m:
        print(line("8 T3s: fraction of the Kumar-Ross bound", m["8"]["fraction"], "", ">= 0.85"))
        print(line("8 T3s: T2 egress (x dataset)", m["8"]["egress_x"], "", "<= 1.2"))
        if "wire_egress_x" in m["8"]:
            print(line("8 T3s: T2 egress on the wire (x dataset)", m["8"]["wire_egress_x"], "", "<= 1.2"))
        if "vs_aria2c" in m["8"]:
            print(line("8 T3s: 8 aria2c last done / 8 bt-get last done", m["8"]["vs_aria2c"],
                       f"aria2c {m['8']['aria2c_s']:.2f} s", ">= 1.5"))
    for n in ("16", "32"):
        if n in m:
            print(line(f"{n} T3s: fraction of the Kumar-Ross bound", m[n]["fraction"], "", ">= 0.8"))
            print(line(f"{n} T3s: T2 egress on the wire (x dataset)", m[n]["wire_egress_x"],
                       f"counted {m[n]['egress_x']:.2f}x", "<= 1.3"))


def main() -> int:
    ap = bl.parser(__doc__)
    ap.add_argument("--rate", default="100mbit", help="each site's uplink R (and the nginx baseline's)")
    ap.add_argument("--client-rate", default="100mbit", help="each client's uplink C")
    ap.add_argument("--rtt", nargs="+", default=["0ms", "40ms", "100ms"],
                    help="the round trips each site's link adds, each a run of the scenarios (0ms 40ms 100ms)")
    ap.add_argument("--client-rtt", default="0ms",
                    help="the round trip each client's link adds: T3s are twice that apart, a T3 and a site "
                         "that plus the site's (default 0ms: T3s side by side)")
    ap.add_argument("--size", default=None, help="dataset size (default 200M, --quick 100M)")
    ap.add_argument("--small-files", type=int, default=None, help="files in the small-file dataset (20000; --quick 5000)")
    ap.add_argument("--link-mtu", type=int, default=shaping.LO_MTU,
                    help=f"the shaped loopback's MTU (btswarm up --link-mtu; {shaping.JUMBO_MTU}: jumbo frames)")
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--slow-clients", type=int, nargs="*", default=[16, 32],
                    help="swarm: these N on links of --slow-rate, in a federation of their own (none: skip)")
    ap.add_argument("--slow-rate", default="10mbit", help="R = C of the --slow-clients swarm")
    ap.add_argument("--shards", type=int, nargs="+", default=[4, 8], help="batch: arrays of this many shards")
    ap.add_argument("--aria2c", type=int, nargs="*", default=[8], help="N of the swarm also run with N aria2c")
    ap.add_argument("--no-curl", action="store_true", help="swarm: no curl baseline (diagnosis runs)")
    ap.add_argument("--only", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    args = ap.parse_args()
    global SITE_RTT, CLIENT_RTT, LINK_MTU
    rtts = [shaping.parse_delay(r, "--rtt") for r in args.rtt]
    LINK_MTU = args.link_mtu
    CLIENT_RTT = shaping.parse_delay(args.client_rtt, "--client-rtt")
    bl.require_shaping("bench_wan")
    docs = []
    for rtt in rtts:
        SITE_RTT = rtt
        with bl.workdir("wan", args.keep) as work:
            docs.append(run(work, args, args.only, args.runs or 3))
        docs[-1]["targets"] = TARGETS
    # The first RTT's document stays at the top level (as with one --rtt); every one is under by_rtt.
    doc = {**docs[0], "by_rtt": {shaping.format_delay(d["rtt"]): d for d in docs}} if len(docs) > 1 else docs[0]
    bl.write_json(args.out, "wan", doc)
    for d in docs:
        report(d)
    if len(docs) > 1:
        report_rtts(docs)
    return 1 if any(d.get("failed") for d in docs) else 0


def rtt_figures(doc: dict) -> dict[str, float]:
    """The seconds of each scenario of one RTT's run that the latency target compares."""
    out = {}
    if "single" in doc:
        out["1 T3 <- 3 sites, bt-get"] = doc["single"]["median_s"]["bt-get"]
    for n, r in doc.get("swarm", {}).get("median", {}).items():
        out[f"{n} T3s at once, last done"] = r["seconds"]
    if "swarm_slow" in doc:
        slow = shaping.format_rate(doc["swarm_slow"]["rate"])
        for n, r in doc["swarm_slow"]["median"].items():
            out[f"{n} T3s at once at {slow}, last done"] = r["seconds"]
    for n, r in doc.get("batch", {}).get("by_shards", {}).items():
        out[f"{n} shards at once, last done"] = r["shards_s"]
    if "hetero_swarm" in doc:
        out["8 T3s, site3 at R/10, last done"] = doc["hetero_swarm"]["median"]["8"]["seconds"]
    return out


def report_rtts(docs: list[dict]) -> None:
    """Each figure at every RTT and its ratio to RTT 0 (or the smallest RTT run): target within 15%."""
    base = min(docs, key=lambda d: d["rtt"])
    ref = rtt_figures(base)
    rows = []
    for what, t0 in ref.items():
        row = [what, t0]
        for d in docs:
            if d is not base:
                t = rtt_figures(d).get(what)
                row += [t, t / t0] if t else ["-", "-"]
        rows.append(row)
    head = ["figure", f"{shaping.format_delay(base['rtt'])} s"]
    for d in docs:
        if d is not base:
            head += [f"{shaping.format_delay(d['rtt'])} s", f"/ {shaping.format_delay(base['rtt'])}"]
    print(f"latency: each figure against its {shaping.format_delay(base['rtt'])} value (target: within 1.15 at 100 ms)")
    print(bl.table(head, rows))


if __name__ == "__main__":
    sys.exit(main())
