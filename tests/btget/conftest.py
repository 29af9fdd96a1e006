"""Fixtures for bt-get tests: a sample dataset with its .torrent, real seeds (stopped by PID)."""

from __future__ import annotations

import itertools
import os
import random
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


@pytest.fixture(scope="session")
def dataset(tmp_path_factory) -> SampleDataset:
    """12 files, about 24 MiB (256 KiB pieces: ~100 of them, enough to kill mid-way)."""
    base = tmp_path_factory.mktemp("dataset")
    root = sample.generate(base / "data", files=12, total_size=24 * 2**20)
    data, meta = build.build_torrent(root.name, [(p.name, p) for p in sorted(root.iterdir())])
    torrent = base / f"{root.name}.torrent"
    torrent.write_bytes(data)
    return SampleDataset(root, torrent, meta)


@pytest.fixture
def seed(procs, dataset):
    """seed(upload_rate=0) → 'ip:port' of a running seed of `dataset` (stopped by PID at teardown)."""

    def start(upload_rate: int = 0) -> str:
        ip = next_ip()
        port = free_port(ip)
        label = f"seed-{ip}-{port}"
        proc = procs.start(label, [sys.executable, str(HERE / "seed_helper.py"), "--ip", ip, "--port", str(port),
                                   "--torrent", str(dataset.torrent), "--data", str(dataset.data),
                                   "--upload-rate", str(upload_rate)])
        wait_for(lambda: "READY" in proc.log() or proc.popen.poll() is not None, timeout=20, what="seed ready")
        assert "READY" in proc.log(), proc.log()
        return proc.log().split("READY ", 1)[1].split()[0]

    return start


