"""bt-get's token discovery (btget/bearer.py): the WLCG Bearer Token Discovery order, files read anew."""

from __future__ import annotations

import os

import pytest

from btget import bearer
from torrents.errors import UsageError


def test_the_discovery_order(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "bt_u42").write_text("from-runtime\n")
    named = tmp_path / "named"
    named.write_text("from-file")
    env = {"XDG_RUNTIME_DIR": str(run), "BEARER_TOKEN": "from-env", "BEARER_TOKEN_FILE": str(named)}
    assert bearer.discover(str(named), env, 42).current() == "from-file"  # the option first
    assert bearer.discover(None, env, 42).current() == "from-env"
    assert bearer.discover(None, {**env, "BEARER_TOKEN": ""}, 42).where == str(named)
    source = bearer.discover(None, {"XDG_RUNTIME_DIR": str(run)}, 42)
    assert (source.where, source.current()) == (str(run / "bt_u42"), "from-runtime")
    nobody = 987_654  # a uid with no /tmp/bt_u file on this machine
    if not os.path.exists(f"/tmp/bt_u{nobody}"):
        assert bearer.discover(None, {"XDG_RUNTIME_DIR": str(run)}, nobody) is None


def test_a_file_is_read_anew_each_time(tmp_path):
    f = tmp_path / "token"
    f.write_text("first")
    source = bearer.discover(str(f), {}, 1)
    assert source.header() == {"Authorization": "Bearer first"}
    f.write_text("renewed\n")
    assert source.header() == {"Authorization": "Bearer renewed"}
    f.unlink()
    assert source.header() == {}


def test_a_named_file_that_cannot_be_used_is_an_error_naming_it(tmp_path):
    with pytest.raises(UsageError, match=r"--token-file .*absent: cannot read \(No such file or directory\)"):
        bearer.discover(str(tmp_path / "absent"), {}, 1)
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(UsageError, match=r"\$BEARER_TOKEN_FILE .*empty: empty: no token in it"):
        bearer.discover(None, {"BEARER_TOKEN_FILE": str(empty)}, 1)


def test_what_a_refusal_says():
    assert bearer.refused_text("needs a token", None, {"XDG_RUNTIME_DIR": "/run/user/7"}, 7) == (
        "needs a token; no token found (looked at --token-file, $BEARER_TOKEN, $BEARER_TOKEN_FILE, "
        "$XDG_RUNTIME_DIR/bt_u7, /tmp/bt_u7)")
    assert bearer.refused_text("expired", bearer.TokenSource("$BEARER_TOKEN", value="x")) == (
        "expired (the token from $BEARER_TOKEN)")
