"""A site whose storage hangs while its daemon lives: its replica is read through a `bindfs -f` FUSE
pass-through, whose daemon is SIGSTOPped mid-transfer (every read below the mount blocks; bt-server's
control API and heartbeats go on). The site must say its seed is stuck, the tracker stop handing it out,
a new T3 fetch everything from the other site, and the site recover once the storage answers again.

Shaped links (`btswarm up --site-link`), so that the transfer lasts long enough to be hit mid-way.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote_from_bytes

import pytest

from btswarm import topology
from btswarm.testbed import frozenfs
from btswarm.trees import compare_trees
from tests.faults.conftest import get_json, start_federation
from tests.support import command, wait_for
from torrents import bencoding, sample

pytestmark = pytest.mark.slow

STUCK_AFTER = 4.0  # [server] stuck_after for the sites (seconds)
SIZE = 16 * 2**20


def _need_fuse() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: a private network namespace and tc shaping, a FUSE mount")
    missing = [c for c in ("bindfs", "fusermount3") if shutil.which(c) is None]
    if missing or not os.path.exists("/dev/fuse"):
        pytest.skip(f"needs {', '.join(missing) or '/dev/fuse'} (scripts/install-system-deps.sh installs bindfs)")


def announce_peers(tracker: str, info_hash: str, port: int) -> set[str]:
    """The peers a fresh client's announce gets (compact), as ip:port."""
    q = (f"info_hash={quote_from_bytes(bytes.fromhex(info_hash))}&peer_id=-TT0001-{port:012d}&port={port}"
         "&uploaded=0&downloaded=0&left=1&compact=1&event=started")
    with urllib.request.urlopen(f"{tracker}/announce?{q}", timeout=10) as resp:
        raw = bencoding.decode(resp.read())[b"peers"]
    return {f"{'.'.join(map(str, raw[i:i + 4]))}:{int.from_bytes(raw[i + 4:i + 6], 'big')}"
            for i in range(0, len(raw), 6)}


def stuck_at(fed, site: str) -> list[str]:
    return [s["info_hash"] for s in fed.site_status(site)["stuck"]]


def test_site_with_frozen_storage_is_stuck_dropped_by_the_tracker_and_recovers(tmp_path):
    _need_fuse()
    sample.generate(tmp_path / "data1", files=8, total_size=SIZE)
    replica2, mount = tmp_path / "data2", tmp_path / "data2-fuse"
    shutil.copytree(tmp_path / "data1", replica2)
    procs: list[subprocess.Popen] = []
    with frozenfs.bindfs(replica2, mount, tmp_path / "bindfs.log") as fuse:
        fed = start_federation(tmp_path, "--sites", "2", "--data", str(tmp_path / "data1"), "--data", str(mount),
                               "--heartbeat", "1s", "--site-link", "16mbit", "--client-link", "100mbit",
                               "--client-addresses", "2", env={"BTSWARM_SERVER_STUCK_AFTER": f"{STUCK_AFTER}s"})
        frozen = False
        try:
            with fed.inside():
                ih = fed.info_hash(fed.dataset)
            frozenfs.drop_cached(mount)

            def bt_get(k: int, out: Path) -> subprocess.Popen:
                with fed.inside():
                    p = subprocess.Popen([command("bt-get"), fed.dataset, "--repo", fed.repo, "-o", str(out),
                                          "--json", "--listen", topology.client_ip(k)], stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, start_new_session=True)
                procs.append(p)
                return p

            first = bt_get(0, tmp_path / "out1")
            # Both links are equal: site2 has sent a sixth of the dataset when a third has arrived.
            wait_for(lambda: fed.link_bytes()["127.0.0.3"] >= SIZE / 6 or first.poll() is not None, timeout=30,
                     interval=0.05, what="site2 to send a sixth of the dataset")
            assert first.poll() is None, first.stderr.read()
            os.kill(fuse.pid, signal.SIGSTOP)
            frozen, t_frozen = True, time.monotonic()

            with fed.inside():
                wait_for(lambda: ih in stuck_at(fed, "site2"), timeout=STUCK_AFTER + 5, interval=0.2,
                         what="site2 to say its seed is stuck")
                took = time.monotonic() - t_frozen
                assert stuck_at(fed, "site1") == []
                wait_for(lambda: any(s["name"] == "site2" and s["stuck"] == [ih]
                                     for s in get_json(f"{fed.tracker_url}/api/sites")["sites"]),
                         timeout=5, interval=0.2, what="the tracker to hear that site2 is stuck")
                site2_peer = fed.site_status("site2")["peers"][0]
                handed = announce_peers(fed.tracker_url, ih, 7777)
                assert site2_peer not in handed, handed
                assert get_json(f"{fed.tracker_url}/api/swarms/{ih}")["holders"] == ["site1"]

            second = bt_get(1, tmp_path / "out2")
            for p, out in ((second, tmp_path / "out2"), (first, tmp_path / "out1")):
                stdout, stderr = p.communicate(timeout=60)
                assert p.returncode == 0, stderr[-2000:]
                assert compare_trees(fed.source, out / fed.dataset) == []
                if p is second:
                    sources = json.loads(stdout)["sources"]
                    # Nothing from the stuck site. The rest may come from site1 or from the first T3 alone: with
                    # two T3s the second lets site1 go once the first holds what site1 sends (btget/worker/siteshare.py).
                    assert sources.get("site2", 0) == 0, sources
                    assert sum(sources.values()) >= SIZE * 0.9, sources

            os.kill(fuse.pid, signal.SIGCONT)
            frozen = False
            with fed.inside():
                wait_for(lambda: stuck_at(fed, "site2") == [], timeout=10, interval=0.2,
                         what="site2 to recover once its storage answers")
                wait_for(lambda: all(s["stuck"] == [] for s in get_json(f"{fed.tracker_url}/api/sites")["sites"]),
                         timeout=5, interval=0.2, what="the tracker to hear that site2 recovered")
                assert site2_peer in announce_peers(fed.tracker_url, ih, 7778)
            print(f"stuck {took:.1f} s after the freeze (stuck_after {STUCK_AFTER:g} s)")
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait(10)
            if frozen:
                os.kill(fuse.pid, signal.SIGCONT)
            assert fed.stop(timeout=30) == 0, fed.log()[-3000:]
