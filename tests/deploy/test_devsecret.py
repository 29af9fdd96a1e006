"""The development secret: accepted on loopback with a warning, refused anywhere else with one line.

The refusals run the real commands with an address nobody has (192.0.2.1,
TEST-NET-1): the check comes before any socket, so nothing is bound or sent.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.support import Proc, command, free_port, wait_for, http_ok
from torrents import devsecret
from torrents.errors import ConfigError
from torrents.exitstatus import ExitStatus

DEV = devsecret.DEV_SECRET
TRACKER_HOW = ("give each site a secret of its own (e.g. openssl rand -hex 32) in [tracker] site_secrets, "
               "the same as that site's [server] secret")
REPO_HOW = TRACKER_HOW.replace("[tracker]", "[repo]")
SERVER_HOW = ("set [server] secret (or $BTSWARM_SERVER_SECRET) to this site's own secret, the one the tracker's and "
              "the repository's site_secrets hold for it")


# --- the rule, pure -------------------------------------------------------------------------------
@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.0.0.42", True), ("127.255.255.254", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("LOCALHOST", True),
    ("0.0.0.0", False), ("::", False), ("192.0.2.1", False), ("10.0.0.1", False), ("128.0.0.1", False),
    ("tracker.example.org", False), ("localhost.example.org", False), ("", False),
])
def test_loopback_is_127_slash_8_and_the_v6_one(host, loopback):
    assert devsecret.is_loopback_host(host) is loopback


def test_every_address_counts_urls_and_host_ports_alike():
    assert devsecret.exposed([("listen", "127.0.0.1:6969"), ("repo", "https://127.0.0.1:8080/"), ("x", "")]) is None
    assert devsecret.exposed([("listen", "127.0.0.1:6969"), ("repo", "https://repo.example:443")]) == \
        "repo https://repo.example:443"
    assert devsecret.exposed([("listen", "[::1]:80"), ("control_url", "http://[::1]:8700")]) is None


def test_on_loopback_a_warning_elsewhere_an_error_naming_the_key():
    warning = devsecret.check("[tracker] site_secrets", {"site1": DEV, "site2": "s3cret"},
                              [("listen", "127.0.0.1:6969")], "HOW")
    assert warning == ("[tracker] site_secrets: site1 has the development secret 'btswarm-dev-secret': "
                       "accepted on loopback only, refused on any other address")
    with pytest.raises(ConfigError) as err:
        devsecret.check("[tracker] site_secrets", {"site1": DEV, "site2": "", "site3": "ok"},
                        [("listen", "127.0.0.1:6969"), ("repo", "http://192.0.2.1:8080")], "HOW")
    assert str(err.value) == ("[tracker] site_secrets: site1 has the development secret 'btswarm-dev-secret' and "
                              "site2 has no secret: refused off loopback (repo http://192.0.2.1:8080); HOW")
    assert err.value.exit_status == ExitStatus.USAGE


def test_own_secrets_pass_anywhere():
    assert devsecret.check("[server] secret", {"site1": "a1b2"}, [("listen", "0.0.0.0:8700")], "HOW") is None


# --- the real commands ------------------------------------------------------------------------------
def run(prog: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([command(prog), *args], capture_output=True, text=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", **(env or {})})


@pytest.mark.parametrize("prog, args, line", [
    ("bt-tracker", ["run", "--listen", "192.0.2.1:6969"],
     f"bt-tracker: error: [tracker] site_secrets: site1 has the development secret 'btswarm-dev-secret': refused off "
     f"loopback (listen 192.0.2.1:6969); {TRACKER_HOW}"),
    ("bt-repo", ["run", "--listen", "192.0.2.1:8080", "--state", "{tmp}/repo"],
     f"bt-repo: error: [repo] site_secrets: site1 has the development secret 'btswarm-dev-secret': refused off "
     f"loopback (listen 192.0.2.1:8080); {REPO_HOW}"),
    ("bt-server", ["run", "--listen", "192.0.2.1:8700", "--state", "{tmp}/site"],
     f"bt-server: error: [server] secret: site1 has the development secret 'btswarm-dev-secret': refused off "
     f"loopback (listen 192.0.2.1:8700); {SERVER_HOW}"),
    # On loopback itself, but telling others to come from elsewhere (a proxy in front, a remote tracker).
    ("bt-server", ["run", "--state", "{tmp}/site", "--tracker", "https://tracker.example.org"],
     f"bt-server: error: [server] secret: site1 has the development secret 'btswarm-dev-secret': refused off "
     f"loopback (tracker https://tracker.example.org); {SERVER_HOW}"),
])
def test_the_development_secret_off_loopback_is_one_line_and_exit_2(prog, args, line, tmp_path):
    out = run(prog, *[a.format(tmp=tmp_path) for a in args])
    assert out.returncode == ExitStatus.USAGE, out.stderr
    assert out.stderr.splitlines() == [line]
    assert not (tmp_path / "repo").exists() and not (tmp_path / "site").exists()  # refused before anything


def test_a_secret_set_in_the_environment_is_accepted_off_loopback_then_the_bind_fails(tmp_path):
    out = run("bt-tracker", "run", "--listen", "192.0.2.1:6969",
              env={"BTSWARM_TRACKER_SITE_SECRETS": "site1=4f1c2b,site2=9a8e7d"})
    [line] = out.stderr.splitlines()
    assert line.startswith("bt-tracker: error: 192.0.2.1:6969: cannot listen (") and "assign" in line, line
    assert out.returncode == ExitStatus.ERROR


def test_an_empty_secret_is_no_secret(tmp_path):
    out = run("bt-server", "run", "--listen", "192.0.2.1:8700", "--state", str(tmp_path / "s"),
              env={"BTSWARM_SERVER_SECRET": ""})
    assert out.stderr.splitlines() == [
        f"bt-server: error: [server] secret: site1 has no secret: refused off loopback (listen 192.0.2.1:8700); "
        f"{SERVER_HOW}"]


def test_on_loopback_the_tracker_starts_and_its_log_says_so(tmp_path):
    """Said in the log (-v, as the systemd units run it); at default verbosity a demo's terminal stays quiet."""
    port = free_port()
    proc = Proc([command("bt-tracker"), "run", "--listen", f"127.0.0.1:{port}", "-v"], tmp_path / "t.log")
    try:
        wait_for(lambda: http_ok(f"http://127.0.0.1:{port}/healthz") or proc.popen.poll() is not None, timeout=30,
                 what="the tracker")
        assert proc.popen.poll() is None, proc.log()
    finally:
        assert proc.stop() == 0
    said = [line for line in proc.log().splitlines() if "development secret" in line]
    assert len(said) == 1 and said[0].endswith(
        " bt-tracker INFO btswarm.tracker: [tracker] site_secrets: site1 has the development secret "
        "'btswarm-dev-secret': accepted on loopback only, refused on any other address"), proc.log()
