"""What systemd sees of the services: the units in deploy/systemd/, readiness (sd_notify), the journal.

`systemd-analyze verify` checks the units as systemd would load them (it
needs no systemd as PID 1; it warns, and still exits 0, on an unknown key
or a bad value, so the test asserts it says nothing at all). Readiness: each
service, started with $NOTIFY_SOCKET naming a socket this test listens on,
sends READY=1 once its port accepts connections, and STOPPING=1 on SIGTERM.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import Proc, command, free_port

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "deploy" / "systemd"
NAMES = ("bt-server.service", "bt-tracker.service", "bt-repo.service")
INSTALLED = "/opt/btswarm/bin/"  # the prefix the units name (docs/deploy-site.md)


def analyze() -> str:
    path = shutil.which("systemd-analyze")
    if path is None:
        pytest.skip("needs systemd-analyze (Debian package systemd; scripts/install-system-deps.sh installs it)")
    return path


def installed_copies(tmp: Path, edit=lambda text: text) -> list[Path]:
    """The units as an admin installs them, with ExecStart at this venv's commands (verify checks they exist)."""
    out = []
    for name in NAMES:
        text = (UNITS / name).read_text().replace(INSTALLED, f"{Path(sys.executable).parent}/")
        (tmp / name).write_text(edit(text))
        out.append(tmp / name)
    return out


def verify(paths: list[Path]) -> subprocess.CompletedProcess:
    return subprocess.run([analyze(), "verify", "--man=no", *map(str, paths)], capture_output=True, text=True,
                          timeout=60)


def test_the_units_pass_systemd_analyze_verify_without_a_word(tmp_path):
    out = verify(installed_copies(tmp_path))
    assert (out.returncode, out.stdout + out.stderr) == (0, "")


def test_verify_would_see_a_mistake(tmp_path):
    """The check above can fail: a misspelt key and a bad Type= are reported."""
    out = verify(installed_copies(tmp_path, lambda t: t.replace("Type=notify", "Type=notfy")
                                  .replace("ProtectSystem=strict", "ProtectSytem=strict")))
    said = out.stdout + out.stderr
    assert "Failed to parse service type, ignoring: notfy" in said and "Unknown key 'ProtectSytem'" in said


def test_the_units_are_ready_on_notify_restart_on_failure_and_harden():
    for name in NAMES:
        keys = {}
        for line in (UNITS / name).read_text().splitlines():
            if "=" in line and not line.startswith("#"):
                k, v = line.split("=", 1)
                keys.setdefault(k, v)
        assert keys["Type"] == "notify" and keys["Restart"] == "on-failure", name
        assert keys["RestartPreventExitStatus"] == "2", name  # a config mistake is not retried
        assert keys["ExecStart"].startswith(f"{INSTALLED}{name.removesuffix('.service')} run --config "), name
        for hard in ("NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes"):
            k, v = hard.split("=")
            assert keys[k] == v, (name, hard)
    assert "ExecReload=/bin/kill -HUP $MAINPID" in (UNITS / "bt-server.service").read_text()


# --- readiness -------------------------------------------------------------------------------------------
class NotifySocket:
    """The socket systemd would listen on for sd_notify datagrams."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))

    def receive(self, timeout: float) -> str:
        self.sock.settimeout(timeout)
        return self.sock.recv(4096).decode()

    def close(self) -> None:
        self.sock.close()


def accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


@pytest.mark.parametrize("prog", ["bt-tracker", "bt-repo", "bt-server"])
def test_ready_is_sent_once_the_port_listens_and_stopping_on_sigterm(prog, tmp_path):
    host = "127.0.0.1"
    port = free_port(host)
    args = {"bt-tracker": ["--listen", f"{host}:{port}"],
            "bt-repo": ["--listen", f"{host}:{port}", "--state", str(tmp_path / "repo")],
            "bt-server": ["--listen", f"{host}:{port}", "--peer-listen", f"{host}:0", "--state", str(tmp_path / "s"),
                          "--tracker", "", "--repo", ""]}[prog]
    notify = NotifySocket(tmp_path / "notify.sock")
    proc = Proc([command(prog), "run", *args], tmp_path / f"{prog}.log", env={"NOTIFY_SOCKET": str(notify.path)})
    try:
        message = notify.receive(timeout=60)
        listening = accepts(host, port)  # at once: READY=1 must not come before the socket listens
        assert message.splitlines()[0] == "READY=1", message
        assert listening, proc.log()
        assert f"STATUS=listening on http://{host}:{port}" in message.splitlines()
        proc.popen.terminate()
        assert notify.receive(timeout=30) == "STOPPING=1"
        assert proc.popen.wait(30) == 0, proc.log()
    finally:
        proc.stop()
        notify.close()


def test_an_abstract_socket_name_works_too(tmp_path):
    """$NOTIFY_SOCKET may name an abstract socket ('@name'), as systemd in containers does."""
    name = f"btswarm-test-{os.getpid()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    try:
        code = ("import os; os.environ['NOTIFY_SOCKET'] = '@" + name + "'\n"
                "from torrents.servicekit import sdnotify; raise SystemExit(0 if sdnotify.ready('up') else 1)")
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        sock.settimeout(5)
        assert sock.recv(4096).decode() == "READY=1\nSTATUS=up"
    finally:
        sock.close()


def test_without_systemd_nothing_is_sent():
    from torrents.servicekit import sdnotify
    saved = os.environ.pop("NOTIFY_SOCKET", None)
    try:
        assert sdnotify.ready() is False
    finally:
        if saved is not None:
            os.environ["NOTIFY_SOCKET"] = saved


# --- the journal -------------------------------------------------------------------------------------------
def test_logging_to_the_journal_carries_priorities_and_no_timestamp(tmp_path):
    """stderr named by $JOURNAL_STREAM (as systemd sets it): `<4>` on a warning, journald's own time."""
    dead = free_port()
    log = tmp_path / "stderr"
    with open(log, "wb") as err:
        st = os.fstat(err.fileno())
        env = {**os.environ, "JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
        proc = subprocess.Popen([command("bt-tracker"), "run", "--listen", f"127.0.0.1:{free_port()}"],
                                stdout=subprocess.DEVNULL, stderr=err, env={
                                    **env, "BTSWARM_TRACKER_REPO": f"http://127.0.0.1:{dead}",
                                    "BTSWARM_TRACKER_REPO_POLL": "0.2"})
        try:
            from tests.support import wait_for
            wait_for(lambda: "cannot read published" in log.read_text() or proc.poll() is not None, timeout=30,
                     what="a warning from the tracker")
        finally:
            proc.terminate()
            proc.wait(30)
    lines = [line for line in log.read_text().splitlines() if "cannot read published" in line]
    assert lines and lines[0].startswith(f"<4>bt-tracker WARNING btswarm.tracker: http://127.0.0.1:{dead}: "
                                         "cannot read published info-hashes: "), lines
