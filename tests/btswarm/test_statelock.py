"""One `btswarm up` per state directory, and nothing orphaned by a `kill -9` of it (real processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests.e2e.conftest import start_federation
from tests.support import command, wait_for
from torrents.procs import children, cmdline

pytestmark = pytest.mark.slow

ARGS = ("--sites", "1", "--sample-files", "3", "--sample-size", "2M", "--heartbeat", "1s")


def test_a_second_up_on_a_state_in_use_refuses_and_the_first_keeps_working(tmp_path):
    first = start_federation(tmp_path, *ARGS)
    try:
        configs = {p.name: p.read_bytes() for p in (tmp_path / "state" / "config").iterdir()}
        out = subprocess.run([command("btswarm"), "up", "--state", str(tmp_path / "state"), *ARGS],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 1
        assert out.stderr.strip().splitlines()[-1] == \
            f"btswarm: error: {tmp_path / 'state'}: in use by btswarm up (pid {first.proc.pid})"
        # nothing rewritten under the running federation: it still serves
        assert {p.name: p.read_bytes() for p in (tmp_path / "state" / "config").iterdir()} == configs
        got = first.bt_get(tmp_path / "out", "--timeout", "60")
        assert got.returncode == 0, got.stderr
    finally:
        assert first.stop(timeout=30) == 0


def test_kill_9_of_up_orphans_nothing_and_a_restart_cleans_up(tmp_path):
    fed = start_federation(tmp_path, *ARGS)
    parts = children(fed.proc.pid)
    assert len(parts) >= 3  # tracker, repository, a site
    argv = {pid: cmdline(pid) for pid in parts}
    os.kill(fed.proc.pid, signal.SIGKILL)
    fed.proc.wait(10)
    # each part got SIGTERM from the kernel when its parent died, and stopped cleanly
    wait_for(lambda: not any(cmdline(pid) == argv[pid] for pid in parts), timeout=30, interval=0.2,
             what="the orphans to stop")
    # the lock died with its holder: a restart on the same state starts cleanly
    again = start_federation(tmp_path, *ARGS, log_name="again")
    try:
        assert "in use" not in again.log()
    finally:
        assert again.stop(timeout=30) == 0


def started(argv: list[str]) -> subprocess.Popen:
    """A process once it runs argv: until its exec, /proc shows the forking Python's command line."""
    proc = subprocess.Popen(argv, start_new_session=True)
    wait_for(lambda: cmdline(proc.pid)[:1] == argv[:1],
             timeout=10, what=f"{argv[0]} to start")
    return proc


def test_a_leftover_recorded_by_a_killed_up_is_stopped_by_the_next(tmp_path):
    from btswarm import statelock

    state = tmp_path / "state"
    state.mkdir()
    # a process of "an earlier run" that did not die with its parent: recorded, still running
    leftover = started(["sleep", "300"])
    try:
        statelock.record_children(state, [("site1", leftover.pid, ["sleep", "300"])])
        said: list[str] = []
        assert statelock.stop_leftovers(state, said.append) == 1
        assert leftover.wait(10) == -signal.SIGTERM
        assert said == [f"stopped 1 processes an earlier btswarm up left running: site1 (pid {leftover.pid})"]
        # a recorded PID now running something else is not ours to kill
        other = started(["sleep", "301"])
        try:
            statelock.record_children(state, [("site1", other.pid, ["sleep", "300"])])
            assert statelock.stop_leftovers(state, said.append) == 0
            time.sleep(0.2)
            assert other.poll() is None
        finally:
            other.kill()
            other.wait(5)
    finally:
        if leftover.poll() is None:
            leftover.kill()
            leftover.wait(5)
