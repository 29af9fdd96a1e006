"""Run a set of processes as one: start in order, wait for health, restart the dead, stop all."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable

import aiohttp

from btswarm import netns, statelock
from btswarm.topology import Service
from torrents.errors import BtswarmError
from torrents.servicekit.httpclient import client_session

log = logging.getLogger("btswarm.supervisor")

MAX_RESTARTS = 5
RESTART_WINDOW = 120.0


class StartError(BtswarmError):
    """A process of the federation did not come up."""


@dataclass
class Child:
    service: Service
    proc: asyncio.subprocess.Process | None = None
    restarts: list[float] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.service.label


async def _redis_ping(url: str) -> bool:
    """Whether the Redis at redis://HOST:PORT answers PING (bounded: 2 s)."""
    host, _, port = url.removeprefix("redis://").split("/", 1)[0].rpartition(":")
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 2)
        try:
            writer.write(b"*1\r\n$4\r\nPING\r\n")
            return (await asyncio.wait_for(reader.readline(), 2)).startswith(b"+PONG")
        finally:
            writer.close()
    except (OSError, asyncio.TimeoutError, ValueError):
        return False


def _child_setup(namespace: str | None) -> Callable[[], None]:
    """Between fork and exec: die with the supervisor, and start on the service's host (--hosts); the
    supervisor's own thread never leaves its namespace, so its health checks are not moved with it."""
    enter = netns.preexec(namespace)

    def setup() -> None:
        statelock.die_with_parent()
        enter()
    return setup


class Supervisor:
    def __init__(self, log_dir: Path, *, report: Callable[[str], None] = print, state: Path | None = None,
                 ca_file: str = "") -> None:
        self.log_dir = log_dir
        self.ca_file = ca_file  # trusted for https health URLs, besides the system's CAs
        self.state = state  # where the children are recorded (btswarm.statelock)
        self.children: list[Child] = []
        self.report = report
        self.stopping = False
        self._http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> "Supervisor":
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._http = client_session(self.ca_file, timeout=aiohttp.ClientTimeout(total=2))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
        if self._http:
            await self._http.close()

    async def _spawn(self, child: Child) -> None:
        logfile = open(self.log_dir / f"{child.label}.log", "ab")
        try:
            # A session of its own: a Ctrl-C at the terminal reaches the
            # supervisor only, which then stops every child in order.
            # ...and dies with it: a kill -9 of the supervisor orphans nothing.
            child.proc = await asyncio.create_subprocess_exec(
                *child.service.argv, stdin=asyncio.subprocess.DEVNULL, stdout=logfile, stderr=logfile,
                start_new_session=True, preexec_fn=_child_setup(child.service.netns))
        finally:
            logfile.close()
        if self.state is not None:
            statelock.record_children(self.state, [(c.label, c.proc.pid, list(c.service.argv))
                                                   for c in self.children if c.proc is not None])

    async def start(self, service: Service, timeout: float = 60.0) -> Child:
        child = Child(service)
        self.children.append(child)
        await self._spawn(child)
        await self.wait_healthy(child, timeout)
        return child

    async def healthy(self, url: str) -> bool:
        assert self._http is not None
        if url.startswith("redis://"):
            return await _redis_ping(url)
        try:
            async with self._http.get(url) as resp:
                return resp.status == 200
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            return False

    async def wait_healthy(self, child: Child, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert child.proc is not None
            if child.proc.returncode is not None:
                log = self.log_dir / (child.label + ".log")
                raise StartError(child.label, f"exited with code {child.proc.returncode} while starting: "
                                              f"{_last_line(log)}; see {log}")
            if await self.healthy(child.service.health_url):
                return
            if time.monotonic() > deadline:
                raise StartError(child.label, f"not healthy after {timeout:.0f} s ({child.service.health_url}); "
                                              f"see {self.log_dir / (child.label + '.log')}")
            await asyncio.sleep(0.1)

    async def watch(self, until: Awaitable[object], interval: float = 0.5) -> None:
        """Restart children that die (at most MAX_RESTARTS in RESTART_WINDOW s each) until `until` is done."""
        waiter = asyncio.ensure_future(until)
        try:
            while not waiter.done():
                for child in self.children:
                    proc = child.proc
                    if proc is None or proc.returncode is None or self.stopping:
                        continue
                    now = time.monotonic()
                    child.restarts = [t for t in child.restarts if now - t < RESTART_WINDOW]
                    if len(child.restarts) >= MAX_RESTARTS:
                        self.report(f"{child.label}: exited with code {proc.returncode}; restarted "
                                    f"{MAX_RESTARTS} times in {RESTART_WINDOW:.0f} s, giving up")
                        child.proc = None
                        continue
                    child.restarts.append(now)
                    self.report(f"{child.label}: exited with code {proc.returncode}; restarting")
                    await self._spawn(child)
                await asyncio.wait([waiter], timeout=interval)
        finally:
            waiter.cancel()

    async def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM every child, newest first; SIGKILL what is still there after `timeout`."""
        self.stopping = True
        for child in reversed(self.children):
            proc = child.proc
            if proc is not None and proc.returncode is None:
                try:
                    proc.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for child in reversed(self.children):
            proc = child.proc
            if proc is None:
                continue
            try:
                await asyncio.wait_for(proc.wait(), timeout)
            except asyncio.TimeoutError:
                self.report(f"{child.label}: did not stop in {timeout:.0f} s; killing pid {proc.pid}")
                try:
                    os.kill(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                await proc.wait()
        self.children.clear()


def _last_line(log: Path) -> str:
    """What a part said last before it exited: its error, for the message that names it."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = f.read().decode(errors="replace").strip().splitlines()
    except OSError as e:
        return f"(its log: {e.strerror})"
    return lines[-1] if lines else "(its log is empty)"
