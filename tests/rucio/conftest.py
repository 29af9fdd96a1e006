"""A real Rucio server (the PyPI `rucio` package, btswarm/localrucio.py) for the whole session.

Started once (about 4 s: SQLite schema, base VO, root account, the REST
server under werkzeug on a free loopback port) and stopped at the end of
the session whatever happens. Tests keep out of each other's way with
names of their own: `unique()` for scopes and RSEs.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
from pathlib import Path

import pytest

from btswarm.localrucio import LocalRucio

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
