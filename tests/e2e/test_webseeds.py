"""BitTorrent blocked by a firewall: the dataset arrives from the sites' web seeds, and from peers again once they open.

A real federation (`btswarm up --site-link`) in its private network
namespace, each site with its own replica; nftables in that namespace drops
TCP to the sites' peer ports (the SYNs time out, as behind a campus
firewall) while their HTTP listeners stay open. What a user would check:
exit 0, the bytes, where they came from (`sources`), when bt-get switched,
and what it said.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from btswarm import topology
from btswarm.testbed import firewall
from btswarm.trees import compare_trees
from tests.e2e.conftest import start_federation
from tests.support import command, verified_bytes, wait_for
from torrents import metainfo, sample

pytestmark = pytest.mark.slow

RATE = "8mbit"  # per site: a 24 MiB dataset takes ~12 s from both web seeds, time enough to unblock mid-way
# Jumbo frames: with lo's 64 KiB packets a queue of an 8 Mbit/s link holds four, and one of the relay's
# flows from a site went 30 s without a byte (a full run; btswarm/shaping.py LO_MTU)
MTU = "9000"


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root: a private network namespace, tc shaping and nftables")
    if shutil.which("nft") is None:
        pytest.fail("nft is not installed (scripts/install-system-deps.sh installs nftables)")
    tmp = tmp_path_factory.mktemp("webseeds")
    root = sample.generate(tmp / "data1", files=8, total_size=24 * 2**20)
    shutil.copytree(tmp / "data1", tmp / "data2")  # site2's own replica (the corrupted-range test damages it)
    f = start_federation(tmp, "--sites", "2", "--data", str(tmp / "data1"), "--data", str(tmp / "data2"),
                         "--heartbeat", "1s", "--site-link", RATE, "--client-link", "100mbit", "--link-mtu", MTU,
                         "--client-addresses", "4")
    f.replica2 = tmp / "data2" / root.name
    lo = subprocess.run(["ip", "-n", f.netns, "link", "show", "lo"], capture_output=True, text=True).stdout
    assert f" mtu {MTU} " in lo, lo
    yield f
    assert f.stop(timeout=30) == 0, f.log()[-3000:]


@pytest.fixture
def blocked(fed):
    """The sites' peer ports dropped inside the namespace for the test (and open again afterwards)."""
    firewall.block(fed.netns, [s.peer for s in fed.sites])
    yield
    firewall.unblock(fed.netns)


def start_bt_get(fed, out: Path, client: int, *args: str) -> subprocess.Popen:
    with fed.inside():
        return subprocess.Popen([command("bt-get"), fed.dataset, "--repo", fed.repo, "-o", str(out), "--json", "-v",
                                 "--listen", topology.client_ip(client), "--timeout", "120", *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish(proc: subprocess.Popen) -> tuple[dict, str]:
    try:
        stdout, stderr = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, stderr[-3000:]
    return json.loads(stdout), stderr


def test_blocked_peer_ports_the_dataset_arrives_identical_from_the_web_seeds_of_both_sites(fed, blocked, tmp_path):
    doc, stderr = finish(start_bt_get(fed, tmp_path, 0))
    assert compare_trees(fed.source, tmp_path / fed.dataset) == []
    sources = doc["sources"]
    assert sources.get("web seed site1", 0) > 0 and sources.get("web seed site2", 0) > 0, sources
    assert not any(k in sources for k in ("site1", "site2")), sources  # not a byte over the peer wire
    [switch] = doc["web_seed_switches"]
    # Noticed while the first connection attempts still wait for an answer (the firewall drops the SYNs).
    assert switch["to"] == "web seeds" and switch["after_s"] < 5, switch
    assert "peer ports blocked?; fetching from the web seeds of site1" in switch["why"] and "site2" in switch["why"]


def test_unblocking_mid_transfer_moves_the_rest_back_to_peers(fed, blocked, tmp_path):
    size = sum(p.stat().st_size for p in fed.source.iterdir())

    def web(key: str) -> int:
        with fed.inside():  # the sites' addresses exist only in the namespace
            return sum(fed.site_status(s.name)["web"][key] for s in fed.sites)

    with fed.inside():
        meta = metainfo.parse(fed.torrent(fed.dataset))
    proc = start_bt_get(fed, tmp_path, 1)
    lines: list[str] = []
    at_switch: list[int] = []

    def read_stderr() -> None:  # -v says when the web seeds are dropped: count the web requests made by then
        for line in proc.stderr:
            lines.append(line)
            if "web seeds: none" in line:
                at_switch.append(web("requests"))

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        # Counted on the T3's disk, not by what the sites wrote: on 8 Mbit/s links megabytes of that
        # still sit in the sites' socket and qdisc buffers (a fifth written, 2.4 MB arrived, in one run).
        wait_for(lambda: verified_bytes(meta, tmp_path / fed.dataset) >= size / 8 or proc.poll() is not None,
                 timeout=60, interval=0.2, what="an eighth of the dataset verified on disk from the web seeds")
        assert proc.poll() is None, "".join(lines)
        firewall.unblock(fed.netns)
        stdout = proc.stdout.read()
        assert proc.wait(150) == 0, "".join(lines)[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    reader.join(10)
    doc = json.loads(stdout)
    assert compare_trees(fed.source, tmp_path / fed.dataset) == []
    sources = doc["sources"]
    from_web = sources.get("web seed site1", 0) + sources.get("web seed site2", 0)
    from_peers = sources.get("site1", 0) + sources.get("site2", 0)
    # An eighth had arrived from the web seeds when the firewall opened, more was on its way; peers are asked
    # again at most PROBE_EVERY (5 s) later and take the rest (the web seeds send 10 MB at most in those 5 s).
    assert from_web >= size / 10 and from_peers >= size / 4, sources
    assert [s["to"] for s in doc["web_seed_switches"]] == ["web seeds", "peers"], doc["web_seed_switches"]
    # Once back on peers, no further request reaches a web seed.
    assert len(at_switch) == 1 and web("requests") - at_switch[0] <= 2, (at_switch, web("requests"))


def test_a_web_seed_serving_a_corrupted_range_is_caught_by_the_piece_hash_and_dropped(fed, blocked, tmp_path):
    originals = {}
    for path in sorted(fed.replica2.iterdir()):  # site2's replica rots after it was hashed and published
        data = path.read_bytes()
        originals[path] = data
        rotten = bytearray(data)
        for off in range(0, len(rotten), 1 << 20):
            rotten[off:off + 64] = bytes(b ^ 0xFF for b in rotten[off:off + 64])
        path.write_bytes(bytes(rotten))
    try:
        doc, stderr = finish(start_bt_get(fed, tmp_path, 2))
    finally:
        for path, data in originals.items():
            path.write_bytes(data)
    assert compare_trees(fed.source, tmp_path / fed.dataset) == []
    assert doc["hash_failures"] > 0
    site2 = fed.site("site2").web_url.split("//")[1]
    assert (f"bt-get: warning: web seed site2 ({site2}) sent pieces that failed their SHA1 check: dropped"
            in stderr), (doc["sources"], doc["hash_failures"], stderr[-3000:])
    sources = doc["sources"]
    assert sources.get("web seed site1", 0) > sources.get("web seed site2", 0), sources
