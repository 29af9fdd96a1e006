"""bt-get resolving a NAME through a repository (a stand-in serving docs/contracts.md's read routes)."""

from __future__ import annotations

import json
import zlib

import pytest

from tests.btget.getsupport import bt_get_async
from tests.btget.repo_standin import create_app

pytestmark = pytest.mark.slow


def adler32(path) -> str:
    return f"{zlib.adler32(path.read_bytes()) & 0xFFFFFFFF:08x}"


def publish(directory, dataset, *, corrupt: str | None = None) -> None:
    """Write NAME.json (record with adler32s) and NAME.torrent as the repository would serve them."""
    files = [{"lfn": f.lfn, "size": f.length,
              "adler32": "00000000" if f.lfn == corrupt else adler32(dataset.root / f.lfn)}
             for f in dataset.meta.files]
    record = {"name": dataset.name, "info_hash": dataset.meta.info_hash, "total_size": dataset.meta.total_size,
              "file_count": len(files), "sites": ["site1"], "description": "", "files": files,
              "torrent_url": f"/datasets/{dataset.name}.torrent", "swarm": None}
    (directory / f"{dataset.name}.json").write_text(json.dumps(record))
    (directory / f"{dataset.name}.torrent").write_bytes(dataset.torrent.read_bytes())


async def test_name_from_repo_downloads_and_verifies_adler32(aiohttp_server, dataset, seed, tmp_path):
    repo_dir = tmp_path / "repo"
    repo_dir.mkdir()
    publish(repo_dir, dataset)
    server = await aiohttp_server(create_app(repo_dir), host="127.0.0.1")
    peer = seed()
    # the repository URL from $BTSWARM_GET_REPO, as a batch job's environment would set it
    code, out, err = await bt_get_async(dataset.name, "-o", str(tmp_path / "out"), "--peer", peer, "--json",
                                  env={"BTSWARM_GET_REPO": str(server.make_url(""))})
    assert code == 0, err
    doc = json.loads(out)
    assert {f["status"] for f in doc["files"]} == {"verified"}
    for f in dataset.meta.files:
        assert (tmp_path / "out" / dataset.name / f.lfn).read_bytes() == (dataset.root / f.lfn).read_bytes()


async def test_checksum_mismatch_exits_5(aiohttp_server, dataset, seed, tmp_path):
    repo_dir = tmp_path / "repo"
    repo_dir.mkdir()
    bad = dataset.meta.files[3].lfn
    publish(repo_dir, dataset, corrupt=bad)
    server = await aiohttp_server(create_app(repo_dir), host="127.0.0.1")
    code, out, err = await bt_get_async(dataset.name, "--repo", str(server.make_url("")), "-o", str(tmp_path / "out"),
                                  "--peer", seed(), "--json")
    assert code == 5, err
    assert err.strip().splitlines()[-1] == f"bt-get: error: {bad}: adler32 does not match the catalog"
    doc = json.loads(out)
    assert doc["exit_status"] == "VERIFY_FAILED"
    assert [f["lfn"] for f in doc["files"] if f["status"] == "corrupt"] == [bad]


async def test_unknown_name_exits_3_and_suggests_close_names(aiohttp_server, dataset, tmp_path):
    repo_dir = tmp_path / "repo"
    repo_dir.mkdir()
    publish(repo_dir, dataset)
    server = await aiohttp_server(create_app(repo_dir), host="127.0.0.1")
    typo = dataset.name.replace("tid051203", "tid051208")
    repo = str(server.make_url("")).rstrip("/")
    code, out, err = await bt_get_async(typo, "--repo", repo, "-o", str(tmp_path / "out"), timeout=30)
    assert code == 3, err
    assert out == ""
    assert err.strip() == f"bt-get: error: {typo}: no such dataset in {repo}; did you mean: {dataset.name}"
