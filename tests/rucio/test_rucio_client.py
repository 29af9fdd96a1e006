"""bt-server's side of Rucio (btserver.rucio_client, rucio_sync) against the real local server."""

from __future__ import annotations

import json
import os
import subprocess

import aiohttp
import pytest

from btserver import rucio_sync
from btserver.holdings import Catalog
from btserver.config import RucioConfig
from btserver.rucio_client import RucioClient, RucioNotFound, RucioRefused, RucioUnavailable
from tests.rucio.conftest import make_files, unique
from tests.support import command, http_ok, wait_for
from torrents.did import DID
from torrents.errors import ConfigError
from torrents.procs import free_port


@pytest.fixture(scope="module")
def holdings(local_rucio, tmp_path_factory):
    """A scope with two complete datasets and one with a file missing, at one RSE."""
    tmp = tmp_path_factory.mktemp("holdings")
    rse, other, scope = unique("RC"), unique("RCO"), unique("rc")
    prefix = local_rucio.add_rse(rse, tmp / "rse")
    local_rucio.add_rse(other, tmp / "other")
    local_rucio.add_scope(scope)
    for name, sizes in {"rc.ds1": {"a.root": 3000, "b.root": 20}, "rc.ds2": {"c.root": 10}}.items():
        local_rucio.register_dataset(rse, scope, name, make_files(tmp / name, sizes))
    # rc.partial: d.root here, e.root only at another RSE
    part = make_files(tmp / "partial", {"d.root": 5, "e.root": 6})
    local_rucio.register_files(rse, scope, local_rucio.place(rse, scope, {"d.root": part / "d.root"}))
    local_rucio.register_files(other, scope, local_rucio.place(other, scope, {"e.root": part / "e.root"}))
    local_rucio.add_dataset(scope, "rc.partial", ["d.root", "e.root"])
    return {"rse": rse, "scope": scope, "prefix": prefix, "tmp": tmp}


def config(local_rucio, holdings, **changes) -> RucioConfig:
    values = dict(server=local_rucio.url, account="root", username="btswarm",
                  password_file=str(local_rucio.password_file), rse=holdings["rse"],
                  datasets=(f"{holdings['scope']}:rc.*",),
                  pfn_map={f"file://localhost{holdings['prefix']}/": f"{holdings['prefix']}/"},
                  refresh=60.0, timeout=10.0, retry_min=1.0)
    values.update(changes)
    return RucioConfig(**values)


async def test_a_refresh_offers_the_complete_datasets_with_rucio_checksums_and_local_paths(local_rucio, holdings):
    cat = await rucio_sync.fetch_once(config(local_rucio, holdings))
    scope = holdings["scope"]
    assert [d.name for d in cat.datasets] == [f"{scope}:rc.ds1", f"{scope}:rc.ds2"]
    ds1 = cat.datasets[0]
    assert ds1.did == DID(scope, "rc.ds1")
    rucio_files = {f["name"]: f for f in local_rucio.client().list_files(scope, "rc.ds1")}
    for f in ds1.files:
        assert (f.size, f.adler32) == (rucio_files[f.lfn]["bytes"], rucio_files[f.lfn]["adler32"])
        (path,) = f.pfns
        assert path.startswith(str(holdings["prefix"]) + f"/{scope}/") and os.path.getsize(path) == f.size
    # the partial one is withheld, with the reason for its file
    assert [str(p) for p in cat.problems] == [
        f"{scope}:rc.partial/e.root: no replica at {holdings['rse']}",
        f"{scope}:rc.partial: 1 of 2 files not usable at {holdings['rse']}; not served until complete"]


async def test_exact_dids_and_unknown_ones(local_rucio, holdings):
    scope = holdings["scope"]
    cfg = config(local_rucio, holdings, datasets=(f"{scope}:rc.ds2", f"{scope}:rc.nothere", "nosuchscope:x*"))
    cat = await rucio_sync.fetch_once(cfg)
    assert [d.name for d in cat.datasets] == [f"{scope}:rc.ds2"]
    text = " | ".join(str(p) for p in cat.problems)
    assert f"{scope}:rc.nothere: not in Rucio (HTTP 404 DataIdentifierNotFound" in text
    assert "nosuchscope:x*: matches no dataset in Rucio" in text


