"""Third-party BitTorrent clients from Debian, run as real processes for the tests.

Each client gets a private directory of its own (its HOME, configuration,
session state and logs) inside the test's temporary directory, so nothing of
the user's real configuration is read or written; it listens on one
127.0.0.x address and port; DHT, peer exchange and local peer discovery are
off (docs/clients.md says why and how). `fetch` downloads a .torrent into
DIR (the files land in DIR/NAME/), `seed` seeds the data already in
DIR/NAME/. Every process is stopped by its PID at teardown (tests.support.Proc).
"""

from __future__ import annotations

import asyncio
import shutil
import stat
from pathlib import Path

import aiohttp
import pytest

from tests.support import Proc, free_port, wait_for

NAMES = ("aria2c", "ctorrent", "rtorrent", "qbittorrent")


class Client:
    """One client on `ip`: a process, its private directory `home`, its listening endpoint."""

    name = ""
    binary = ""
    # ctorrent takes a peer on its own address for itself and never talks to it.
    talks_to_its_own_address = True
    stop_timeout = 15.0  # seconds between SIGTERM and SIGKILL

    def __init__(self, home: Path, ip: str, procs) -> None:
        if shutil.which(self.binary) is None:
            pytest.fail(f"{self.binary}: not installed (scripts/install-system-deps.sh installs it)")
        self.home = home
        self.home.mkdir(parents=True, exist_ok=True)
        self.ip = ip
        self.port = free_port(ip)
        self.procs = procs
        self.proc: Proc | None = None
        self.marker = home / "finished"  # written by the client's own completion hook

    @property
    def endpoint(self) -> str:
        return f"{self.ip}:{self.port}"

    @property
    def peer_address(self) -> str:
        """Where a bt-get that this client seeds to may listen: the client's own address, if it allows."""
        return self.ip if self.talks_to_its_own_address else "127.0.0.1"

    def fetch(self, torrent: Path, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)  # rtorrent creates DIR/NAME, not DIR
        self._start(torrent, directory, seed=False)

    def seed(self, torrent: Path, directory: Path) -> None:
        self._start(torrent, directory, seed=True)

    def finished(self) -> bool:
        """The client says the download is complete (its completion event, or its API)."""
        return self.marker.exists()

    def wait_finished(self, timeout: float = 60) -> None:
        wait_for(lambda: self.finished() or self._exited(), timeout, f"{self.name} to finish", interval=0.2)
        assert self.finished(), f"{self.name} exited {self.proc.popen.returncode}:\n{self.log()[-3000:]}"

    def log(self) -> str:
        return self.proc.log() if self.proc else ""

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(timeout=self.stop_timeout)

    def _exited(self) -> bool:
        return self.proc is not None and self.proc.popen.poll() is not None

    def _run(self, args: list[str]) -> None:
        # HOME is the private directory: a client that looks for ~/.something finds ours.
        self.proc = self.procs.start(self.name, args, env={"HOME": str(self.home), "XDG_CONFIG_HOME":
                                     str(self.home / ".config"), "XDG_DATA_HOME": str(self.home / ".local"),
                                     "XDG_CACHE_HOME": str(self.home / ".cache")}, cwd=str(self.home))

    def _hook(self) -> Path:
        """A script that records completion (clients run a command when a download finishes)."""
        script = self.home / "on-finished.sh"
        script.write_text(f"#!/bin/sh\ntouch '{self.marker}'\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        return script

    def _start(self, torrent: Path, directory: Path, *, seed: bool) -> None:
        raise NotImplementedError


class Aria2c(Client):
    name = binary = "aria2c"

    def _start(self, torrent: Path, directory: Path, *, seed: bool) -> None:
        self._run(["aria2c", "--no-conf", f"--dir={directory}", f"--interface={self.ip}",
                   f"--listen-port={self.port}", "--disable-ipv6=true",
                   "--enable-dht=false", "--enable-dht6=false", "--enable-peer-exchange=false",
                   "--bt-enable-lpd=false",
                   # seed until stopped (the default stops at a share ratio of 1.0)
                   "--seed-time=60", "--seed-ratio=0.0",
                   # seeding: hash what is on disk, then seed it
                   f"--check-integrity={'true' if seed else 'false'}",
                   "--file-allocation=none", "--summary-interval=0", "--console-log-level=notice",
                   f"--on-bt-download-complete={self._hook()}", str(torrent)])


class Ctorrent(Client):
    """Enhanced CTorrent: no DHT, no PEX to turn off; `-X` runs a command on completion."""
    name = binary = "ctorrent"
    talks_to_its_own_address = False
    stop_timeout = 3.0  # after serving a peer it outlives SIGTERM by 15 s and more

    def _start(self, torrent: Path, directory: Path, *, seed: bool) -> None:
        # It keeps its bitfield beside the .torrent: a copy in its own directory.
        local = self.home / torrent.name
        shutil.copyfile(torrent, local)
        name = _torrent_name(torrent)
        self._run(["ctorrent", "-e", "1", "-i", self.ip, "-p", str(self.port), "-X", f"touch {self.marker}",
                   "-s", str(directory / name), str(local)])


class Rtorrent(Client):
    """rtorrent in daemon mode (no terminal), its own rc file, a finished event that runs the hook."""
    name = binary = "rtorrent"

    def _start(self, torrent: Path, directory: Path, *, seed: bool) -> None:
        session = self.home / "session"
        session.mkdir(exist_ok=True)
        rc = self.home / "rtorrent.rc"
        rc.write_text("\n".join([
            f"directory.default.set = {directory}",
            f"session.path.set = {session}",
            f"network.bind_address.set = {self.ip}",
            f"network.local_address.set = {self.ip}",
            f"network.port_range.set = {self.port}-{self.port}",
            "network.port_random.set = no",
            "dht.mode.set = disable",
            "protocol.pex.set = no",
            "trackers.use_udp.set = no",
            "system.daemon.set = true",
            f'method.set_key = event.download.finished, btswarm_finished, "execute.nothrow = {self._hook()}"',
            # rtorrent 0.9.8 queues its `completed` announce and never sends it: the tracker would
            # count it as a leecher until its next regular announce. Announce every 5 s instead.
            'schedule2 = btswarm_announce, 5, 5, "d.multicall2 = main, d.tracker_announce="',
            # a data directory that holds the files already is hash-checked, then seeded
            f'schedule2 = btswarm_load, 0, 0, "load.start_verbose = {torrent}"',
            f'log.open_file = "main", {self.home / "rtorrent.log"}',
            'log.add_output = "info", "main"',
            'log.add_output = "tracker_debug", "main"',
            "",
        ]))
        self._run(["rtorrent", "-n", "-o", f"import={rc}"])


class Qbittorrent(Client):
    """qbittorrent-nox with its own profile; torrents added and watched through its Web API on loopback."""
    name = "qbittorrent"
    binary = "qbittorrent-nox"

    def __init__(self, home: Path, ip: str, procs) -> None:
        super().__init__(home, ip, procs)
        self.web_port = free_port("127.0.0.1")
        self.api = f"http://127.0.0.1:{self.web_port}/api/v2"

    def _start(self, torrent: Path, directory: Path, *, seed: bool) -> None:
        profile = self.home / "profile"
        conf = profile / "qBittorrent" / "config"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "qBittorrent.conf").write_text(qbittorrent_conf(self.ip, self.port, self.web_port, directory))
        self._run(["qbittorrent-nox", f"--profile={profile}"])
        wait_for(lambda: self._call("GET", "/app/version") or self._exited(), 30, "qBittorrent's Web API",
                 interval=0.2)
        form = aiohttp.FormData()
        form.add_field("torrents", torrent.read_bytes(), filename=torrent.name,
                       content_type="application/x-bittorrent")
        form.add_field("savepath", str(directory))
        assert self._call("POST", "/torrents/add", form) == "Ok.", self.log()[-2000:]

    def finished(self) -> bool:
        info = self._call("GET", "/torrents/info", json_answer=True)
        return bool(info) and all(t["progress"] >= 1 and t["state"] in UPLOADING for t in info)

    def _call(self, method: str, path: str, data=None, json_answer: bool = False):
        async def go():
            try:
                async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as s:
                    async with s.request(method, self.api + path, data=data) as r:
                        if r.status != 200:
                            return None
                        return await (r.json() if json_answer else r.text())
            except (aiohttp.ClientError, asyncio.TimeoutError):
                return None
        return asyncio.run(go())


