"""Fixtures for every test; the helpers themselves are in tests/support.py."""

from __future__ import annotations

import pytest

from tests.support import Proc


@pytest.fixture
def procs(tmp_path):
    """Start processes with procs.start(name, args...); all are stopped at teardown."""

    class Procs(list):
        def start(self, label: str, args: list[str], env: dict | None = None, cwd: str | None = None) -> Proc:
            p = Proc(args, tmp_path / f"{label}.log", env=env, cwd=cwd)
            self.append(p)
            return p

    started = Procs()
    yield started
    for p in reversed(started):
        p.stop()
