"""The client side of `btswarm up`: start it, read its ready document, ask its parts, stop it.

Tests and benchmarks use the same machinery as a user of `btswarm up`:
both start a federation through `launch()` and talk to it through one
`Federation`. Like the rest of the umbrella it imports no service; it
only reads the document `btswarm up --ready-file` writes and speaks
HTTP to the URLs in it. Every wait has a deadline; every process is
stopped by its PID.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from btswarm import hosts as hostplan
from btswarm import netns, run, shaping
from btswarm.hosts import Host
from btswarm.ready import Ready, SiteInfo
from torrents import urls
from torrents.errors import BtswarmError
from torrents.procs import children, cmdline, stop

T = TypeVar("T")


class WaitTimeout(BtswarmError, TimeoutError):
    """A `wait_for` deadline passed; `subject` is what was awaited."""


class LaunchError(BtswarmError):
    """`btswarm up` exited, or was not ready in time; the message ends with its log tail."""


# --- small helpers: HTTP, deadlines --------------------------------------------------------------
def get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.load(resp)


def get_bytes(url: str, timeout: float = 10.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read()


def wait_for(predicate: Callable[[], T], timeout: float = 20.0, what: str = "condition", *,
             interval: float = 0.05) -> T:
    """Poll `predicate` until it returns something truthy (returned), or raise WaitTimeout.

    Polling, not events: the things awaited are other processes seen over
    HTTP or /proc, which offer nothing to block on.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise WaitTimeout(what, f"timed out after {timeout:g} s")
        time.sleep(interval)


# --- the federation --------------------------------------------------------------------------------
class Federation:
    """A running `btswarm up`, seen through its ready document.

    `up_pid` (the `btswarm up` process) is needed only to find the parts'
    PIDs; the rest works from the document alone.
    """

    def __init__(self, ready: Ready, up_pid: int | None = None) -> None:
        self.ready = ready
        self.up_pid = up_pid

    @property
    def repo(self) -> str:
        return self.ready.repo

    @property
    def tracker_url(self) -> str:
        return self.ready.tracker_url

    @property
    def announce(self) -> str:
        return self.ready.tracker

    @property
    def sites(self) -> tuple[SiteInfo, ...]:
        return self.ready.sites

    @property
    def datasets(self) -> tuple[str, ...]:
        return self.ready.datasets

    @property
    def data(self) -> Path:
        return self.ready.data

    @property
    def state(self) -> Path:
        return self.ready.state

    def site(self, name: str) -> SiteInfo:
        return self.ready.site(name)

    def site_status(self, name: str) -> dict[str, Any]:
        return get_json(self.site(name).control_url + "/api/status")

    def seeding(self) -> dict[str, int]:
        """Seeds each site runs now (sites start them on demand and stop them when idle)."""
        return {s.name: len(self.site_status(s.name)["seeds"]) for s in self.sites}

    def uploaded_total(self) -> int:
        """Bytes the sites have uploaded, all datasets, since they started."""
        return sum(int(self.site_status(s.name)["uploaded_total"]) for s in self.sites)

    def pids(self) -> dict[str, int]:
        """PIDs of the parts by label ('tracker', 'repo', 'site1', ...).

        Each part is a child of `btswarm up` started with `--config STATE/config/LABEL.toml`,
        so the config file names it, whatever its command is called.
        """
        if self.up_pid is None:
            raise BtswarmError("federation", "no btswarm up PID to find its parts by")
        conf = self.state / "config"
        out = {}
        for pid in children(self.up_pid):
            argv = cmdline(pid)
            if argv and Path(argv[0].split(" ")[0]).name == "redis-server":  # it rewrites its title
                # ours (--redis): no config file, its directory under the state. Its title is
                # "redis-server HOST:PORT" ("... [sentinel]"): our Redis, a replica or a sentinel by its port.
                title = argv[0].split()
                port = title[1].rpartition(":")[2] if len(title) > 1 else ""
                master = self.ready.redis.rstrip("/").rpartition("/")[0].rpartition(":")[2]
                out["redis" if port == master or not port else
                    f"sentinel:{port}" if "[sentinel]" in argv[0] else f"redis:{port}"] = pid
            for arg in argv:
                path = Path(arg)
                if path.suffix == ".toml" and path.parent == conf:
                    out[path.stem] = pid
        return out

    def site_pids(self) -> dict[str, int]:
        """bt-server PIDs by site name."""
        names = {s.name for s in self.sites}
        return {label: pid for label, pid in self.pids().items() if label in names}

    # -- shaped links (btswarm up --site-link/--client-link) ------------------------------------
    @property
    def netns(self) -> str | None:
        """The private network namespace the federation runs in, or None (unshaped, on the host)."""
        return self.ready.netns

    @property
    def links(self) -> tuple[shaping.Link, ...]:
        return self.ready.links

    def link_rate(self, address: str) -> int | None:
        """The uplink rate (bit/s) of `address`, None when unshaped."""
        return next((link.rate for link in self.links if link.address == address), None)

    def inside(self) -> contextlib.AbstractContextManager[None]:
        """The calling thread in the federation's namespace for a `with` block (no-op when unshaped).

        Its addresses exist only there: HTTP calls and processes started in
        the block (bt-get, curl, nginx) reach the federation, and what those
        processes send is shaped by their source address.
        """
        return netns.entered(self.netns)

    def link_bytes(self) -> dict[str, int]:
        """Bytes each shaped address has sent since the federation started (tc class counters)."""
        if self.netns is None:
            return {}
        if self.hosts:  # each host's uplink is its own interface's only class
            return {h.address: shaping.class_bytes(netns.tc_stats(h.netns, hostplan.DEV)).get(hostplan.class_id(), 0)
                    for h in self.hosts if h.link is not None}
        ids = shaping.link_class_ids(list(self.links))
        # With a delay line, what goes from or to a delayed address is shaped on its device instead of lo.
        devices = ["lo", shaping.TUN_DEVICE] if shaping.delayed(self.links) else ["lo"]
        sent = [shaping.class_bytes(netns.tc_stats(self.netns, dev)) for dev in devices]
        return {address: sum(s.get(cid, 0) for s in sent) for address, cid in ids.items()}

    # -- hosts (btswarm up --hosts) ---------------------------------------------------------------
    @property
    def hosts(self) -> tuple[Host, ...]:
        """Each part's host (services, site1.., t3-1..); () unless started with --hosts. `inside()` then
        enters the bridge's namespace, from where every host's address is reached."""
        return self.ready.hosts

    def host(self, name: str) -> Host:
        return self.ready.host(name)

    def on_host(self, name: str) -> contextlib.AbstractContextManager[None]:
        """The calling thread on host `name` for a `with` block: what it connects to, and what it
        starts, starts from that host's address."""
        return netns.entered(self.host(name).netns)

    def run_on(self, name: str, argv: list[str], *, env: Mapping[str, str] | None = None,
               **kwargs: Any) -> subprocess.CompletedProcess:
        """`btswarm run --host NAME -- ARGV` without the exec: ARGV on that host with BTSWARM_GET_REPO
        set; keyword arguments go to subprocess.run (capture_output, timeout, ...)."""
        host = self.host(name)
        return subprocess.run(argv, env=run.host_env(self.ready, host, {**os.environ, **(env or {})}),
                              preexec_fn=netns.preexec(host.netns), **kwargs)

    def torrent(self, name: str) -> bytes:
        return get_bytes(f"{self.repo}{urls.dataset_torrent(name)}")

    def info_hash(self, name: str) -> str:
        return get_json(f"{self.repo}{urls.dataset_api(name)}")["info_hash"]


