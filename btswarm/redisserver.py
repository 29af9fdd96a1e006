"""A redis-server of our own for the tracker's shared store: Debian's binary, loopback, a private directory.

`btswarm up --redis` runs it as one more supervised process; tests and
benchmarks start one with `RedisServer`. Nothing is persisted (no RDB
snapshots, no AOF): the tracker's state is soft, rebuilt by the next
announces and heartbeats, so a restarted Redis is an empty one.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from torrents import procs
from torrents.errors import BtswarmError

BINARY = "redis-server"


def binary() -> str:
    path = shutil.which(BINARY) or (f"/usr/bin/{BINARY}" if Path(f"/usr/bin/{BINARY}").exists() else None)
    if path is None:
        raise BtswarmError(BINARY, "not installed (apt-get install redis-server, or scripts/install-system-deps.sh)")
    return path


def argv(directory: Path, host: str, port: int, program: str = BINARY) -> list[str]:
    """The command line: TCP on `host:port` only, no persistence, its files in `directory` (which must exist)."""
    return [program, "--bind", host, "--port", str(port), "--dir", str(directory), "--save", "",
            "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no", "--logfile", "",
            "--databases", "16", "--loglevel", "warning"]


def ping(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether a Redis answers PING on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """A redis-server child process, stopped by its PID (tests and benchmarks)."""

    def __init__(self, directory: Path, host: str = "127.0.0.1", port: int = 0) -> None:
        self.directory = directory
        self.host = host
        self.port = port or procs.free_port(host)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def start(self, timeout: float = 10.0) -> "RedisServer":
        self.directory.mkdir(parents=True, exist_ok=True)
        log = open(self.directory / "redis.log", "ab")
        try:
            self.proc = subprocess.Popen(argv(self.directory, self.host, self.port, binary()), stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while not ping(self.host, self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = (self.directory / "redis.log").read_text(errors="replace")[-1000:]
                raise BtswarmError(BINARY, f"did not answer on {self.host}:{self.port}: {tail}")
            time.sleep(0.02)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            procs.stop(proc, timeout)

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> "RedisServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
