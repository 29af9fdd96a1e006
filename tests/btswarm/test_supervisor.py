"""The supervisor with real processes: start on health, restart the dead, stop everything by PID."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import pytest

from btswarm.topology import Service
from btswarm.supervisor import StartError, Supervisor
from tests.support import alive, free_port


def http_server(tmp_path, label: str) -> Service:
    port = free_port()
    argv = (sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port), "--directory", str(tmp_path))
    return Service(label, argv, f"http://127.0.0.1:{port}/", tmp_path / "unused.toml")


async def test_dead_child_is_restarted_and_everything_stops(tmp_path):
    reports: list[str] = []
    async with Supervisor(tmp_path / "logs", report=reports.append) as sup:
        child = await sup.start(http_server(tmp_path, "web"), timeout=20)
        first_pid = child.proc.pid
        stop = asyncio.Event()
        watcher = asyncio.ensure_future(sup.watch(stop.wait(), interval=0.1))
        os.kill(first_pid, signal.SIGKILL)
        async def restarted():
            while child.proc.pid == first_pid or not await sup.healthy(child.service.health_url):
                await asyncio.sleep(0.05)
        await asyncio.wait_for(restarted(), 20)
        second_pid = child.proc.pid
        stop.set()
        await watcher
    assert any("web: exited with code -9; restarting" in r for r in reports), reports
    assert not alive(second_pid)


async def test_child_that_exits_while_starting_is_a_clear_error_with_what_it_said_last(tmp_path):
    said = "import sys; print('starting'); print('broken: error: cannot listen', file=sys.stderr); sys.exit(3)"
    service = Service("broken", (sys.executable, "-c", said), "http://127.0.0.1:9/", tmp_path / "x")
    async with Supervisor(tmp_path / "logs") as sup:
        with pytest.raises(StartError, match=r"broken: exited with code 3 while starting: "
                                             r"broken: error: cannot listen; see .*broken.log$"):
            await sup.start(service, timeout=20)
