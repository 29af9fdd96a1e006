"""A peer that claims to be a seed never keeps the sites from seeding (issue 26, finding 2).

A federation with one site holding two datasets; before any leecher, a
seed that is no site's is in each swarm (the tracker's /api/swarms: seeds 1,
sites []):
- a liar: a libtorrent session over a corrupted copy whose resume data
  claims every piece (tests/faults/corrupt_peer.py), announcing to the tracker;
- an honest T3 seeding from behind a NAT that nobody can reach: plain HTTP
  announces with left=0 from 127.0.0.88, whose port has nothing listening.
Counted as the swarm's seed, either kept the site from being asked: bt-get
(peers only, --no-web-seeds) waited out its 30 s limit for blocked files and
exited 7 with 0 of 6 files. Now the site is asked and the dataset arrives
from its seed, identical.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time
import urllib.error
from pathlib import Path
from urllib.parse import quote_from_bytes

import pytest

from btswarm.trees import compare_trees
from tests.faults.conftest import get_json, start_throttled
from tests.faults.test_bad_peers import CORRUPT_PEER, corrupt_copy
from tests.support import command, free_port, wait_for
from torrents import metainfo, sample

pytestmark = pytest.mark.slow

RATE = 2_000_000  # bytes/s from the site: 6 MiB in ~3 s, time for the liar to send its bad pieces first
LIAR_IP = "127.0.0.50"
NAT_IP = "127.0.0.88"
NAMES = ("false.seed.liar", "false.seed.unreachable")


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("false-seeds")
    for name in NAMES:
        sample.generate(tmp / "data", name=name, files=6, total_size=6 * 2**20)
    fed = start_throttled(tmp, RATE, "--sites", "1", "--data", str(tmp / "data"), "--idle-ttl", "3s",
                          "--heartbeat", "1s")
    assert sorted(fed.datasets) == sorted(NAMES), fed.datasets
    fed.source_dir = tmp / "data"
    yield fed
    assert fed.stop(timeout=30) == 0, fed.log()[-3000:]


def swarm(fed, info_hash: str) -> dict | None:
    """The tracker's view of the swarm; None while nobody has announced it (404)."""
    try:
        return get_json(f"{fed.tracker_url}/api/swarms/{info_hash}")
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def only_a_false_seed(fed, info_hash: str) -> bool:
    # Under load (stress-ng --cpu 2) the false seed's first announce can come after the first look.
    s = swarm(fed, info_hash)
    return s is not None and s["seeds"] >= 1 and s["sites"] == []


def fetch(fed, name: str, out: Path, *args: str) -> tuple[int, dict, str, float]:
    started = time.monotonic()
    # --stall-timeout well past bt-get's blocked-files limit (30 s): the run must not end on either.
    proc = subprocess.run([command("bt-get"), name, "--repo", fed.repo, "-o", str(out), "--json",
                           "--stall-timeout", "90", *args], capture_output=True, text=True, timeout=150)
    doc = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return proc.returncode, doc, proc.stderr, time.monotonic() - started


def test_a_liar_claiming_every_piece_does_not_keep_the_site_from_seeding(fed, procs, tmp_path, record_property):
    name = NAMES[0]
    torrent = tmp_path / "liar.torrent"
    torrent.write_bytes(fed.torrent(name))
    meta = metainfo.parse(torrent.read_bytes(), subject=str(torrent))
    bad = procs.start("liar", [sys.executable, str(CORRUPT_PEER), str(torrent),
                               str(corrupt_copy(fed.source_dir / name, tmp_path / "bad", meta)), LIAR_IP])
    wait_for(lambda: only_a_false_seed(fed, meta.info_hash), 20, "the liar to be the swarm's only seed",
             interval=0.2)

    code, doc, err, seconds = fetch(fed, name, tmp_path / "out", "--no-web-seeds")  # from the site's seed
    record_property("liar", {"seconds": round(seconds, 2), "sources": doc.get("sources"),
                             "banned": doc.get("banned")})
    print(f"liar: exit {code} in {seconds:.1f} s, sources {doc.get('sources')}, banned {doc.get('banned')}")
    assert code == 0, err[-3000:]
    assert compare_trees(fed.source_dir / name, tmp_path / "out" / name) == []
    assert doc["sources"].get("site1", 0) > 0, doc["sources"]
    assert all(not b.startswith("site1") for b in doc["banned"]), doc["banned"]


def test_an_unreachable_seed_does_not_keep_the_site_from_seeding(fed, tmp_path, record_property):
    name = NAMES[1]
    info_hash = fed.info_hash(name)
    stop = threading.Event()
    dead_port = free_port(NAT_IP)  # nothing listens there
    host, port = fed.tracker_url.removeprefix("http://").split(":")

    def announce_forever() -> None:
        q = (f"/announce?info_hash={quote_from_bytes(bytes.fromhex(info_hash))}&peer_id=-NAT001-000000000001"
             f"&port={dead_port}&uploaded=0&downloaded=0&left=0&compact=1")
        for _ in range(60):  # every 5 s, bounded: 5 minutes at most
            conn = http.client.HTTPConnection(host, int(port), timeout=5, source_address=(NAT_IP, 0))
            try:
                conn.request("GET", q)
                conn.getresponse().read()
            except OSError:
                pass
            finally:
                conn.close()
            if stop.wait(5):
                return

    announcer = threading.Thread(target=announce_forever, daemon=True)
    announcer.start()
    try:
        wait_for(lambda: only_a_false_seed(fed, info_hash), 20, "the unreachable seed to be the swarm's only seed",
                 interval=0.2)
        code, doc, err, seconds = fetch(fed, name, tmp_path / "out", "--no-web-seeds")
    finally:
        stop.set()
        announcer.join(10)
    record_property("unreachable", {"seconds": round(seconds, 2), "sources": doc.get("sources")})
    print(f"unreachable seed: exit {code} in {seconds:.1f} s, sources {doc.get('sources')}")
    assert code == 0, err[-3000:]
    assert compare_trees(fed.source_dir / name, tmp_path / "out" / name) == []
    assert doc["sources"].get("site1", 0) > 0, doc["sources"]