async def test_containers_named_or_matched_list_their_datasets_nested_ones_too(local_rucio, holdings):
    scope = holdings["scope"]
    c = local_rucio.client()
    tag = unique("")
    inner, middle, outer = f"rc.cont.a{tag}", f"rc.cont.b{tag}", f"rc.cont.top{tag}"
    for name in (inner, middle, outer):
        c.add_container(scope, name)
    c.attach_dids(scope, inner, [{"scope": scope, "name": "rc.ds2"}])
    c.attach_dids(scope, middle, [{"scope": scope, "name": "rc.ds1"}, {"scope": scope, "name": "rc.partial"}])
    c.attach_dids(scope, outer, [{"scope": scope, "name": inner}, {"scope": scope, "name": middle}])
    every = (f"{scope}:rc.ds1", f"{scope}:rc.ds2", f"{scope}:rc.partial")
    # named alone: the container stands for its datasets, served as any (the partial one withheld)
    cat = await rucio_sync.fetch_once(config(local_rucio, holdings, datasets=(f"{scope}:{outer}",)))
    assert [d.name for d in cat.datasets] == [f"{scope}:rc.ds1", f"{scope}:rc.ds2"]
    assert cat.containers == {f"{scope}:{outer}": every}
    assert any(str(p).startswith(f"{scope}:rc.partial/e.root: no replica") for p in cat.problems)
    # matched by a pattern: every container it matches, each dataset listed whether served here or not
    cat = await rucio_sync.fetch_once(config(local_rucio, holdings, datasets=(f"{scope}:rc.cont.*{tag}",)))
    assert cat.datasets == ()  # the pattern matches containers only: their datasets are not named
    assert cat.containers == {f"{scope}:{inner}": (f"{scope}:rc.ds2",),
                              f"{scope}:{middle}": (f"{scope}:rc.ds1", f"{scope}:rc.partial"),
                              f"{scope}:{outer}": every}
    assert cat.problems == ()  # matching containers only is no "matches no dataset"


async def test_wrong_credentials_are_refused_in_rucio_words(local_rucio, holdings, tmp_path):
    bad = tmp_path / "pw"
    bad.write_text("not-the-password")
    with pytest.raises(RucioRefused) as err:
        await rucio_sync.fetch_once(config(local_rucio, holdings, password_file=str(bad)))
    assert str(err.value) == (f"account root: {local_rucio.url} refused the userpass credentials (HTTP 401 "
                              "CannotAuthenticate: Cannot authenticate to account root with given credentials)")


async def test_a_token_file_is_used_as_is_and_a_bad_token_is_refused(local_rucio, holdings, tmp_path):
    async with aiohttp.ClientSession() as http:
        token = await RucioClient(http, config(local_rucio, holdings)).token()
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    cfg = config(local_rucio, holdings, password_file="", username="", account="", token_file=str(token_file))
    assert len((await rucio_sync.fetch_once(cfg)).datasets) == 2
    token_file.write_text("root-btswarm-unknown-0123456789abcdef")
    with pytest.raises(RucioRefused, match="Rucio refused the token"):
        await rucio_sync.fetch_once(cfg)


async def test_nobody_listening_is_unavailable(local_rucio, holdings):
    with pytest.raises(RucioUnavailable, match="cannot reach"):
        await rucio_sync.fetch_once(config(local_rucio, holdings, server=f"http://127.0.0.1:{free_port()}"))


async def test_an_unknown_dataset_is_not_found(local_rucio, holdings):
    async with aiohttp.ClientSession() as http:
        with pytest.raises(RucioNotFound):
            await RucioClient(http, config(local_rucio, holdings)).dataset_files(DID(holdings["scope"], "nope"))


