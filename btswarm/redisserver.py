"""A redis-server of our own for the tracker's shared store: Debian's binary, loopback, a private directory.

`btswarm up --redis` runs it as one more supervised process; tests and
benchmarks start one with `RedisServer`. Nothing is persisted (no RDB
snapshots, no AOF): the tracker's state is soft, rebuilt by the next
announces and heartbeats, so a restarted Redis is an empty one.

`btswarm up --redis --redis-replicas N` adds N replicas and three sentinels
(the same binary, `--sentinel`: Debian's redis-sentinel package is that
binary plus a system service we do not want), which fail over to a replica
when the master stops answering (docs/reliability.md).
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


MASTER = "btswarm"  # the name the sentinels monitor
SENTINELS = 3  # a quorum of 2 survives the loss of any one host
DOWN_AFTER_MS = 1500  # the master is down after this long without an answer (then 2 sentinels agree: failover)
FAILOVER_TIMEOUT_MS = 5000


def argv(directory: Path, host: str, port: int, program: str = BINARY, *,
         replica_of: tuple[str, int] | None = None, min_replicas: int = 0) -> list[str]:
    """The command line: TCP on `host:port` only, no persistence, its files in `directory` (which must exist);
    a replica of `replica_of`; a master that refuses writes with fewer than `min_replicas` replicas in sync."""
    out = [program, "--bind", host, "--port", str(port), "--dir", str(directory), "--save", "",
           "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no", "--logfile", "",
           "--databases", "16", "--loglevel", "warning"]
    if replica_of is not None:
        out += ["--replicaof", replica_of[0], str(replica_of[1])]
    if min_replicas:
        out += ["--min-replicas-to-write", str(min_replicas), "--min-replicas-max-lag", "2"]
    return out


def sentinel_config(host: str, port: int, master: tuple[str, int], *, name: str = MASTER,
                    down_after_ms: int = DOWN_AFTER_MS, failover_timeout_ms: int = FAILOVER_TIMEOUT_MS) -> str:
    """A sentinel's config file (it rewrites the file as it learns: one file per sentinel, writable)."""
    return "\n".join([
        f"bind {host}", f"port {port}", "protected-mode no", "daemonize no", 'logfile ""', "loglevel warning",
        f"sentinel monitor {name} {master[0]} {master[1]} {SENTINELS // 2 + 1}",
        f"sentinel down-after-milliseconds {name} {down_after_ms}",
        f"sentinel failover-timeout {name} {failover_timeout_ms}",
        f"sentinel parallel-syncs {name} 1", ""])


def sentinel_argv(config: Path, program: str = BINARY) -> list[str]:
    return [program, str(config), "--sentinel"]


def ping(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether a Redis answers PING on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(16).startswith((b"+PONG", b"-NOAUTH"))  # up, if it wants a password first
    except OSError:
        return False


class RedisServer:
    """A redis-server child process, stopped by its PID (tests and benchmarks); `extra` arguments after ours."""

    def __init__(self, directory: Path, host: str = "127.0.0.1", port: int = 0, *,
                 extra: tuple[str, ...] = ()) -> None:
        self.directory = directory
        self.host = host
        self.port = port or procs.free_port(host)
        self.extra = extra
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def command(self) -> list[str]:
        return [*argv(self.directory, self.host, self.port, binary()), *self.extra]

    def start(self, timeout: float = 10.0) -> "RedisServer":
        self.directory.mkdir(parents=True, exist_ok=True)
        log = open(self.directory / "redis.log", "ab")
        try:
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
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


class Sentinel(RedisServer):
    """A sentinel child process watching `master` (tests); its config file written once, then its own."""

    def __init__(self, directory: Path, master: tuple[str, int], host: str = "127.0.0.1", port: int = 0,
                 **config: int) -> None:
        super().__init__(directory, host, port)
        self.master = master
        self.config = config

    def command(self) -> list[str]:
        path = self.directory / "sentinel.conf"
        if not path.exists():
            path.write_text(sentinel_config(self.host, self.port, self.master, **self.config))
        return sentinel_argv(path, binary())
