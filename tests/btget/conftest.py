"""Fixtures for bt-get tests: sample datasets with their .torrents, real seeds and nginx (stopped by PID)."""

from __future__ import annotations

import itertools
import os
import random
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import free_port, wait_for
from torrents import build, sample
from torrents.metainfo import Metainfo

HERE = Path(__file__).parent
# Seeds get their own 127.0.0.x; a random start keeps parallel test sessions apart.
_ADDRESSES = itertools.count(random.Random(os.getpid()).randrange(20, 200))


@dataclass(frozen=True)
class SampleDataset:
    root: Path  # DATA/NAME
    torrent: Path
    meta: Metainfo

    @property
    def data(self) -> Path:
        return self.root.parent

    @property
    def name(self) -> str:
        return self.meta.name


def next_ip() -> str:
    return f"127.0.{next(_ADDRESSES) % 250 + 1}.{random.randrange(2, 250)}"


def make_dataset(base: Path, files: int, total_size: int) -> SampleDataset:
    """A generated sample dataset under base/data and its .torrent beside it."""
    root = sample.generate(base / "data", files=files, total_size=total_size)
    data, meta = build.build_torrent(root.name, [(p.name, p) for p in sorted(root.iterdir())])
    torrent = base / f"{root.name}.torrent"
    torrent.write_bytes(data)
    return SampleDataset(root, torrent, meta)


@pytest.fixture(scope="session")
def dataset(tmp_path_factory) -> SampleDataset:
    """12 files, about 24 MiB (256 KiB pieces: ~100 of them, enough to kill mid-way)."""
    return make_dataset(tmp_path_factory.mktemp("dataset"), 12, 24 * 2**20)


def start_seed(procs, ds: SampleDataset, upload_rate: int = 0) -> str:
    """Start a seed of `ds` on its own 127.0.x.y with the `procs` fixture; return its 'ip:port'."""
    ip = next_ip()
    port = free_port(ip)
    label = f"seed-{ip}-{port}"
    proc = procs.start(label, [sys.executable, str(HERE / "seed_helper.py"), "--ip", ip, "--port", str(port),
                               "--torrent", str(ds.torrent), "--data", str(ds.data),
                               "--upload-rate", str(upload_rate)])
    wait_for(lambda: "READY" in proc.log() or proc.popen.poll() is not None, timeout=20, what="seed ready")
    assert "READY" in proc.log(), proc.log()
    return proc.log().split("READY ", 1)[1].split()[0]


@pytest.fixture
def seed(procs, dataset):
    """seed(upload_rate=0) → 'ip:port' of a running seed of `dataset` (stopped by PID at teardown)."""

    def start(upload_rate: int = 0) -> str:
        return start_seed(procs, dataset, upload_rate)

    return start


@pytest.fixture(scope="session")
def small_dataset(tmp_path_factory) -> SampleDataset:
    """6 files, about 4 MiB (16 pieces of 256 KiB): for tests of a path, not of throughput."""
    return make_dataset(tmp_path_factory.mktemp("small-dataset"), 6, 4 * 2**20)


@pytest.fixture
def small_seed(procs, small_dataset):
    """small_seed(upload_rate=0) → 'ip:port' of a running seed of `small_dataset` (stopped by PID)."""

    def start(upload_rate: int = 0) -> str:
        return start_seed(procs, small_dataset, upload_rate)

    return start


@pytest.fixture
def nginx(procs, tmp_path):
    """nginx(root) → 'http://127.0.0.1:PORT/' serving `root`: a real nginx, `daemon off;`, its own -c
    config and -p prefix under tmp_path, started as a child process and stopped by PID at teardown."""

    def start(root: Path) -> str:
        prefix = tmp_path / f"nginx-{len(procs)}"
        (prefix / "logs").mkdir(parents=True)
        (prefix / "tmp").mkdir()
        port = free_port("127.0.0.1")
        # As root, nginx's workers would drop to `nobody`, which cannot read pytest's 0700 temp dirs.
        user = "user root root;\n" if os.geteuid() == 0 else ""
        conf = prefix / "nginx.conf"
        conf.write_text(f"""daemon off;
{user}worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/logs/error.log;
events {{ worker_connections 64; }}
http {{
  access_log {prefix}/logs/access.log;
  sendfile on;
  client_body_temp_path {prefix}/tmp; proxy_temp_path {prefix}/tmp; fastcgi_temp_path {prefix}/tmp;
  uwsgi_temp_path {prefix}/tmp; scgi_temp_path {prefix}/tmp;
  server {{ listen 127.0.0.1:{port}; root {root}; }}
}}
""")
        proc = procs.start(f"nginx-{port}", [shutil.which("nginx") or "/usr/sbin/nginx", "-c", str(conf),
                                             "-p", str(prefix)])
        url = f"http://127.0.0.1:{port}/"
        wait_for(lambda: _listening("127.0.0.1", port) or proc.popen.poll() is not None, timeout=20,
                 what="nginx to listen")
        assert proc.popen.poll() is None, f"nginx exited {proc.popen.returncode}: {proc.log()}"
        return url

    return start


def _listening(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