def test_bad_configurations_are_errors_naming_the_key(local_rucio, holdings):
    for changes, key in [({"rse": ""}, "rse"), ({"datasets": ()}, "datasets"), ({"pfn_map": {}}, "pfn_map"),
                         ({"datasets": ("noscope",)}, "datasets"), ({"server": "ftp://x"}, "server"),
                         ({"password_file": "", "password": ""}, "username"),
                         ({"token_file": "/t"}, "token_file"), ({"pfn_map": {"": "/x/"}}, "pfn_map"),
                         ({"pfn_map": {"root://d//x/": "relative/"}}, "pfn_map 'root://d//x/'"),
                         ({"pfn_map": {"root://d//x/": "/a/../b/"}}, "pfn_map 'root://d//x/'"),
                         ({"refresh": 0.0}, "refresh")]:
        with pytest.raises(ConfigError) as err:
            config(local_rucio, holdings, **changes)
        assert err.value.subject == key, (changes, str(err.value))
    assert RucioConfig().server == ""  # unset: nothing else is asked for


async def test_the_loop_keeps_the_last_catalog_backs_off_and_saves_a_snapshot(local_rucio, holdings, tmp_path):
    got: list[Catalog] = []

    async def on_catalog(cat: Catalog) -> None:
        got.append(cat)

    async with aiohttp.ClientSession() as http:
        sync = rucio_sync.RucioSync(config(local_rucio, holdings), http, tmp_path, on_catalog)
        assert sync.load_snapshot() is None
        assert await sync.refresh_once() and sync.state.state == "ok" and sync.delay(True) == 60.0
        assert len(got[0].datasets) == sync.state.datasets == 2 and sync.state.withheld == [
            f"{holdings['scope']}:rc.partial"]
        saved = json.loads((tmp_path / "rucio-snapshot.json").read_text())
        assert [d["did"]["name"] for d in saved["datasets"]] == ["rc.ds1", "rc.ds2"]
        # Rucio gone: the refresh fails, nothing is handed on, the retries back off
        sync.client.base = f"http://127.0.0.1:{free_port()}"
        delays = []
        for _ in range(3):
            assert not await sync.refresh_once()
            delays.append(sync.delay(False))
        assert sync.state.state == "unreachable" and sync.state.failures == 3 and len(got) == 1
        assert delays == [1.0, 2.0, 4.0]
        assert sync.state.problem().startswith("rucio: http://127.0.0.1:")
    # a restart while Rucio is down serves what the snapshot says
    async with aiohttp.ClientSession() as http:
        again = rucio_sync.RucioSync(config(local_rucio, holdings), http, tmp_path, on_catalog)
        assert again.load_snapshot() == got[0] and again.state.snapshot_from is not None


def test_a_site_with_wrong_credentials_says_so_in_its_status_and_log(local_rucio, holdings, procs, tmp_path):
    port = free_port()
    bad = tmp_path / "pw"
    bad.write_text("wrong")
    conf = tmp_path / "site.toml"
    conf.write_text(f"""
[server]
site = "rsite"
listen = "127.0.0.1:{port}"
peer_listen = "127.0.0.1:0"
state = "{tmp_path / 'state'}"
tracker = ""
repo = ""
[server.rucio]
server = "{local_rucio.url}"
account = "root"
username = "btswarm"
password_file = "{bad}"
rse = "{holdings['rse']}"
datasets = ["{holdings['scope']}:rc.*"]
pfn_map = {{"file://localhost{holdings['prefix']}/" = "{holdings['prefix']}/"}}
retry_min = 1
""")
    proc = procs.start("site", [command("bt-server"), "run", "--config", str(conf)])
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: http_ok(f"{url}/healthz") or proc.popen.poll() is not None, 30, "bt-server to answer")
    from btswarm.federation import get_json

    status = wait_for(lambda: (lambda s: s if s["rucio"]["failures"] >= 2 else None)(get_json(f"{url}/api/status")),
                      30, "two refused refreshes")
    assert status["rucio"]["state"] == "refused"
    assert "refused the userpass credentials" in status["rucio"]["error"]
    assert any(p.startswith("rucio: account root:") for p in status["problems"])
    assert status["datasets"] == []
    assert "ERROR" in proc.log() and "refused the userpass credentials" in proc.log()
    shown = subprocess.run([command("bt-server"), "status", "--url", url], capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0 and f"rucio refused  {local_rucio.url}  RSE {holdings['rse']}" in shown.stdout
