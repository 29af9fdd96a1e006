"""A site's own XRootD door (Debian's xrootd-server with xrootd-scitokens-plugins) accepts the same tokens:
it fetches the keys of the same real issuer over https, reads with the right scope, refuses the others;
bt-get's relay puts the token on its requests to the door, and a member's fetch from the door alone ends whole."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
import pytest

from btrepo.app import create_app
from btrepo.config import RepoConfig
from btswarm.testbed.issuer import AUDIENCE
from tests.access.issuer_support import access_for
from tests.btget.getsupport import bt_get_async, same_bytes
from tests.btget.test_door_xrootd import xrootd_door  # noqa: F401
from tests.repo.repo_support import SECRETS, publish, publish_body
from tests.support import free_port
from torrents import sample
from torrents.build import build_torrent

pytestmark = pytest.mark.slow
SCITOKENS = next(iter(Path("/usr/lib").glob("*/libXrdAccSciTokens-5.so")), None)
NAME = "atlas:data18.door.r1"


@pytest.fixture
def door(xrootd_door, issuer, pki, tmp_path):
    """A door serving DATA/atlas/NAME/LFN that authorizes with the federation's tokens (nothing without one)."""
    if SCITOKENS is None:
        pytest.skip("needs Debian's xrootd-scitokens-plugins (scripts/install-system-deps.sh)")
    root = sample.generate(tmp_path / "door" / "atlas", name=NAME, files=5, total_size=2_000_000)
    # The plugin maps storage.read:/atlas to /atlas under base_path, as the federation's path /scope/name.
    scitokens = (f"[Global]\naudience = {AUDIENCE}\nonmissing = deny\n\n"
                 f"[Issuer btswarm]\nissuer = {issuer.url}\nbase_path = /\ndefault_user = nobody\n")
    url = xrootd_door(tmp_path / "door", ca=pki.ca, files={"scitokens.cfg": scitokens}, extra=(
        "ofs.authorize 1\nofs.authlib libXrdAccSciTokens.so config={home}/scitokens.cfg\n"
        "http.header2cgi Authorization authz\n"))
    return url, root


async def test_the_door_reads_with_the_right_token_only(door, issuer):
    url, root = door
    path = sorted(root.iterdir())[0]
    file_url = f"{url}atlas/{NAME}/{path.name}"
    async with aiohttp.ClientSession() as http:
        for headers in ({}, {"Authorization": f"Bearer {issuer.mint('storage.read:/cms')}"},
                        {"Authorization": f"Bearer {issuer.mint('storage.read:/atlas', aud='https://other')}"}):
            async with http.get(file_url, headers=headers) as r:
                assert r.status == 403 and await r.read() != path.read_bytes()
        async with http.get(file_url, headers={"Authorization": f"Bearer {issuer.mint('storage.read:/atlas')}"}) as r:
            assert (r.status, await r.read()) == (200, path.read_bytes())


async def test_a_member_fetches_from_the_door_alone(door, issuer, pki, aiohttp_server, tmp_path, monkeypatch):
    url, root = door
    repo = await aiohttp_server(create_app(RepoConfig(state=str(tmp_path / "repo"), site_secrets=SECRETS,
                                                      tracker=f"http://127.0.0.1:{free_port()}"),
                                           access=access_for(issuer, pki, "atlas")), host="127.0.0.1")
    repo_url = str(repo.make_url("")).rstrip("/")
    data, meta = build_torrent(NAME, [(p.name, p) for p in sorted(root.iterdir())])
    files = [{"lfn": f.lfn, "size": f.length, "adler32": None} for f in meta.data_files]
    async with aiohttp.ClientSession() as http:
        status, answer = await publish(http, repo_url, NAME, publish_body(
            data, meta, files, did={"scope": "atlas", "name": NAME.split(":")[1]}))
    assert status == 201, answer
    for var in ("BEARER_TOKEN", "BEARER_TOKEN_FILE"):
        monkeypatch.delenv(var, raising=False)
    token = tmp_path / "token"
    token.write_text(issuer.mint("storage.read:/atlas"))
    out = tmp_path / "out"
    code, stdout, err = await bt_get_async(NAME, "--repo", repo_url, "-o", str(out), "--token-file", str(token),
                                           "--web-seed", f"{url}atlas/", "--web-seeds-always", "--timeout", "60",
                                           "--json", timeout=90)
    assert code == 0, err
    doc = json.loads(stdout)
    for path in sorted(root.iterdir()):
        assert same_bytes(path, Path(doc["directory"]) / path.name), path.name
