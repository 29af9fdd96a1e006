"""A site whose seed is stuck (its heartbeat says so, btserver/stuck.py): the tracker neither hands that seed
out nor counts it, starts another site's instead, and hands it out again once the site says it recovered.

Real tracker app on either store (memory, and Redis against a real redis-server), stand-in sites
(real aiohttp apps on 127.0.0.x answering signed seed starts).
"""

from __future__ import annotations

import hashlib
import socket

from tracker.config import TrackerConfig

from tests.tracker.helpers import SECRETS, announce, beat_body, heartbeat, query
from tests.tracker.test_seeding import StandInSite

H = hashlib.sha1(b"stuck-seed").digest()


def endpoints(answer: dict) -> set[tuple[str, int]]:
    raw = answer.get(b"peers", b"")
    return {(socket.inet_ntoa(raw[i:i + 4]), int.from_bytes(raw[i + 4:i + 6], "big")) for i in range(0, len(raw), 6)}


async def test_stuck_seed_is_dropped_from_answers_another_site_starts_and_it_returns_on_recovery(make_client):
    # trust_ip: the seed's own announces come "from" its site's address in this test; one seed wanted,
    # so that site2 is asked only in place of the stuck one.
    client = await make_client(TrackerConfig(site_secrets=SECRETS, start_wait=3.0, trust_ip=True, min_seeds=1))
    async with StandInSite("site1", "127.0.0.2") as s1, StandInSite("site2", "127.0.0.3") as s2:
        site1_seed = ("127.0.0.2", 6881)

        async def beat_site1(stuck: list[bytes]) -> None:
            body = beat_body("site1", s1.url, ["127.0.0.2:6881"], [H], seeding=[H])
            body["stuck"] = [h.hex() for h in stuck]
            assert await heartbeat(client, "site1", body) == 200

        async def seed_announces() -> dict:
            return await announce(client, query(H, b"-LT2010-site1seed000", port=6881, left=0, ip="127.0.0.2"))

        await beat_site1([])
        assert await heartbeat(client, "site2", beat_body("site2", s2.url, ["127.0.0.3:6881"], [H])) == 200
        await seed_announces()
        first = await announce(client, query(H, b"-TT0001-000000000001", port=7001, ip="127.0.0.9"))
        assert endpoints(first) == {site1_seed} and first[b"complete"] == 1
        assert s1.posts == [] and s2.posts == []  # the swarm has its seed

        await beat_site1([H])  # site1's storage hangs: its seed is stuck
        await seed_announces()  # and it keeps announcing, as libtorrent does
        async with client.session.get(client.make_url("/api/sites")) as resp:
            listed = {s["name"]: s for s in (await resp.json())["sites"]}
        assert listed["site1"]["stuck"] == [H.hex()] and listed["site2"]["stuck"] == []
        second = await announce(client, query(H, b"-TT0001-000000000002", port=7002, ip="127.0.0.10"))
        assert site1_seed not in endpoints(second), "a stuck seed was handed out"
        assert s2.posts == [H.hex()] and s1.posts == [], "the start went to the wrong site"
        assert ("127.0.0.3", 6881) in endpoints(second) and second[b"complete"] == 1
        async with client.session.get(client.make_url(f"/api/swarms/{H.hex()}")) as resp:
            swarm = await resp.json()
        assert swarm["seeds"] == 1 and swarm["holders"] == ["site2"], swarm

        await beat_site1([])  # reads answer again
        third = await announce(client, query(H, b"-TT0001-000000000003", port=7003, ip="127.0.0.11"))
        assert {site1_seed, ("127.0.0.3", 6881)} <= endpoints(third) and third[b"complete"] == 2
        assert s1.posts == [] and s2.posts == [H.hex()]


async def test_heartbeat_with_a_malformed_stuck_list_is_refused(make_client):
    client = await make_client()
    body = beat_body("site1", "http://127.0.0.2:8700", ["127.0.0.2:6881"], [H])
    body["stuck"] = ["not-a-hash"]
    assert await heartbeat(client, "site1", body) == 400
