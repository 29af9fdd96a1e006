"""bt-get's token discovery (btget/resolve/bearer.py): the WLCG Bearer Token Discovery order, files read anew."""

from __future__ import annotations

import os

import pytest

from btget.resolve import bearer
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


@pytest.mark.parametrize("url, carries", [
    ("https://repo.example.org/api/datasets/x", True), ("http://127.0.0.1:8080/x", True), ("http://[::1]:80/", True),
    ("http://localhost:8080/", True), ("http://repo.example.org/x", False), ("http://192.0.2.5:8701/data/", False),
    ("ftp://127.0.0.1/", False),
])
def test_the_token_never_crosses_a_network_in_clear(url, carries):
    assert bearer.carries_token(url) is carries


def test_a_door_gets_the_token_only_over_https_or_on_loopback():
    from btget.worker.doorrelay import Door

    token = {"Authorization": "Bearer t"}.copy
    assert Door.of("http://127.0.0.2:8701/data/", credentials=token).credentials() == {"Authorization": "Bearer t"}
    assert Door.of("http://door.example:1094/atlas/", credentials=token).credentials() == {}
    door = Door.of("https://door.example/atlas/", credentials=token, tls=object())
    assert (door.port, door.tls is not None, door.credentials()) == (443, True, {"Authorization": "Bearer t"})
    assert bearer.refused_text("needed", bearer.TokenSource("$BEARER_TOKEN", value="x"),
                               withheld_from="http://repo.example") == (
        "needed; the token from $BEARER_TOKEN was not sent: bt-get sends it only over https (or to this host), "
        "and http://repo.example is plain http")
