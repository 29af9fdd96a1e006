"""`bt-tracker run` as a real process: serves, exits 0 on SIGTERM; a bad config is a one-line error."""

from __future__ import annotations

import signal
import subprocess

from tests.support import command, free_port, http_ok, wait_for


def test_run_serves_and_exits_cleanly_on_sigterm(procs):
    port = free_port()
    tracker = procs.start("bt-tracker", [command("bt-tracker"), "run", "--listen", f"127.0.0.1:{port}", "--open",
                                         "--interval", "30", "-v"])
    wait_for(lambda: http_ok(f"http://127.0.0.1:{port}/healthz"), timeout=20, what="bt-tracker /healthz")
    tracker.popen.send_signal(signal.SIGTERM)
    assert tracker.popen.wait(15) == 0
    assert "listening on http://127.0.0.1:%d" % port in tracker.log()


def test_bad_config_is_a_one_line_error(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[tracker]\nintervall = 3\n")
    result = subprocess.run([command("bt-tracker"), "run", "--config", str(cfg)], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 2
    assert result.stderr.startswith("bt-tracker: error: ") and "intervall: unknown key" in result.stderr


def test_processes_share_one_port_and_a_killed_one_is_replaced(procs, redis_server):
    """`--processes 2` on the Redis store: both answer on one port; kill -9 one, the other serves, the parent
    starts a new one; SIGTERM stops them all and exits 0."""
    import os
    import urllib.request

    from torrents.procs import children
    from tests.tracker.helpers import query

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    tracker = procs.start("bt-tracker", [command("bt-tracker"), "run", "--listen", f"127.0.0.1:{port}", "--open",
                                         "--store", "redis", "--redis-url", redis_server.url, "--processes", "2"])
    wait_for(lambda: http_ok(url + "/healthz") and len(children(tracker.pid)) == 2, timeout=20,
             what="two bt-tracker processes")

    def announce(i: int) -> bytes:
        # A connection the kernel queued on the killed process is reset: a client asks again, as libtorrent does.
        for attempt in range(3):
            try:
                with urllib.request.urlopen(f"{url}/announce?" + query(b"\x01" * 20, b"-TT0001-%012d" % i,
                                                                       port=7000 + i), timeout=5) as resp:
                    return resp.read()
            except ConnectionResetError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    assert all(b"interval" in announce(i) for i in range(20))
    first, second = children(tracker.pid)
    os.kill(first, signal.SIGKILL)
    assert all(b"interval" in announce(100 + i) for i in range(20)), "the other process serves meanwhile"
    wait_for(lambda: len(children(tracker.pid)) == 2 and first not in children(tracker.pid), timeout=20,
             what="the parent to start a new process")
    from torrents import bencoding
    assert bencoding.decode(announce(200))[b"incomplete"] == 41, "one swarm, whichever process answered"
    tracker.popen.send_signal(signal.SIGTERM)
    assert tracker.popen.wait(20) == 0
    assert children(tracker.pid) == []
