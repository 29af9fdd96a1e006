"""A peer that accepts no inbound connection (`inbound=0`: bt-get --closed, or behind a proxy) gets the swarm and is
never handed out to anyone, as a leecher or as a seed; both stores (tracker/announcer.py)."""

from __future__ import annotations

import hashlib

from tracker.config import TrackerConfig

from tests.tracker.helpers import SECRETS, announce, query

H = hashlib.sha1(b"closed nodes").digest()


def endpoints(answer: dict) -> set[tuple[str, int]]:
    peers = answer.get(b"peers", b"")
    return {(".".join(str(b) for b in peers[i:i + 4]), int.from_bytes(peers[i + 4:i + 6], "big"))
            for i in range(0, len(peers), 6)}


def peer_id(port: int) -> bytes:
    return b"-TT0001-%012d" % port


async def test_a_closed_peer_gets_the_swarm_and_is_never_handed_out(make_client):
    client = await make_client(TrackerConfig(site_secrets=SECRETS, open=True))
    await announce(client, query(H, peer_id(7001), port=7001))  # an open leecher
    got = await announce(client, query(H, peer_id(7002), port=7002, inbound=0))
    assert endpoints(got) == {("127.0.0.1", 7001)}
    assert got[b"incomplete"] == 2  # counted in its own answer: it is in the swarm, only not listed
    await announce(client, query(H, peer_id(7003), port=7003, left=0, inbound=0))  # a closed seed
    for _ in range(5):
        other = await announce(client, query(H, peer_id(7004), port=7004))
        assert endpoints(other) == {("127.0.0.1", 7001)}, other
        assert (other[b"complete"], other[b"incomplete"]) == (0, 2)


async def test_a_closed_peer_is_asked_back_soon_to_find_the_peers_that_come_after_it(make_client):
    client = await make_client(TrackerConfig(site_secrets=SECRETS, open=True, interval=60))
    got = await announce(client, query(H, peer_id(7002), port=7002, inbound=0))
    assert got[b"interval"] == 5 and got[b"min interval"] == 5
    other = await announce(client, query(H, peer_id(7004), port=7004))
    assert other[b"interval"] >= 60
    got = await announce(client, query(H, peer_id(7002), port=7002, inbound=0))
    assert endpoints(got) == {("127.0.0.1", 7004)}


async def test_a_closed_peer_that_stops_leaves_nothing_behind(make_client):
    client = await make_client(TrackerConfig(site_secrets=SECRETS, open=True))
    await announce(client, query(H, peer_id(7002), port=7002, inbound=0))
    stopped = await announce(client, query(H, peer_id(7002), port=7002, inbound=0, event="stopped"))
    assert stopped[b"peers"] == b""
    other = await announce(client, query(H, peer_id(7004), port=7004))
    assert endpoints(other) == set() and other[b"incomplete"] == 1


async def test_inbound_other_than_0_is_an_open_peer(make_client):
    client = await make_client(TrackerConfig(site_secrets=SECRETS, open=True))
    await announce(client, query(H, peer_id(7002), port=7002, inbound=1))
    other = await announce(client, query(H, peer_id(7004), port=7004))
    assert endpoints(other) == {("127.0.0.1", 7002)}
