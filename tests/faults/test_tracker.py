"""Tracker faults through `btswarm up`: SIGKILLed mid-transfer and restarted; announce floods."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import time
import urllib.parse

import aiohttp
import pytest

from btswarm.trees import compare_trees
from tests.faults.conftest import (bt_get_popen, get_json, metric, rss_kib, service_pid, start_throttled,
                                   wait_restarted)
from tests.support import wait_for

pytestmark = pytest.mark.slow

RATE = 2_000_000
HEARTBEAT = 1.0
INTERVAL = 4  # the tracker's announce interval here: clients come back within it after a restart


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tracker")
    fed = start_throttled(tmp, RATE, "--sites", "2", "--sample-files", "8", "--sample-size", "16M",
                          "--idle-ttl", "3s", "--heartbeat", f"{HEARTBEAT:g}s",
                          env={"BTSWARM_TRACKER_INTERVAL": str(INTERVAL), "BTSWARM_TRACKER_MIN_INTERVAL": "2"})
    fed.hash = fed.info_hash(fed.dataset)  # read once: the tracker tests stop parts of the federation
    yield fed
    assert fed.stop(timeout=30) == 0, fed.log()[-3000:]


def sites_up(fed) -> set[str]:
    try:
        return {s["name"] for s in get_json(fed.tracker_url + "/api/sites")["sites"] if s["up"]}
    except OSError:
        return set()


def test_tracker_killed_mid_transfer(fed, tmp_path, record_property):
    out, log = tmp_path / "out", tmp_path / "bt-get.log"
    with open(log, "w") as stderr:
        proc = bt_get_popen(fed, out, "--json", "--seed-time", "40", "--listen", "127.0.0.60", "-v", stderr=stderr)
    try:
        wait_for(lambda: sum(s["uploaded"] for n in ("site1", "site2") for s in fed.site_status(n)["seeds"]) > 2e6,
                 timeout=30, interval=0.05, what="the transfer to be under way")
        old = service_pid(fed, "tracker")
        os.kill(old, signal.SIGKILL)
        wait_restarted(fed, "tracker", old, fed.tracker_url + "/healthz")
        healthy = time.monotonic()
        wait_for(lambda: sites_up(fed) == {"site1", "site2"}, timeout=10, interval=0.05,
                 what="both sites to re-register")
        reregistered = time.monotonic() - healthy
        record_property("reregister_seconds", reregistered)
        assert reregistered <= HEARTBEAT + 1.0, f"sites re-registered after {reregistered:.1f} s"

        # Complete by bt-get's own word (-v), not by the bytes on disk: a Ctrl-C before it has counted them is
        # an interrupted run (exit 130).
        wait_for(lambda: ": complete in " in log.read_text() or proc.poll() is not None,
                 timeout=60, interval=0.2, what="the download to complete")
        assert proc.poll() is None, log.read_text()[-3000:]
        assert compare_trees(fed.source, out / fed.dataset) == []
        started = time.monotonic()
        # The client comes back to the restarted tracker by itself: its swarm counts the completion.
        wait_for(lambda: get_json(f"{fed.tracker_url}/api/swarms/{fed.hash}")["completed"] >= 1,
                 timeout=INTERVAL * 2 + 10, interval=0.2, what="the client to re-announce")
        record_property("reannounce_seconds", time.monotonic() - started)
        print(f"tracker restart: sites re-registered {reregistered:.2f} s after the tracker was healthy; "
              f"client seen again {time.monotonic() - started:.1f} s after completing")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # Ctrl-C while seeding: exit 0
        stdout, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, log.read_text()[-3000:]
    assert json.loads(stdout)["exit_code"] == 0


def announce_url(fed, info_hash: bytes, peer: int) -> str:
    q = urllib.parse.urlencode({"info_hash": info_hash, "peer_id": b"-FL0001-" + f"{peer:012d}".encode(),
                                "port": 10000 + peer % 50000, "uploaded": 0, "downloaded": 0, "left": 1000,
                                "compact": 1, "event": "started"},
                               quote_via=urllib.parse.quote)  # a space byte is %20: '+' is a literal plus
    return f"{fed.ready.tracker}?{q}"


async def flood(urls: list[str], concurrency: int, deadline: float) -> list[bytes]:
    return [answer for answer, _ in await timed_flood(urls, concurrency, deadline)]


async def timed_flood(urls: list[str], concurrency: int, deadline: float) -> list[tuple[bytes, float]]:
    """GET every URL, `concurrency` at a time: each answer's body and the seconds it took."""
    sem = asyncio.Semaphore(concurrency)
    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=deadline)) as http:
        async def one(url: str) -> tuple[bytes, float]:
            async with sem:
                t0 = time.monotonic()
                async with http.get(url) as resp:
                    return await resp.read(), time.monotonic() - t0
        return await asyncio.wait_for(asyncio.gather(*(one(u) for u in urls)), deadline)


def seed_requests(fed) -> dict[str, float]:
    return {n: metric(fed.site(n).control_url, "btswarm_server_seed_requests_total") for n in ("site1", "site2")}


def test_announce_flood(fed, record_property):
    wait_for(lambda: fed.seeding() == {"site1": 0, "site2": 0}, timeout=30, interval=0.2, what="idle sites")
    tracker = service_pid(fed, "tracker")
    starts = metric(fed.tracker_url, "btswarm_tracker_seed_starts_total")
    posts = seed_requests(fed)
    rss_before = rss_kib(tracker)

    rng = random.Random()
    urls = [announce_url(fed, rng.randbytes(20), i) for i in range(10_000)]
    t0 = time.monotonic()
    answers = asyncio.run(flood(urls, 64, 120))
    flood_s = time.monotonic() - t0
    assert all(b"failure reason" in a for a in answers)
    rss_after = rss_kib(tracker)
    record_property("tracker_rss_kib", (rss_before, rss_after))
    print(f"10,000 unknown info-hashes in {flood_s:.1f} s: tracker RSS {rss_before} -> {rss_after} KiB")
    assert metric(fed.tracker_url, "btswarm_tracker_seed_starts_total") == starts
    assert seed_requests(fed) == posts
    assert fed.seeding() == {"site1": 0, "site2": 0}
    assert rss_after - rss_before < 20 * 1024, "tracker memory grew by more than 20 MiB"

    # A published hash whose swarm has no seed: 1,000 announces at once start at most one seed per site.
    wait_for(lambda: get_json(f"{fed.tracker_url}/api/swarms/{fed.hash}")["seeds"] == 0, timeout=3 * INTERVAL + 5,
             interval=0.2, what="the swarm to have no seed left")
    h = bytes.fromhex(fed.hash)
    answers = asyncio.run(flood([announce_url(fed, h, 20_000 + i) for i in range(1000)], 1000, 60))
    assert not any(b"failure reason" in a for a in answers)
    after = seed_requests(fed)
    delta = {n: after[n] - posts[n] for n in after}
    record_property("seed_posts_for_1000_announces", delta)
    print(f"1,000 concurrent announces on a published hash: seed start POSTs per site {delta}")
    assert all(d <= 1 for d in delta.values()), delta
    assert sum(delta.values()) >= 1
