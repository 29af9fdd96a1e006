"""Every common client from Debian with btswarm, as real processes: qbittorrent-nox, rtorrent, ctorrent, aria2c.

Each one fetches a dataset of a real federation from seeds its sites start on
demand (bytes identical), then, as a T3 running that client would, seeds it on
(a seed of the federation's swarm at the tracker) to a bt-get given its
address; and each seeds a swarm of its own, through an open tracker, to a
bt-get. The bt-get runs on the client's address (but
for ctorrent's, which it refuses to talk to): the client's bytes are credited
to it by address, not to a worker of bt-get.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from btswarm.federation import WaitTimeout, get_bytes, get_json
from btswarm.trees import compare_trees
from tests.clients import thirdparty
from tests.clients.conftest import dataset_name
from tests.support import command, wait_for
from torrents import bencoding, metainfo, sample, urls

pytestmark = pytest.mark.slow

# One address per client (127.0.0.121 and up): none of the federation's, none of btswarm run's.
ADDRESS = {name: f"127.0.0.{121 + k}" for k, name in enumerate(thirdparty.NAMES)}


def bt_get(target: str, out: Path, *args: str, timeout: float = 90) -> dict:
    result = subprocess.run([command("bt-get"), target, "-o", str(out), "--json", "--timeout", "60", *args],
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def swarm(tracker_url: str, info_hash: str) -> dict:
    try:
        return get_json(f"{tracker_url}/api/swarms/{info_hash}")
    except OSError:
        return {}


def seeds_at_sites(fed, info_hash: str) -> int:
    return sum(1 for s in fed.sites for seed in fed.site_status(s.name)["seeds"] if seed["info_hash"] == info_hash)


@pytest.mark.parametrize("name", thirdparty.NAMES)
def test_client_fetches_from_on_demand_seeds_then_seeds_a_bt_get(federation, name, procs, tmp_path):
    fed = federation
    dataset = dataset_name(name)
    info_hash = fed.info_hash(dataset)
    torrent = tmp_path / f"{dataset}.torrent"
    # The repository's .torrent lists the sites' web seeds, which aria2c and qBittorrent use from
    # the start (docs/clients.md); this test is about the peer wire and the seeds started for it.
    torrent.write_bytes(get_bytes(f"{fed.repo}{urls.dataset_torrent(dataset)}?web_seeds=0"))
    assert seeds_at_sites(fed, info_hash) == 0
    sent_before = fed.uploaded_total()

    client = thirdparty.make(name, tmp_path / "client", ADDRESS[name], procs)
    client.fetch(torrent, tmp_path / "client-data")
    client.wait_finished(timeout=60)
    assert compare_trees(fed.data / dataset, tmp_path / "client-data" / dataset) == []
    # The sites count what they sent twice a second.
    wait_for(lambda: fed.uploaded_total() > sent_before, 10, "a site to have sent the client's bytes", interval=0.2)

    # The sites' seeds idle out; the client seeds on, a seed of the swarm at the tracker. It is no site's, so it
    # would not keep a site from being asked (tracker/siteseeds.py): the bt-get it seeds to is given its address
    # and a copy of the .torrent without trackers, so that every byte it gets is the client's.
    try:
        wait_for(lambda: seeds_at_sites(fed, info_hash) == 0, 30, "the sites' seeds to idle out", interval=0.2)
    except WaitTimeout:  # what kept them: their peers and when each was last active
        raise AssertionError([seed for s in fed.sites for seed in fed.site_status(s.name)["seeds"]]) from None
    wait_for(lambda: (s := swarm(fed.tracker_url, info_hash)) and s["seeds"] >= 1 and not s["sites"], 30,
             f"{name} to be the swarm's seed", interval=0.2)
    sent_before = fed.uploaded_total()
    top = bencoding.decode(torrent.read_bytes())
    trackerless = tmp_path / "trackerless.torrent"
    trackerless.write_bytes(bencoding.encode({k: v for k, v in top.items() if k not in (b"announce", b"announce-list")}))
    doc = bt_get(str(trackerless), tmp_path / "bt-get", "--peer", client.endpoint, "--listen", client.peer_address)
    assert compare_trees(fed.data / dataset, tmp_path / "bt-get" / dataset) == []
    # Every byte from the client, named by its address (bt-get shares it): not "other workers", no site.
    assert set(doc["sources"]) == {client.endpoint}, doc["sources"]
    assert fed.uploaded_total() == sent_before
    assert seeds_at_sites(fed, info_hash) == 0
    client.stop()


@pytest.mark.parametrize("name", thirdparty.NAMES)
def test_client_seeds_its_own_swarm_to_a_bt_get(open_tracker, name, procs, tmp_path):
    """A swarm that is no federation's: data and a private .torrent of the user's (mktorrent), an open tracker."""
    source = sample.generate(tmp_path / "data", name=f"thirdparty.{name}", files=3, total_size=2 * 2**20,
                             seed=8000 + thirdparty.NAMES.index(name))
    torrent = tmp_path / "own.torrent"
    subprocess.run(["mktorrent", "-p", "-l", "16", "-a", f"{open_tracker}/announce", "-o", str(torrent),
                    str(source)], check=True, capture_output=True, timeout=60)
    info_hash = metainfo.parse(torrent.read_bytes(), subject=str(torrent)).info_hash

    client = thirdparty.make(name, tmp_path / "client", ADDRESS[name], procs)
    client.seed(torrent, source.parent)
    wait_for(lambda: swarm(open_tracker, info_hash).get("seeds", 0) >= 1, 60, f"{name} to announce its seed",
             interval=0.2)
    doc = bt_get(str(torrent), tmp_path / "bt-get", "--listen", client.peer_address)
    assert compare_trees(source, tmp_path / "bt-get" / source.name) == []
    assert set(doc["sources"]) == {client.endpoint}, doc["sources"]
    client.stop()
