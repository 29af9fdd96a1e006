"""`btswarm demo` end to end, and killed midway: the federation it started never outlives it."""

from __future__ import annotations

import signal
import subprocess

import pytest

from tests.support import alive, command, wait_for

pytestmark = pytest.mark.slow


def test_demo_fetches_and_verifies_then_stops_the_federation(tmp_path):
    result = subprocess.run([command("btswarm"), "demo", "--state", str(tmp_path), "--sample-size", "16M"],
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "verified: all 29 files in" in result.stderr
    assert "federation stopped" in result.stderr
    assert not (tmp_path / "ready.json").exists()


def federation_pids(state) -> list[int]:
    """The federation's processes, found by their config files under this state directory."""
    out = subprocess.run(["pgrep", "-f", str(state / "config")], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_demo_killed_while_starting_stops_its_federation(tmp_path, sig):
    demo = subprocess.Popen([command("btswarm"), "demo", "--state", str(tmp_path), "--sample-size", "16M"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # Killed once the tracker and the repository run: mid-start, the hardest moment to clean up.
        started = wait_for(lambda: len(federation_pids(tmp_path)) >= 2 and federation_pids(tmp_path),
                           timeout=120, what="the demo's federation to start")
        demo.send_signal(sig)
        assert demo.wait(60) == 130
        wait_for(lambda: not any(alive(p) for p in started) and not federation_pids(tmp_path), timeout=30,
                 what="the federation to stop")
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait(10)
