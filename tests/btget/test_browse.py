"""bt-get --list-files and --search against the real bt-repo app (real SQLite, signed publishes).

The adler32 column comes from the repository's record (a site with a catalog
publishes them); the end-to-end runs against a whole federation are in
tests/e2e/test_shell.py.
"""

from __future__ import annotations

import json

import aiohttp
import pytest

from btrepo.app import create_app
from btrepo.config import RepoConfig
from tests.btget.getsupport import bt_get_async
from tests.repo.repo_support import SECRETS, make_replica, publish, publish_body
from tests.support import free_port

NAME = "data08_cos.00091949.physics_IDCosmic.merge.DPD_IDCOMM.o4_r653_p26_tid051203"
FILES = {"DPD_IDCOMM.051203._00001.pool.root.1": 40_000, "DPD_IDCOMM.051203._00002.pool.root.1": 1_500_000,
         "DPD_IDCOMM.051203._00003.pool.root.1": 25}


@pytest.fixture
async def repo(aiohttp_server, tmp_path):
    """A real repository holding NAME with its catalog's adler32s; its tracker is down (seeds unknown)."""
    config = RepoConfig(state=str(tmp_path / "state"), tracker=f"http://127.0.0.1:{free_port()}",
                        site_secrets=SECRETS)
    server = await aiohttp_server(create_app(config), host="127.0.0.1")
    torrent, meta, files = make_replica(tmp_path / "data", NAME, FILES, catalog=True)
    url = str(server.make_url("")).rstrip("/")
    async with aiohttp.ClientSession() as session:
        status, answer = await publish(session, url, NAME, publish_body(torrent, meta, files))
    assert status == 201, answer
    return url, meta, {f["lfn"]: f["adler32"] for f in files}


async def test_list_files_prints_lfn_size_and_the_catalogs_adler32(repo):
    url, meta, adler = repo
    code, out, err = await bt_get_async(NAME, "--list-files", "--repo", url, timeout=30)
    assert (code, err) == (0, "")
    lfns = sorted(FILES)
    assert out.splitlines() == [
        f"{NAME}  {meta.info_hash}",
        "    SIZE    BYTES  ADLER32   LFN",
        f"39.1 KiB    40000  {adler[lfns[0]]}  {lfns[0]}",
        f" 1.4 MiB  1500000  {adler[lfns[1]]}  {lfns[1]}",
        f"    25 B       25  {adler[lfns[2]]}  {lfns[2]}",
        "total: 3 files, 1.5 MiB (1540025 bytes)",
    ]


async def test_list_files_shows_what_files_would_pick_and_json_parses(repo):
    url, meta, adler = repo
    code, out, err = await bt_get_async("--list-files", NAME, "--files", "*._0000[13].*", "--repo", url, "--json",
                                        timeout=30)
    assert code == 0, err
    doc = json.loads(out)
    lfns = sorted(FILES)
    assert doc == {"name": NAME, "info_hash": meta.info_hash, "file_count": 2, "of": 3, "total_size": 40_025,
                   "files": [{"lfn": lfns[0], "size": 40_000, "adler32": adler[lfns[0]]},
                             {"lfn": lfns[2], "size": 25, "adler32": adler[lfns[2]]}]}
    code, out, err = await bt_get_async(NAME, "--list-files", "--nrandom", "1", "--seed", "7", "--repo", url,
                                        timeout=30)
    assert code == 0, err
    assert out.splitlines()[0] == f"{NAME}  {meta.info_hash}  (1 of 3 files chosen)"
    assert out.splitlines()[-1].startswith("total: 1 file, ")


async def test_list_files_of_an_unknown_name_is_not_found(repo):
    url, _, _ = repo
    typo = NAME.replace("tid051203", "tid051208")
    code, out, err = await bt_get_async(typo, "--list-files", "--repo", url, timeout=30)
    assert (code, out) == (3, "")
    assert err.strip() == f"bt-get: error: {typo}: no such dataset in {url}; did you mean: {NAME}"


async def test_search_when_the_tracker_is_down_shows_unknown_seeds(repo):
    url, meta, _ = repo
    code, out, err = await bt_get_async("--search", "IDCOMM", "--repo", url, timeout=30)
    assert code == 0, err
    assert out.splitlines() == ["   SIZE  FILES  SEEDS  T2     T3  DATASET",
                                f"1.5 MiB      3      ?  site1  -   {NAME}"]
    assert err == "bt-get: note: seeds '?': the repository could not ask the tracker\n"


async def test_usage_mistakes(repo):
    url, _, _ = repo
    cases = [
        (("--search", "cosmic", NAME), "bt-get: error: --search: takes one QUERY and no TARGET (quote several "
                                       f"words: --search 'cosmic {NAME}')"),
        (("--search", "cosmic", "--share"), "bt-get: error: --search: not with --share"),
        ((NAME, "--list-files", "--share"), "bt-get: error: --list-files: not with --share (--list-files "
                                            "downloads nothing)"),
        ((), "bt-get: error: TARGET: missing: a dataset NAME, a FILE.torrent, a URL or a magnet (or --search "
             "QUERY to find one)"),
    ]
    for args, message in cases:
        code, out, err = await bt_get_async(*args, "--repo", url, timeout=30)
        assert (code, out, err.strip()) == (2, "", message), args
