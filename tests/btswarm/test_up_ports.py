"""`btswarm up` when a part's port is taken (real processes): it stops, naming the part and why."""

from __future__ import annotations

import socket
import subprocess

import pytest

from tests.support import command
from torrents.procs import free_port

pytestmark = pytest.mark.slow


def test_a_site_whose_port_is_taken_stops_up_with_the_site_s_own_error(tmp_path):
    base = next(p for p in (free_port() for _ in range(100)) if p <= 60000)  # --base-port takes up to 65000, and P+520
    with socket.socket(socket.AF_INET6) as held:
        held.bind(("::", base + 10))  # site1's control port (--base-port P: P+10), on every address
        held.listen()
        out = subprocess.run([command("btswarm"), "up", "--state", str(tmp_path / "state"), "--sites", "1",
                              "--sample-files", "2", "--sample-size", "1M", "--base-port", str(base)],
                             capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == (
        f"btswarm: error: site1: exited with code 1 while starting: bt-server: error: 127.0.0.2:{base + 10}: "
        f"cannot listen (error while attempting to bind on address ('127.0.0.2', {base + 10}): "
        f"address already in use); see {tmp_path / 'state' / 'logs' / 'site1.log'}")
