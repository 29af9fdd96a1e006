"""Test support: free ports, deadlines, real processes stopped by PID.

Import it as `from tests.support import ...` (pytest runs with pythonpath = .).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from btswarm.federation import wait_for  # noqa: F401  (shared with the benchmarks)
from torrents.metainfo import Metainfo
from torrents.procs import free_port, stop  # noqa: F401  (shared with the benchmarks)

BIN = Path(sys.executable).parent


def command(name: str) -> str:
    """Path of one of our console scripts in the running venv."""
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{name}: console script not installed in {BIN} (pip install -e .)")
    return str(path)


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


class Proc:
    """A real process of ours; logs to a file; stopped by PID (SIGTERM, then SIGKILL)."""

    def __init__(self, args: list[str], log_path: Path, env: dict | None = None, cwd: str | None = None):
        self.args = args
        self.log_path = log_path
        self._log = open(log_path, "wb")
        # No stdin: a client with keyboard commands (ctorrent) must not read the test runner's terminal.
        self.popen = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                      cwd=cwd,
                                      env={**os.environ, **(env or {})}, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 10.0) -> int | None:
        code = stop(self.popen, timeout)
        self._log.close()
        return code

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(5)


def alive(pid: int) -> bool:
    """Whether a process exists (signal 0 checks without signalling)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


HOSTS_NEED = "network namespaces, a bridge, veths and tc shaping"  # what the hosts test bed needs root for


def need_root(what: str = HOSTS_NEED) -> None:
    """Skip the calling test (or fixture) unless root, saying what for."""
    if os.geteuid() != 0:
        pytest.skip(f"needs root: {what}")


def namespaces() -> set[str]:
    """The named network namespaces (`ip netns`)."""
    return set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()


def stopped_cleanly(fed, stop=None) -> None:
    """`stop()` ends a federation of hosts' `btswarm up` (by default its own stop, which must exit 0); then
    every part's process and every namespace (veths and the bridge in them) is gone."""
    names = {h.netns for h in fed.hosts} | {fed.netns}
    pids = fed.pids()
    assert set(pids) >= {"tracker", "repo", *(s.name for s in fed.sites)}
    if stop is None:
        assert fed.stop(timeout=30) == 0, fed.log()[-3000:]
    else:
        stop()
    assert not any(alive(pid) for pid in pids.values()), pids
    assert not names & namespaces(), "namespaces outlived btswarm up"


async def until(predicate, timeout: float = 10.0, what: str = "condition", interval: float = 0.05):
    """wait_for inside an event loop: `predicate()` (a value or a coroutine) until truthy, returned;
    AssertionError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(interval)


def verified_bytes(meta: Metainfo, directory: Path) -> int:
    """Bytes of the pieces whose data in `directory` (DIR/NAME) matches the torrent's SHA1: what a rerun need not fetch."""
    spans = []  # (start offset, length, path or None for a pad file)
    pos = 0
    for f in meta.files:
        spans.append((pos, f.length, None if f.pad else directory / f.lfn))
        pos += f.length
    total, plen, good = pos, meta.piece_length, 0
    for index in range(meta.num_pieces):
        lo, hi = index * plen, min(total, (index + 1) * plen)
        data = bytearray()
        for start, length, path in spans:
            a, b = max(lo, start), min(hi, start + length)
            if a >= b:
                continue
            chunk = b""
            if path is not None:
                try:
                    with open(path, "rb") as fh:
                        fh.seek(a - start)
                        chunk = fh.read(b - a)
                except OSError:
                    pass
            else:
                chunk = bytes(b - a)
            data += chunk.ljust(b - a, b"\0")
        if hashlib.sha1(data).digest() == meta.pieces[index * 20:(index + 1) * 20]:
            good += sum(max(0, min(hi, s + n) - max(lo, s)) for s, n, p in spans if p is not None)
    return good