# --- starting and stopping -------------------------------------------------------------------------
def launch(state: Path, args: list[str], *, ready_file: Path, log_path: Path, timeout: float = 120.0,
           env: Mapping[str, str] | None = None) -> tuple[subprocess.Popen, Federation]:
    """Start `btswarm up --state STATE --ready-file F ARGS` and return once it is ready.

    It runs in a session of its own (a terminal's ^C reaches only us) with
    its output appended to `log_path`; `env` is added to ours and reaches
    every part. If it exits first, or is not ready within `timeout`, it is
    stopped and LaunchError carries the log tail. Stop it with `stop(proc)`
    (torrents.procs.stop: SIGTERM by PID, btswarm up then stops its parts).
    """
    ready_file.unlink(missing_ok=True)  # a document left by an earlier run is not readiness
    command = [str(Path(sys.executable).parent / "btswarm"), "up", "--state", str(state),
               "--ready-file", str(ready_file), *args]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, **(env or {})}, start_new_session=True)
    try:
        try:
            wait_for(lambda: ready_file.exists() or proc.poll() is not None, timeout, "btswarm up to be ready",
                     interval=0.1)
        except WaitTimeout as e:
            raise LaunchError("btswarm up", f"not ready after {timeout:g} s; {log_path}:\n{_tail(log_path)}") from e
        if not ready_file.exists():
            raise LaunchError("btswarm up", f"exited {proc.returncode}; {log_path}:\n{_tail(log_path)}")
        return proc, Federation(Ready.read(ready_file), proc.pid)
    except BaseException:
        stop(proc)
        raise


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError as e:
        return f"({e})"
