"""`btswarm up --restricted`: a members-only federation in one command, used the way its banner says.

`btswarm up` runs as a process (the real issuer, tracker and repository on https, sites seeding SSL
torrents); the test reads the commands off the banner and runs them as a physicist would: `btswarm
token` writes the token where Bearer Token Discovery looks ($XDG_RUNTIME_DIR/bt_u$UID, the test's own
directory), then the banner's bt-get. Without the token: one line, a non-zero exit, nothing written; with
it: the sample's bytes. Stopping `btswarm up` leaves none of its processes.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from btswarm.trees import compare_trees
from tests.e2e.conftest import start_federation
from tests.support import alive, command
from torrents.procs import children

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("restricted")
    fed = start_federation(tmp, "--restricted", "--sample-files", "6", "--sample-size", "12M", "--heartbeat", "1s")
    pids = children(fed.proc.pid)
    try:
        yield fed
    finally:
        assert fed.stop(timeout=30) == 0, fed.log()[-3000:]
    assert len(pids) == 3 + len(fed.sites), pids  # the issuer, the tracker, the repository, each site
    assert not [pid for pid in pids if alive(pid)]


def banner_commands(fed) -> dict[str, list[str]]:
    """The banner's `btswarm token` and `bt-get` lines, as argument lists (comments dropped)."""
    out = {}
    for line in fed.log().split("btswarm federation is up:", 1)[1].splitlines():
        words = shlex.split(line, comments=True)
        if words and words[0] in ("btswarm", "bt-get"):
            out[words[0]] = [command(words[0]), *words[1:]]
    return out


@pytest.fixture
def user(tmp_path):
    """A physicist's environment: a runtime directory of their own, where the token goes."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BEARER_TOKEN")}
    env.update(XDG_RUNTIME_DIR=str(runtime), XDG_STATE_HOME=str(tmp_path / "state"))
    last_place = Path(f"/tmp/bt_u{os.getuid()}")
    assert not last_place.exists(), f"{last_place} holds a token that discovery would find: remove it"
    return env


def _bt_get(args: list[str], out: Path, env: dict) -> subprocess.CompletedProcess:
    args = [*args[:args.index("-o") + 1], str(out), *args[args.index("-o") + 2:]]
    return subprocess.run(args, capture_output=True, text=True, timeout=180, env=env)


def test_the_banner_s_commands_fetch_the_restricted_sample_with_a_token_only(fed, user, tmp_path):
    commands = banner_commands(fed)
    assert set(commands) == {"btswarm", "bt-get"}, fed.log()[-2000:]
    name = fed.dataset
    assert name.startswith("data08_cos:") and commands["bt-get"][1] == name
    # No token: one line naming what is missing, a non-zero exit, nothing written.
    out = _bt_get(commands["bt-get"], tmp_path / "none", user)
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert lines == [f"bt-get: error: {name}: restricted to members: a bearer token with storage.read:/data08_cos "
                     f"is needed; no token found (looked at --token-file, $BEARER_TOKEN, $BEARER_TOKEN_FILE, "
                     f"$XDG_RUNTIME_DIR/bt_u{os.getuid()}, /tmp/bt_u{os.getuid()})"], out.stderr
    assert not (tmp_path / "none").exists()
    # The token, as the banner says; then the same bt-get: the sample's bytes.
    got = subprocess.run(commands["btswarm"], capture_output=True, text=True, timeout=60, env=user)
    assert got.returncode == 0, got.stderr
    token = Path(user["XDG_RUNTIME_DIR"]) / f"bt_u{os.getuid()}"
    assert oct(token.stat().st_mode & 0o777) == "0o600" and token.read_text().count(".") == 2  # a JWT
    out = _bt_get(commands["bt-get"], tmp_path / "member", user)
    assert out.returncode == 0, out.stderr[-3000:]
    # Its torrent started once it had its certificate: the tracker answered its first announce, no warning.
    assert "warning" not in out.stderr, out.stderr
    assert compare_trees(fed.source, tmp_path / "member" / name) == []


def test_token_print_and_a_federation_without_members(fed, tmp_path):
    printed = subprocess.run([command("btswarm"), "token", "--state", str(fed.state), "--print", "--scope", "atlas"],
                             capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0 and printed.stdout.count(".") == 2, printed.stderr
    (tmp_path / "ready.json").write_text(fed.ready.to_json().replace('"members"', '"no_members"'))
    out = subprocess.run([command("btswarm"), "token", "--state", str(tmp_path)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode != 0
    assert out.stderr.strip() == (f"btswarm: error: {tmp_path}: its federation restricts nothing (start it with "
                                  "`btswarm up --restricted`)")
