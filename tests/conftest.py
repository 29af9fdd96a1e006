"""Fixtures for every test; the helpers themselves are in tests/support.py."""

from __future__ import annotations

import os
import signal

import pytest

from tests.support import Proc

# bt-get listens on every address by default, as a host on a real network must. On this one host that would
# include the machine's own network addresses, which the tests must never hand out as peers: every bt-get
# here listens on loopback unless a test says otherwise (the hosts test bed runs the default, in namespaces
# whose only addresses are loopback-range).
os.environ.setdefault("BTSWARM_GET_LISTEN", "127.0.0.1")

# A suite started in the background of a script (`make test &`, nohup) inherits SIGINT ignored, and every
# process it starts would too (an ignored signal survives exec): bt-get would not see the Ctrl-C that the
# tests of Ctrl-C send. Taking SIGINT here gives the processes started from now on its default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """A real redis-server (Debian's) on 127.0.0.1, a free port and a private directory; stopped by PID."""
    from btswarm.redisserver import RedisServer
    from torrents.errors import BtswarmError

    try:
        server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    except BtswarmError as exc:
        pytest.fail(f"{exc} (make deps installs it)")
    yield server
    server.stop()
