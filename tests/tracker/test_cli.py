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
