"""Members-only datasets through the real commands: bt-tracker, bt-repo and a bt-server as processes, each
reading [access] from its own configuration file, a real issuer over https, bt-get fetching from the peers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest

from btswarm.testbed.issuer import AUDIENCE
from tests.btget.getsupport import bt_get_async, same_bytes
from tests.deploy.deployment import Deployment
from tests.support import until
from torrents import urls
from torrents.sample import generate

pytestmark = pytest.mark.slow
SECRET_DS, OPEN_DS = "atlas:data18.services.r1", "cosmics.services.r1"


@pytest.fixture
async def federation(tmp_path, issuer, pki):
    data = tmp_path / "data"
    for name in (SECRET_DS, OPEN_DS):
        generate(data, name=name, files=3, total_size=900_000, seed=len(name))
    access = {"access": {"restricted": ["atlas"], "issuers": {issuer.url: AUDIENCE}, "ca_file": str(pki.ca)}}
    dep = Deployment(tmp_path / "fed", data, sites=1, shared=access, extra={"site1": {"web_listen": "127.0.0.2:0"}})
    # The processes start while this loop waits in a thread: the issuer (on this loop) answers meanwhile.
    await asyncio.get_running_loop().run_in_executor(None, dep.__enter__)
    try:
        # Listed without a token: the public dataset only; the restricted one is there for a member.
        await asyncio.get_running_loop().run_in_executor(None, dep.published, 1)
        member = {"Authorization": f"Bearer {issuer.mint('storage.read:/atlas')}"}
        async with aiohttp.ClientSession() as http:
            async def both():
                async with http.get(f"{dep.repo_url}/api/datasets", headers=member) as r:
                    return r.status == 200 and (await r.json())["total"] == 2
            await until(both, timeout=60, what="both datasets published", interval=0.2)
        yield dep, data
    finally:
        await asyncio.get_running_loop().run_in_executor(None, dep.stop)


async def test_the_commands_read_access_and_a_member_fetches(federation, issuer, tmp_path, monkeypatch):
    dep, data = federation
    for var in ("BEARER_TOKEN", "BEARER_TOKEN_FILE"):
        monkeypatch.delenv(var, raising=False)
    token = issuer.mint("storage.read:/atlas")
    status = dep.get_json(f"{dep.control_url(dep.sites[0])}/api/status")
    web_seed = status["web_seeds"][0]
    lfn = sorted(p.name for p in (data / SECRET_DS).iterdir())[0]
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{dep.repo_url}/api/datasets/{SECRET_DS}") as r:
            assert r.status == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")
        member = {"Authorization": f"Bearer {token}"}
        async with http.get(f"{dep.repo_url}/api/datasets/{SECRET_DS}", headers=member) as r:
            assert r.status == 200 and (await r.json())["restricted"] is True
        async with http.get(f"{dep.repo_url}/api/datasets") as r:
            assert [d["name"] for d in (await r.json())["datasets"]] == [OPEN_DS]
        async with http.get(web_seed + urls.web_seed_path(SECRET_DS, lfn)) as r:
            assert r.status == 401
        async with http.get(web_seed + urls.web_seed_path(SECRET_DS, lfn), headers=member) as r:
            assert (r.status, await r.read()) == (200, (data / SECRET_DS / lfn).read_bytes())
    out = tmp_path / "out"
    code, _, err = await bt_get_async(SECRET_DS, "--repo", dep.repo_url, "-o", str(out), "--timeout", "60",
                                      env={"XDG_RUNTIME_DIR": str(tmp_path)}, timeout=90)
    assert code == 1 and "restricted to members" in err and not out.exists()
    for name, env in ((SECRET_DS, {"BEARER_TOKEN": token}), (OPEN_DS, {"XDG_RUNTIME_DIR": str(tmp_path)})):
        code, stdout, err = await bt_get_async(name, "--repo", dep.repo_url, "-o", str(out), "--timeout", "60",
                                               "--json", env=env, timeout=90)
        assert code == 0, err
        doc = json.loads(stdout)
        for path in sorted((data / name).iterdir()):
            assert same_bytes(path, Path(doc["directory"]) / path.name), path.name
