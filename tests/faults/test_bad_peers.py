"""Hostile peers against real sites: a peer that serves corrupt bytes (and keeps coming back)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from btswarm.trees import compare_trees
from tests.faults.conftest import bt_get_popen, get_json, make_data, start_throttled
from tests.support import wait_for
from torrents import metainfo

pytestmark = pytest.mark.slow

RATE = 1_000_000  # bytes/s per site: the transfer lasts seconds, and the corrupt peer is the fastest
BAD_IP = "127.0.0.50"
CORRUPT_PEER = Path(__file__).with_name("corrupt_peer.py")


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad-peers")
    (data,) = make_data(tmp, files=8, size=8 * 2**20)
    fed = start_throttled(tmp, RATE, "--sites", "2", "--data", str(data), "--idle-ttl", "3s", "--heartbeat", "1s")
    yield fed
    assert fed.stop(timeout=30) == 0, fed.log()[-3000:]


def corrupt_copy(source: Path, dest: Path, meta: metainfo.Metainfo) -> Path:
    """A copy of the dataset with one byte flipped in every piece (sizes unchanged)."""
    copy = dest / source.name
    shutil.copytree(source, copy)
    offset = 0
    for f in meta.files:
        if f.pad:
            offset += f.length
            continue
        path = copy / f.lfn
        data = bytearray(path.read_bytes())
        first = -offset % meta.piece_length  # the first piece boundary inside this file
        for at in range(first + 100, len(data), meta.piece_length):
            data[at] ^= 0xFF
        path.write_bytes(bytes(data))
        offset += f.length
    return dest


def test_corrupting_peer_is_banned_and_the_download_is_correct(fed, procs, tmp_path, record_property):
    torrent = tmp_path / "dataset.torrent"
    torrent.write_bytes(fed.torrent(fed.dataset))
    meta = metainfo.parse(torrent.read_bytes(), subject=str(torrent))
    bad_dir = corrupt_copy(fed.source, tmp_path / "bad", meta)
    bad = procs.start("corrupt-peer", [sys.executable, str(CORRUPT_PEER), str(torrent), str(bad_dir), BAD_IP])
    wait_for(lambda: _line(bad, "port"), 20, "the corrupt peer to listen")
    wait_for(lambda: get_json(f"{fed.tracker_url}/api/swarms/{meta.info_hash}")["seeds"] >= 1, 20,
             "the corrupt peer to be a seed of the swarm", interval=0.2)

    proc = bt_get_popen(fed, tmp_path / "out", "--json", "--stall-timeout", "60")
    out, err = proc.communicate(timeout=120)
    bad.popen.terminate()
    bad.popen.wait(10)
    sent_by_bad = _line(bad, "uploaded")
    assert proc.returncode == 0, err
    doc = json.loads(out)
    assert compare_trees(fed.source, tmp_path / "out" / fed.dataset) == []

    # Banned once, by address: back from another port, it is not let in again.
    assert len(doc["banned"]) == 1 and doc["banned"][0].startswith(f"{BAD_IP}:"), doc["banned"]
    assert doc["hash_failures"] >= 1
    # A site that sent blocks of a piece the bad peer spoiled took part in that failure too (libtorrent's
    # count); the bad peer in at least one, at most all.
    by_source = doc["hash_failures_by_source"]
    bad_failures = sum(n for s, n in by_source.items() if s.startswith(f"{BAD_IP}:"))
    assert 1 <= bad_failures <= doc["hash_failures"], by_source
    redownloaded = doc["bytes_downloaded"] - doc["bytes_redundant"] - doc["bytes_total"]
    record_property("corrupt_peer", {"sent": sent_by_bad, "redownloaded": redownloaded,
                                     "hash_failures": doc["hash_failures"], "banned": doc["banned"],
                                     "sources": doc["sources"]})
    print(f"corrupt peer: sent {sent_by_bad} bytes, bt-get re-downloaded {redownloaded} "
          f"({redownloaded / max(1, sent_by_bad):.2f}x), hash failures {doc['hash_failures']} "
          f"(piece {meta.piece_length}), by source {doc['hash_failures_by_source']}, banned {doc['banned']}, "
          f"sources {doc['sources']}")
    assert sent_by_bad > 0, "the corrupt peer sent nothing: the test proved nothing"
    assert 0 < redownloaded < 2 * sent_by_bad
    # Its bytes are counted as its own, not a site's.
    assert sum(n for s, n in doc["sources"].items() if s.startswith(f"{BAD_IP}:")) >= meta.piece_length


def _line(proc, key: str):
    for line in proc.log().splitlines():
        if line.startswith("{"):
            value = json.loads(line).get(key)
            if value is not None:
                return value
    return None
