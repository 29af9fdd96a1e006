"""Fault injection helpers: federations through `btswarm up`, PIDs of its children, metrics, RSS and fds.

Every process is found by PID (the children of the `btswarm up` process,
matched by their own config file) and every fault is a real one: SIGKILL,
SIGSTOP, corrupted bytes, a full file system.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.e2e.conftest import Federation, get_json, start_federation  # noqa: F401  (re-exported)
from tests.support import command, verified_bytes, wait_for  # noqa: F401  (verified_bytes re-exported)
from torrents import procs, sample
from torrents.procs import children, fd_count  # noqa: F401  (re-exported)


def service_pid(fed: Federation, label: str) -> int | None:
    """PID of the federation's `label` process (tracker, repo, site1, ...): a child of `btswarm up`."""
    pid = fed.pids().get(label)
    return pid if pid is not None and procs.running(pid) else None


def rss_kib(pid: int) -> int:
    rss = procs.status_kib(pid).get("VmRSS")
    assert rss is not None, f"pid {pid}: no VmRSS"
    return rss


def metric(url: str, name: str, labels: dict[str, str] | None = None) -> float:
    """Sum of the samples of `name` (with these labels) in a Prometheus text page; 0 when absent."""
    with urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=5) as resp:
        text = resp.read().decode()
    total = 0.0
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)$", line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if labels and any(have.get(k) != v for k, v in labels.items()):
            continue
        total += float(m.group(3))
    return total


def make_data(base: Path, copies: int = 1, files: int = 8, size: int = 16 * 2**20) -> list[Path]:
    """A sample dataset in `base/data1`, and byte-identical copies in data2... (separate replicas)."""
    first = base / "data1"
    sample.generate(first, files=files, total_size=size)
    dirs = [first]
    for i in range(2, copies + 1):
        d = base / f"data{i}"
        shutil.copytree(first, d, copy_function=shutil.copy2)
        dirs.append(d)
    return dirs


def rate_env(bytes_per_s: int) -> dict[str, str]:
    """Environment for `btswarm up` that throttles every site's uploads (config key server.upload_rate_limit)."""
    return {"BTSWARM_SERVER_UPLOAD_RATE_LIMIT": str(bytes_per_s)}


def start_throttled(tmp: Path, rate: int, *args: str, env: dict | None = None) -> Federation:
    """start_federation with sites throttled to `rate` bytes/s (the environment reaches every child)."""
    return start_federation(tmp, *args, env={**(rate_env(rate) if rate else {}), **(env or {})})


def bt_get_popen(fed: Federation, out: Path, *args: str, stderr: Any = subprocess.PIPE) -> subprocess.Popen:
    """bt-get in a process group of its own (it has worker processes): killed as a group by its PID."""
    return subprocess.Popen([command("bt-get"), fed.dataset, "--repo", fed.repo, "-o", str(out), *args],
                            stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True)


def bytes_on_disk(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file() and ".bt-get" not in p.parts)


def wait_restarted(fed: Federation, label: str, old_pid: int, health: str, timeout: float = 30) -> int:
    """Until the supervisor has started a new `label` process that answers `health`; its PID."""
    def check() -> int | None:
        pid = service_pid(fed, label)
        if pid is None or pid == old_pid:
            return None
        try:
            with urllib.request.urlopen(health, timeout=2) as resp:
                return pid if resp.status == 200 else None
        except OSError:
            return None
    return wait_for(check, timeout=timeout, interval=0.1, what=f"{label} to be restarted")


def read_json(text: str) -> dict:
    try:
        return json.loads(text)
    except ValueError:
        raise AssertionError(f"no JSON document: {text[-2000:]!r}")


def elapsed(since: float) -> float:
    return time.monotonic() - since
