"""Processes by PID: a free loopback port, what /proc says of a process, and stopping one we started.

The umbrella, the tests and the benchmarks all find processes by PID
and stop them by PID; this is the one place that reads /proc and the
one SIGTERM-wait-SIGKILL. Linux only (procfs).
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing is bound to at `host` now, free until someone binds it.

    Picked at random outside the kernel's ephemeral range: a port the kernel hands out itself (to an
    outgoing connection, or a bind to port 0) between our pick and our service's bind would take it, and
    on a busy host it did (a site of `btswarm up` then could not listen). Ports are asked of the kernel
    only when that range leaves none outside it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    candidates = _outside_ephemeral()
    for port in random.sample(candidates, min(len(candidates), 64)):
        with socket.socket(family) as s:
            try:
                s.bind((host, port))
            except OSError as e:
                if e.errno in (errno.EADDRINUSE, errno.EACCES):
                    continue
                raise
            return port
    with socket.socket(family) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _outside_ephemeral(low_bound: int = 10000) -> list[int]:
    """Unprivileged ports above `low_bound` that the kernel never picks by itself (ip_local_port_range)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return []
    return [*range(low_bound, low), *range(high + 1, 65536)]


class PortPicker:
    """Free ports for listeners started together, none handed out twice. Nothing listens on a port between
    two picks, so the kernel may pick it again: the tracker and the repository of one `btswarm up` were
    once given the same port, and the second to bind it failed."""

    def __init__(self) -> None:
        self.given: set[int] = set()

    def __call__(self, host: str = "127.0.0.1") -> int:
        for _ in range(64):
            port = free_port(host)
            if port not in self.given:
                self.given.add(port)
                return port
        raise OSError(errno.EADDRINUSE, f"no free port at {host} that was not handed out already")


# --- /proc ----------------------------------------------------------------------------------------
def pids() -> Iterator[int]:
    """Every process on the machine (others' too: match them by what they run before touching any)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            yield int(entry)


def stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name, or None when it is gone.

    [0] state ('Z': zombie), [1] parent PID, [2] process group, [11] utime, [12] stime (clock ticks);
    the name before them may hold spaces and ')', so the line is split at its last ')'.
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def running(pid: int) -> bool:
    """The process exists and is not a zombie (one left for its parent to reap counts as gone)."""
    fields = stat(pid)
    return fields is not None and fields[0] != "Z"


def children(pid: int) -> list[int]:
    """Direct children of `pid`, by the parent PID in /proc/*/stat (needs no CONFIG_PROC_CHILDREN)."""
    return [p for p in pids() if (fields := stat(p)) is not None and int(fields[1]) == pid]


def group(pgid: int) -> list[int]:
    """The running (not zombie) members of process group `pgid`."""
    return [p for p in pids() if (fields := stat(p)) is not None and int(fields[2]) == pgid and fields[0] != "Z"]


def cmdline(pid: int) -> list[str]:
    """argv of a process; empty when it is gone (or a zombie)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def status_kib(pid: int) -> dict[str, int]:
    """The kB figures of /proc/PID/status (VmRSS, VmHWM, RssAnon, RssFile, ...); empty when it is gone."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                value = rest.split()
                if len(value) == 2 and value[1] == "kB":
                    out[key] = int(value[0])
    except OSError:
        pass
    return out


def fd_count(pid: int) -> int:
    """Open file descriptors of a process (OSError when it is gone)."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a running process (its own threads); zeros if gone."""
    fields = stat(pid)
    if fields is None:
        return 0.0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick  # utime, stime: fields 14, 15 of the full line


# --- stopping ---------------------------------------------------------------------------------------
def stop(proc: subprocess.Popen, timeout: float = 30.0, *, whole_group: bool = False) -> int | None:
    """SIGTERM by PID, SIGKILL if it outlives `timeout`; its exit code.

    `whole_group`: signal its process group instead (a process started in a
    session of its own, with workers it forked: bt-get), as a terminal would.
    """
    if proc.poll() is None:
        send = os.killpg if whole_group else os.kill
        with contextlib.suppress(ProcessLookupError):
            send(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                send(proc.pid, signal.SIGKILL)
            proc.wait(10)
    return proc.returncode
