"""bt-get with members-only datasets: the real command, a real repository app, real tokens over https."""

from __future__ import annotations

import json
import os
from pathlib import Path

import aiohttp
import pytest

from btrepo.app import create_app
from btrepo.config import RepoConfig
from tests.access.issuer_support import access_for
from tests.btget.conftest import start_seed
from tests.btget.getsupport import bt_get_async, same_bytes
from tests.repo.repo_support import SECRETS, publish, publish_body
from tests.support import free_port, until
from torrents import sample
from torrents.build import build_torrent

pytestmark = pytest.mark.slow

SECRET_DS = "atlas:data18_13TeV.sample.r1"
OPEN_DS = "cms:Run2012B.sample.r1"
UID = os.getuid()


def dataset_named(base: Path, name: str):
    root = sample.generate(base / "data", name=name, files=3, total_size=600_000)
    data, meta = build_torrent(name, [(p.name, p) for p in sorted(root.iterdir())])
    (base / f"{name}.torrent").write_bytes(data)
    return root, data, meta


@pytest.fixture
async def federation(aiohttp_server, tmp_path, issuer, pki):
    """A repository holding SECRET_DS (scope atlas, restricted) and OPEN_DS; each dataset's files on disk."""
    config = RepoConfig(state=str(tmp_path / "state"), tracker=f"http://127.0.0.1:{free_port()}",
                        site_secrets=SECRETS)
    server = await aiohttp_server(create_app(config, access=access_for(issuer, pki, "atlas")), host="127.0.0.1")
    url = str(server.make_url("")).rstrip("/")
    made = {}
    async with aiohttp.ClientSession() as session:
        for name in (SECRET_DS, OPEN_DS):
            root, data, meta = dataset_named(tmp_path / "sites", name)
            scope, _, short = name.partition(":")
            files = [{"lfn": f.lfn, "size": f.length, "adler32": None} for f in meta.data_files]
            status, answer = await publish(session, url, name, publish_body(data, meta, files,
                                                                            did={"scope": scope, "name": short}))
            assert status == 201, answer
            made[name] = (root, meta)
    return url, made


@pytest.fixture
def runtime(tmp_path, monkeypatch):
    """$XDG_RUNTIME_DIR of this test, and no token in the environment."""
    for var in ("BEARER_TOKEN", "BEARER_TOKEN_FILE"):
        monkeypatch.delenv(var, raising=False)
    if Path(f"/tmp/bt_u{UID}").exists():
        pytest.skip(f"/tmp/bt_u{UID} exists on this machine: the discovery would find someone's token")
    d = tmp_path / "run"
    d.mkdir(mode=0o700)
    return d


def env_for(runtime: Path, **more: str) -> dict:
    return {"XDG_RUNTIME_DIR": str(runtime), **more}


def nothing_written(out: Path) -> bool:
    return not out.exists() or not any(out.iterdir())


async def test_no_token_one_line_non_zero_nothing_written(federation, runtime, tmp_path):
    url, _ = federation
    out = tmp_path / "out"
    code, stdout, err = await bt_get_async(SECRET_DS, "--repo", url, "-o", str(out), env=env_for(runtime))
    assert code == 1 and stdout == ""
    assert err == (f"bt-get: error: {SECRET_DS}: restricted to members: a bearer token with storage.read:/atlas "
                   f"is needed; no token found (looked at --token-file, $BEARER_TOKEN, $BEARER_TOKEN_FILE, "
                   f"$XDG_RUNTIME_DIR/bt_u{UID}, /tmp/bt_u{UID})\n")
    assert nothing_written(out)


async def test_each_bad_token_is_one_line_naming_what_is_wrong(federation, runtime, tmp_path, issuer, stranger):
    url, _ = federation
    out = tmp_path / "out"
    token_file = tmp_path / "token"
    cases = [
        (issuer.mint("storage.read:/atlas", lifetime=-7200), "bt-get: error: token: expired at "),
        (issuer.mint("storage.read:/cms"), f"bt-get: error: {SECRET_DS}: the token may not read it: it needs "
                                           "storage.read:/atlas (the token has storage.read:/cms)"),
        (stranger.mint("storage.read:/atlas"), f"bt-get: error: token: issuer {stranger.url} is not trusted here"),
        (issuer.mint("storage.read:/atlas", aud="https://elsewhere"), "bt-get: error: token: audience "
                                                                     "'https://elsewhere' is not"),
    ]
    for token, start in cases:
        token_file.write_text(token + "\n")
        code, stdout, err = await bt_get_async(SECRET_DS, "--repo", url, "-o", str(out), "--token-file",
                                               str(token_file), env=env_for(runtime))
        assert code == 1 and err.startswith(start) and err.count("\n") == 1, err
        assert err.endswith(f"(the token from {token_file})\n"), err
        assert nothing_written(out)