UPLOADING = {"uploading", "stalledUP", "queuedUP", "forcedUP", "pausedUP"}


def qbittorrent_conf(ip: str, port: int, web_port: int, save: Path) -> str:
    """qBittorrent 4.5's settings for a federation on loopback (docs/clients.md explains each)."""
    return f"""[LegalNotice]
Accepted=true

[BitTorrent]
Session\\DHTEnabled=false
Session\\PeXEnabled=false
Session\\LSDEnabled=false
Session\\Port={port}
Session\\Interface=lo
Session\\InterfaceName=lo
Session\\InterfaceAddress={ip}
Session\\MultiConnectionsPerIp=true
Session\\BTProtocol=TCP
Session\\QueueingSystemEnabled=false
Session\\AddTrackersEnabled=false
Session\\DefaultSavePath={save}
Session\\TempPathEnabled=false

[Preferences]
Connection\\UPnP=false
General\\Locale=en
WebUI\\Address=127.0.0.1
WebUI\\Port={web_port}
WebUI\\UseUPnP=false
WebUI\\LocalHostAuth=false
WebUI\\AuthSubnetWhitelistEnabled=true
WebUI\\AuthSubnetWhitelist=127.0.0.0/8
WebUI\\CSRFProtection=false
WebUI\\HostHeaderValidation=false
"""


CLASSES = {c.name: c for c in (Aria2c, Ctorrent, Rtorrent, Qbittorrent)}


def make(name: str, home: Path, ip: str, procs) -> Client:
    return CLASSES[name](home, ip, procs)


def _torrent_name(torrent: Path) -> str:
    from torrents import metainfo

    return metainfo.parse(torrent.read_bytes(), subject=str(torrent)).name
