"""A real Rucio server (the PyPI `rucio` package, btswarm/localrucio.py) for the whole session.

Started once (about 4 s: SQLite schema, base VO, root account, the REST
server under werkzeug on a free loopback port) and stopped at the end of
the session whatever happens. Tests keep out of each other's way with
names of their own: `unique()` for scopes and RSEs. `fed`: a federation
on it (`btswarm up --rucio`, two sites), one for each test module using it.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import subprocess
from pathlib import Path

import pytest

from btswarm import federation as fedlib
from btswarm.localrucio import LocalRucio
from tests.support import command, wait_for

_counter = itertools.count(1)


def unique(prefix: str) -> str:
    """A scope or RSE name no other test of this session uses (RSE names must be upper case)."""
    return f"{prefix}{os.getpid() % 1000}{next(_counter)}"


def make_files(directory: Path, sizes: dict[str, int]) -> Path:
    """Files of random bytes: name → size."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, size in sizes.items():
        (directory / name).write_bytes(os.urandom(size))
    return directory


@pytest.fixture(scope="session")
def local_rucio(tmp_path_factory) -> LocalRucio:
    try:  # the server module itself reads a rucio.cfg on import: only look for it
        found = importlib.util.find_spec("rucio.web.rest.flaskapi.v1.main") is not None
    except ImportError:
        found = False
    if not found:
        pytest.skip("needs the Rucio server package: pip install -e '.[rucio]' (make test installs it)")
    server = LocalRucio(tmp_path_factory.mktemp("rucio"))
    try:
        server.start()
        yield server
    finally:
        server.stop()


class RucioFederation(fedlib.Federation):
    def __init__(self, proc: subprocess.Popen, fed: fedlib.Federation, log_path: Path, rucio) -> None:
        super().__init__(fed.ready, proc.pid)
        self.proc, self.log_path, self.rucio = proc, log_path, rucio

    @property
    def scope(self) -> str:
        return self.ready.rucio.scope

    def rse(self, site: str) -> str:
        return self.ready.rucio.rses[site].rse

    def record(self, name: str) -> dict | None:
        try:
            return fedlib.get_json(f"{self.repo}/api/datasets/{name}")
        except OSError:
            return None

    def published_by(self, name: str, sites: list[str], timeout: float = 45.0) -> dict:
        """The repository's record once exactly `sites` hold its current version."""
        return wait_for(lambda: (lambda r: r if r and sorted(r["sites"]) == sorted(sites) else None)(self.record(name)),
                        timeout, f"{name} published by {sites}", interval=0.2)

    def bt_get(self, did: str, out: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([command("bt-get"), did, "--repo", self.repo, "-o", str(out), "--json", *args],
                              capture_output=True, text=True, timeout=timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def fed(local_rucio, tmp_path_factory):
    command("btswarm")
    tmp = tmp_path_factory.mktemp("rucio-fed")
    log_path = tmp / "up.log"
    proc, handle = fedlib.launch(tmp / "state", ["--rucio", "--rucio-dir", str(local_rucio.root),
                                                 "--rucio-scope", unique("fed"), "--rucio-refresh", "1s",
                                                 "--sites", "2", "--sample-files", "6", "--sample-size", "6M",
                                                 "--heartbeat", "1s", "--idle-ttl", "30s"],
                                 ready_file=tmp / "ready.json", log_path=log_path, timeout=120)
    federation = RucioFederation(proc, handle, log_path, local_rucio)
    yield federation
    assert fedlib.stop(proc, timeout=30) == 0, federation.log()[-3000:]
    assert local_rucio.ping()  # another's Rucio (the session's) is left running


def register(fed: RucioFederation, name: str, src: Path, at: dict[str, list[str] | None]) -> None:
    """Place and register src's files at each site's RSE (None: all of them), then create the dataset."""
    r = fed.rucio
    files = {p.name: p for p in sorted(src.iterdir())}
    for site, lfns in at.items():
        chosen = {lfn: files[lfn] for lfn in (lfns if lfns is not None else files)}
        r.register_files(fed.rse(site), fed.scope, r.place(fed.rse(site), fed.scope, chosen))
    r.add_dataset(fed.scope, name, files)