async def test_a_member_fetches_the_bytes_and_a_public_dataset_needs_no_token(federation, runtime, tmp_path,
                                                                            issuer, procs):
    url, made = federation
    # the physicist's token where oidc-agent's helpers write it: found without a flag
    (runtime / f"bt_u{UID}").write_text(issuer.mint("storage.read:/atlas"))
    for name, env in ((SECRET_DS, env_for(runtime)), (OPEN_DS, env_for(tmp_path / "no-token-here"))):
        root, meta = made[name]
        torrent = root.parent.parent / f"{name}.torrent"
        ds = type("DS", (), {"torrent": torrent, "data": root.parent})
        peer = start_seed(procs, ds)
        out = tmp_path / f"out-{name.split(':')[0]}"
        code, stdout, err = await bt_get_async(name, "--repo", url, "-o", str(out), "--peer", peer,
                                               "--timeout", "60", "--json", env=env, timeout=90)
        assert code == 0, err
        doc = json.loads(stdout)
        assert doc["info_hash"] == meta.info_hash and doc["directory"].startswith(str(out))
        for f in meta.data_files:
            assert same_bytes(root / f.lfn, Path(doc["directory"]) / f.lfn), f.lfn


async def test_search_lists_restricted_datasets_only_to_a_token_that_reads_them(federation, runtime, tmp_path,
                                                                               issuer):
    url, _ = federation
    code, out, err = await bt_get_async("--search", "sample", "--repo", url, "--json", env=env_for(runtime))
    assert code == 0, err
    assert [d["name"] for d in json.loads(out)["datasets"]] == [OPEN_DS]
    env = env_for(runtime, BEARER_TOKEN=issuer.mint("storage.read:/atlas"))
    code, out, err = await bt_get_async("--search", "sample", "--repo", url, "--json", env=env)
    assert code == 0, err
    assert sorted(d["name"] for d in json.loads(out)["datasets"]) == sorted([SECRET_DS, OPEN_DS])
    env = env_for(runtime, BEARER_TOKEN=issuer.mint("storage.read:/atlas", lifetime=-7200))
    code, out, err = await bt_get_async("--search", "sample", "--repo", url, env=env)
    assert code == 1 and err.startswith("bt-get: error: token: expired at ") and "$BEARER_TOKEN" in err, err


async def test_a_token_file_that_cannot_be_read_is_named(federation, runtime, tmp_path):
    url, _ = federation
    code, _, err = await bt_get_async(OPEN_DS, "--repo", url, "--token-file", str(tmp_path / "absent"),
                                      env=env_for(runtime))
    assert code == 2 and err == (f"bt-get: error: --token-file {tmp_path / 'absent'}: cannot read "
                                 "(No such file or directory)\n")


async def test_a_token_whose_key_the_issuer_withdrew_stops_new_fetches(aiohttp_server, tmp_path, issuer, pki,
                                                                       runtime):
    config = RepoConfig(state=str(tmp_path / "state"), tracker=f"http://127.0.0.1:{free_port()}",
                        site_secrets=SECRETS)
    server = await aiohttp_server(create_app(config, access=access_for(issuer, pki, "atlas", keys_lifetime=1)),
                                  host="127.0.0.1")
    url = str(server.make_url("")).rstrip("/")
    _, data, meta = dataset_named(tmp_path / "sites", SECRET_DS)
    files = [{"lfn": f.lfn, "size": f.length, "adler32": None} for f in meta.data_files]
    async with aiohttp.ClientSession() as session:
        status, answer = await publish(session, url, SECRET_DS, publish_body(
            data, meta, files, did={"scope": "atlas", "name": SECRET_DS.split(":")[1]}))
        assert status == 201, answer
        leaked = issuer.mint("storage.read:/atlas", lifetime=3600)
        env = env_for(runtime, BEARER_TOKEN=leaked)
        code, out, err = await bt_get_async(SECRET_DS, "--repo", url, "--list-files", env=env)
        assert code == 0, err
        issuer.rotate()

        async def refused():  # the repository fetches the keys again within keys_lifetime (1 s)
            async with session.get(f"{url}/api/datasets/{SECRET_DS}",
                                   headers={"Authorization": f"Bearer {leaked}"}) as r:
                return r.status == 401
        await until(refused, timeout=15, what="the withdrawn key to stop verifying", interval=0.2)
    out_dir = tmp_path / "out"
    code, out, err = await bt_get_async(SECRET_DS, "--repo", url, "-o", str(out_dir), env=env)
    assert code == 1 and err.startswith("bt-get: error: token: signed with key ") and "does not publish" in err, err
    assert err.endswith("(the token from $BEARER_TOKEN)\n") and nothing_written(out_dir)
