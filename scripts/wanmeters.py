"""What the shaped-links benchmarks measure beside the clocks: who waited on whom, the wire, the cores.

- `Timeline`: every 0.25 s, each site's and client's uplink bytes (the htb
  class counters) and each client's bytes on disk, in a thread.
- `sites_wire_bytes`: what the sites' uplinks carried, headers and all.
- `CpuMeter`, `cpu_summary`: whether this host's cores were the limit of a
  run (/proc/stat) and what each part of the federation spent.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

import benchlib as bl


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
