"""Leechers that never connect cause no seed churn; peers killed without `stopped` leave the swarm in time."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from tests.tracker.helpers import SECRETS, announce, beat_body, heartbeat, query
from tests.tracker.test_seeding import StandInSite
from tracker import protocol
from tracker.churn import ChurnGuard
from tracker.config import TrackerConfig

H = hashlib.sha1(b"churn").digest()


def test_a_leecher_that_never_downloads_may_cause_two_starts_then_none():
    guard = ChurnGuard()
    assert [guard.may_start(H, "127.0.0.9", 6881, 0) for _ in range(5)] == [True, True, False, False, False]
    assert guard.may_start(H, "127.0.0.9", 6881, 16384)  # it downloaded something: a real leecher after all
    assert guard.may_start(H, "127.0.0.8", 6881, 0)  # another leecher is another story


def test_the_memory_is_bounded():
    guard = ChurnGuard(capacity=100)
    for port in range(1000):
        guard.may_start(H, "127.0.0.9", port, 0)
    assert len(guard._seen) == 100


def test_a_peer_lives_one_and_a_half_intervals_past_its_last_announce():
    assert protocol.peer_ttl(60) == 96.0
    assert protocol.peer_ttl(60) < 2 * 60 and protocol.peer_ttl(60) > 60 + protocol.interval_jitter(60)


async def idle_out(client, site: StandInSite) -> None:
    """The site's seed idles out: it says so in its next heartbeats, and the tracker drops that seed."""
    body = beat_body(site.name, site.url, [f"{site.ip}:6881"], [H], seeding=[H])
    assert await heartbeat(client, site.name, body) == 200
    assert await heartbeat(client, site.name, beat_body(site.name, site.url, [f"{site.ip}:6881"], [H])) == 200


async def test_a_client_that_takes_seeds_and_never_connects_costs_at_most_two_starts(make_client):
    client = await make_client(TrackerConfig(site_secrets=SECRETS, start_wait=3.0, open=True))
    async with StandInSite("site1", "127.0.0.2", delay=0.0) as site:
        assert await heartbeat(client, "site1", beat_body("site1", site.url, ["127.0.0.2:6881"], [H])) == 200
        # Six announces a minute apart, as the client's interval makes them; each time the
        # seed it was handed has idled out for want of a connection.
        for _ in range(6):
            await announce(client, query(H, peer_id=b"-XX0001-neverconnect", port=7001))
            await idle_out(client, site)
        assert len(site.posts) == 2
        # A real new leecher still gets its seed in its first answer.
        answer = await announce(client, query(H, peer_id=b"-BG0001-newleecher01", port=7002))
        assert len(site.posts) == 3 and b"\x7f\x00\x00\x02" in answer[b"peers"]
        text = await (await client.get("/metrics")).text()
        assert "btswarm_tracker_starts_withheld_total 4.0" in text


async def test_a_leecher_that_downloads_gets_a_seed_each_time_it_needs_one(make_client):
    client = await make_client(TrackerConfig(site_secrets=SECRETS, start_wait=3.0, open=True))
    async with StandInSite("site1", "127.0.0.2", delay=0.0) as site:
        assert await heartbeat(client, "site1", beat_body("site1", site.url, ["127.0.0.2:6881"], [H])) == 200
        for k in range(4):
            await announce(client, query(H, peer_id=b"-BG0001-downloading1", port=7003, downloaded=k * 10_000))
            await idle_out(client, site)
        assert len(site.posts) == 4


@pytest.mark.slow
async def test_clients_killed_without_stopped_are_not_handed_out_past_two_intervals(make_client):
    interval = 4
    client = await make_client(TrackerConfig(site_secrets=SECRETS, open=True, interval=interval, min_interval=2))
    for i in range(20):  # twenty clients announce once, then are killed: no `stopped` ever comes
        await announce(client, query(H, peer_id=b"-XX0001-%012d" % i, port=8000 + i))
    seen = []
    for wait in (interval, interval):  # a new leecher asks after one interval, then after two
        await asyncio.sleep(wait)
        answer = await announce(client, query(H, peer_id=b"-BG0001-newcomer0001", port=9000, numwant="50"))
        seen.append(len(answer[b"peers"]) // 6)
    print(f"dead peers handed to a new leecher: after 1 interval {seen[0]}, after 2 intervals {seen[1]}")
    assert seen[0] == 20  # within their interval they may well be alive
    assert seen[1] == 0
