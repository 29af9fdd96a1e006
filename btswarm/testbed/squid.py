"""A site's squid, as batch worker nodes reach the world through it: Debian's squid on a config of its own.

`config` is pure (the squid.conf text): one http_port, no cache (every
request goes to its server, and its line is in the access log), everything
allowed (it is a test bed's proxy on a test bed's addresses), logs in a
directory of its own under /tmp (squid writes them as its user, `proxy`, who
may not enter a test's tmp_path), removed when it stops. `Squid` runs `squid -N` (no daemon: a child we stop by its
PID), optionally inside a network namespace (a host of `btswarm up --hosts`),
waits until it accepts connections, and reads its access log.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from torrents import procs
from torrents.errors import BtswarmError

START_WITHIN = 30.0


class SquidError(BtswarmError):
    """squid is missing or did not start."""


NCSA_AUTH = "/usr/lib/squid/basic_ncsa_auth"


def config(address: str, port: int, state: Path, passwords: Path | None = None) -> str:
    """squid.conf for a proxy on `address:port` that caches nothing and logs every request under `state`;
    with `passwords` (an htpasswd file), only for the users it names (HTTP basic, 407 for the others)."""
    access = ["http_access allow all"] if passwords is None else [
        f"auth_param basic program {NCSA_AUTH} {passwords}", "acl users proxy_auth REQUIRED",
        "http_access allow users", "http_access deny all"]
    return "\n".join([
        f"http_port {address}:{port}",
        *access,
        "cache deny all",
        "cache_mem 8 MB",
        "strip_query_terms off",  # the log shows whole URLs (an announce's inbound=0)
        f"access_log stdio:{state}/access.log squid",
        f"cache_log {state}/cache.log",
        f"pid_filename {state}/squid.pid",
        f"coredump_dir {state}",
        "visible_hostname btswarm-testbed-squid",
        "shutdown_lifetime 1 seconds",
        "dns_nameservers 127.0.0.1",  # never asked: every URL of the test bed names an address
        "",
    ])


class Squid:
    """squid on `address:port`, in namespace `netns` (None: this one); `start`, `access_log`, `stop`."""

    def __init__(self, address: str, port: int = 3128, netns: str | None = None,
                 users: dict[str, str] | None = None) -> None:
        self.address, self.port, self.netns, self.users = address, port, netns, dict(users or {})
        self.state = Path(tempfile.mkdtemp(prefix="btswarm-squid-"))
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"

    def start(self) -> "Squid":
        binary = shutil.which("squid") or ("/usr/sbin/squid" if os.path.exists("/usr/sbin/squid") else None)
        if binary is None:
            raise SquidError("squid", "not installed (Debian: squid; scripts/install-system-deps.sh)")
        os.chmod(self.state, 0o777)  # run as root, squid writes its logs as its effective user (proxy)
        conf = self.state / "squid.conf"
        passwords = self._passwords() if self.users else None
        conf.write_text(config(self.address, self.port, self.state, passwords))
        argv = [binary, "-N", "-f", str(conf)]
        if self.netns:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=open(self.state / "stderr.log", "ab"))
        deadline = time.monotonic() + START_WITHIN
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SquidError("squid", f"exited {self.proc.returncode}: {self._tail()}")
            if self._accepts():
                return self
            time.sleep(0.1)
        self.stop()
        raise SquidError("squid", f"not listening on {self.address}:{self.port} after {START_WITHIN:g} s: {self._tail()}")

    def _passwords(self) -> Path:
        """The users' htpasswd file (MD5-crypt, made by openssl), readable by squid's user."""
        lines = []
        for user, password in self.users.items():
            hashed = subprocess.run(["openssl", "passwd", "-1", "-stdin"], input=password, capture_output=True,
                                    text=True, timeout=30, check=True).stdout.strip()
            lines.append(f"{user}:{hashed}")
        path = self.state / "passwd"
        path.write_text("\n".join(lines) + "\n")
        os.chmod(path, 0o644)
        return path

    def _accepts(self) -> bool:
        if self.netns:  # our own namespace may not reach the host's address: ask from inside
            probe = ["ip", "netns", "exec", self.netns, "bash", "-c", f"exec 3<>/dev/tcp/{self.address}/{self.port}"]
            return subprocess.run(probe, capture_output=True, timeout=10).returncode == 0
        try:
            with socket.create_connection((self.address, self.port), timeout=1):
                return True
        except OSError:
            return False

    def _tail(self) -> str:
        text = ""
        for name in ("stderr.log", "cache.log"):
            path = self.state / name
            if path.exists():
                text += path.read_text(errors="replace")[-1500:]
        return text.strip()

    def access_log(self) -> list[str]:
        """The requests squid has served, one line each (method, URL and result among the fields)."""
        path = self.state / "access.log"
        return path.read_text(errors="replace").splitlines() if path.exists() else []

    def stop(self) -> None:
        if self.proc is not None:
            procs.stop(self.proc, 10)
        self.proc = None
        shutil.rmtree(self.state, ignore_errors=True)
