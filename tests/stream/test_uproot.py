"""uproot reads real ROOT files (scikit-hep-testdata) straight from the swarm, through bt-get --serve.

Three ways in: uproot's own HTTP source on http://127.0.0.1:PORT/NAME/LFN,
fsspec's btswarm:// filesystem given the server, and btswarm:// starting a
server by itself. Each gives the arrays of the local original, and fetches
from peers only the pieces holding what uproot asked for (plus read-ahead).
"""

from __future__ import annotations

import subprocess
import sys

import fsspec
import numpy as np
import pytest

from btget.swarmread.streaming import PieceMap
from torrents import metainfo
from tests.stream.conftest import DATASET

uproot = pytest.importorskip("uproot")
pytestmark = pytest.mark.slow

NTUPLE, TREE, BRANCH = "uproot-issue63.root", "WtLoop_nominal", "eventNumber"  # 157 branches, 4.8 MB


def fetched_bound(served, meta: metainfo.Metainfo) -> int:
    """Bytes of the pieces holding every range the server was asked for, plus what it read ahead."""
    pm = PieceMap.of(meta)
    index = {f.lfn: i for i, f in enumerate(meta.files)}
    pieces: set[int] = set()
    for lfn, start, end in served.status()["ranges"]:
        pieces.update(pm.pieces(index[lfn], start, end))
    return sum(pm.piece_size(p) for p in pieces)


def test_one_branch_over_http_is_the_original_and_fetches_only_its_pieces(root_federation, serve, tmp_path):
    fed = root_federation
    s = serve(DATASET, "--repo", fed.repo, "-o", str(tmp_path / "out"), "--no-prefetch")
    meta = metainfo.parse(fed.torrent(DATASET))
    with uproot.open(s.url + NTUPLE, handler=uproot.source.http.HTTPSource) as f:
        first = f[TREE][BRANCH].array(entry_stop=1, library="np")
        remote = f[TREE][BRANCH].array(library="np")
        asked = f.file.source.num_requested_bytes
    with uproot.open(fed.source / NTUPLE) as f:
        local = f[TREE][BRANCH].array(library="np")
        branch_bytes = f[TREE][BRANCH].compressed_bytes
    assert first[0] == local[0] and np.array_equal(remote, local) and len(local) == 9812

    st = s.status()
    # The server saw at least what uproot counts (uproot's counter leaves out its first reads).
    assert sum(e - b for _, b, e in st["ranges"]) >= asked > 0
    unique = st["swarm"]["downloaded"] - st["swarm"]["redundant"]
    bound = fetched_bound(s, meta)
    assert 0 < unique <= bound, (unique, bound)
    # One branch of 157: a small part of the file came over the network.
    size = (fed.source / NTUPLE).stat().st_size
    assert branch_bytes < 0.01 * size and unique < 0.25 * size, (unique, size)


def test_btswarm_urls_through_fsspec(root_federation, serve, tmp_path):
    fed = root_federation
    s = serve(DATASET, "--repo", fed.repo, "-o", str(tmp_path / "out"), "--no-prefetch")
    server = s.base
    fs = fsspec.filesystem("btswarm", server=server)
    assert sorted(fs.ls(DATASET, detail=False)) == sorted(f"{DATASET}/{p.name}" for p in fed.source.iterdir())
    assert fs.size(f"{DATASET}/{NTUPLE}") == (fed.source / NTUPLE).stat().st_size
    with fsspec.open(f"btswarm://{DATASET}/uproot-HZZ.root", server=server) as f:
        f.seek(100)
        assert f.read(1000) == (fed.source / "uproot-HZZ.root").read_bytes()[100:1100]
    with pytest.raises(FileNotFoundError):
        fs.size(f"{DATASET}/no-such.root")

    # uproot's default source for a URL it does not know is fsspec: btswarm:// works as is.
    with uproot.open(f"btswarm://{DATASET}/uproot-issue96.root:tree", server=server) as tree:
        remote = tree.arrays(["EventNumber", "jet1TrksChg"])
    with uproot.open(fed.source / "uproot-issue96.root") as f:
        local = f["tree"].arrays(["EventNumber", "jet1TrksChg"])
    assert remote.to_list() == local.to_list() and len(local) == 13607


def test_btswarm_url_starts_its_own_server(root_federation, tmp_path):
    """With no server given, the filesystem runs `bt-get NAME --serve` itself, and stops it at exit."""
    fed = root_federation
    cache = tmp_path / "cache"
    script = f"""
import json, sys, uproot
from btget.swarmread import swarmfs
tree = uproot.open("btswarm://{DATASET}/uproot-Zmumu.root:events", repo={fed.repo!r}, cache={str(cache)!r})
print(json.dumps({{"E1": tree["E1"].array(library="np").tolist(),
                  "pids": [p.pid for p, _ in swarmfs.LAUNCHED.servers.values()]}}))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    import json
    doc = json.loads(result.stdout)
    with uproot.open(fed.source / "uproot-Zmumu.root") as f:
        assert doc["E1"] == f["events"]["E1"].array(library="np").tolist()
    assert len(doc["pids"]) == 1
    from tests.support import alive
    assert not alive(doc["pids"][0])  # stopped with the process that started it
    assert (cache / DATASET / "uproot-Zmumu.root").exists()  # the pieces stay for next time
