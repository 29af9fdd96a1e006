"""A real federation (`btswarm up`) for end-to-end tests: real processes on 127.0.0.x, or on hosts of their own
(`--hosts`).

Started and read through btswarm.federation, the machinery the benchmarks use too.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

import pytest

from btswarm import federation as fedlib
from btswarm import netns, run
from btswarm.federation import get_json  # noqa: F401  (re-exported for the tests)
from btswarm.trees import compare_trees
from tests.support import command


class Federation(fedlib.Federation):
    """The shared handle plus what tests need: the `btswarm up` process, its log, the first dataset."""

    def __init__(self, proc: subprocess.Popen, fed: fedlib.Federation, log_path: Path):
        super().__init__(fed.ready, proc.pid)
        self.proc = proc
        self.log_path = log_path

    @property
    def dataset(self) -> str:
        return self.datasets[0]

    @property
    def source(self) -> Path:
        return self.data / self.dataset

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 30.0) -> int | None:
        return fedlib.stop(self.proc, timeout)

    def bt_get(self, out: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([command("bt-get"), self.dataset, "--repo", self.repo, "-o", str(out), *args],
                              capture_output=True, text=True, timeout=timeout)


def start_federation(tmp: Path, *args: str, log_name: str = "up", env: Mapping[str, str] | None = None
                     ) -> Federation:
    command("btswarm")  # a clear failure when the console script is missing
    log_path = tmp / f"{log_name}.log"
    proc, fed = fedlib.launch(tmp / "state", list(args), ready_file=tmp / "ready.json", log_path=log_path,
                                  timeout=120, env=env)
    return Federation(proc, fed, log_path)


def running_federation(tmp_path_factory, name: str, *args: str, env: Mapping[str, str] | None = None):
    """A module fixture's body: `btswarm up ARGS` for the module's tests, stopped cleanly after them."""
    fed = start_federation(tmp_path_factory.mktemp(name), *args, env=env)
    yield fed
    assert fed.stop(timeout=30) == 0, fed.log()[-3000:]


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    # Each site sends at most 4 MB/s, so that a fetch lasts long enough for every site asked to join
    # it: unshaped, the first site's seed can send all 24 MB before the second one has started.
    yield from running_federation(tmp_path_factory, "federation", "--sites", "2", "--sample-files", "12",
                                  "--sample-size", "24M", "--idle-ttl", "6s", "--heartbeat", "1s",
                                  env={"BTSWARM_SERVER_UPLOAD_RATE_LIMIT": "4MB/s"})


# --- a federation of hosts (btswarm up --hosts) ---------------------------------------------------------
def bt_get_on(fed, host: str, out, *args: str, env: dict[str, str] | None = None,
              stderr: int | IO = subprocess.PIPE) -> subprocess.Popen:
    """`bt-get NAME -o OUT --json` on `host`, as `btswarm run --host` starts it: the repository in the
    environment (and `env`), no listen address. Its log goes to `stderr` (a file for a long `-v` one)."""
    argv = ["bt-get", fed.dataset, "-o", str(out), "--json", "--timeout", "180", *args]
    h = fed.host(host)
    return subprocess.Popen(argv, env=run.host_env(fed.ready, h, {**os.environ, **(env or {})}),
                            preexec_fn=netns.preexec(h.netns), stdout=subprocess.PIPE, stderr=stderr, text=True)


def result(proc: subprocess.Popen) -> tuple[int, dict, str]:
    """A bt_get_on's exit code, its --json document ({} without one) and its log (what went to a pipe)."""
    out, err = proc.communicate(timeout=240)
    return proc.returncode, json.loads(out) if out.strip() else {}, err or ""


def same_as_source(fed, copy) -> bool:
    """`copy` holds the dataset's files byte for byte (compare_trees) and no others."""
    others = {p.name for p in copy.iterdir() if not p.name.startswith(".")} - {p.name for p in fed.source.iterdir()}
    return not compare_trees(fed.source, copy) and not others


def on_disk(directory) -> int:
    """Bytes the files under `directory` hold on disk (allocated blocks: what has been written)."""
    return sum(p.stat().st_blocks * 512 for p in directory.rglob("*") if p.is_file() and ".bt-get" not in p.parts)


def sink(fed, received: dict, host: str = "services") -> tuple[socket.socket, threading.Thread]:
    """A TCP sink on `host`: first and last byte's times, the byte count, and (time, bytes) at each read
    in received["marks"]."""
    with fed.on_host(host):  # the socket stays in the namespace it was made in
        server = socket.create_server((fed.host(host).address, 0))

    def drain() -> None:
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(1 << 16):
                now = time.monotonic()
                received.setdefault("first", now)
                received["last"], received["bytes"] = now, received.get("bytes", 0) + len(data)
                received.setdefault("marks", []).append((now, received["bytes"]))
    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    return server, thread


def connect_ms(fed, src: str, dst: str, connects: int = 10) -> float:
    """The least of `connects` TCP connects from host `src` to a listening socket on host `dst`, in ms: the
    round trip between them (the others may have waited for a loaded core)."""
    with fed.on_host(dst):  # a listening socket: the kernel completes the handshakes, no accept needed
        server = socket.create_server((fed.host(dst).address, 0), backlog=connects)
    best = float("inf")
    with server, fed.on_host(src):
        for _ in range(connects):
            t = time.monotonic()
            socket.create_connection(server.getsockname(), timeout=10).close()
            best = min(best, (time.monotonic() - t) * 1e3)
    return best
