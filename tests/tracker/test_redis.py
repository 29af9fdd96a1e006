"""The Redis store against a real redis-server: its key layout, Redis gone or hung, and several
tracker apps sharing one Redis (any of them answers any announce the same way; one start per site)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import signal
import time

import pytest

from btswarm.redisserver import RedisServer
from torrents import bencoding
from tracker.app import ANNOUNCER
from tracker.config import TrackerConfig
from tracker.peerstore import resolve
from tracker.redisstore import RedisPeerStore
from tracker.resp import RedisClient, StoreUnavailable

from tests.support import until
from tests.tracker.conftest import client_factory
from tests.tracker.helpers import SECRETS, announce, beat_body, get_raw, heartbeat, query
from tests.tracker.test_seeding import StandInSite

H = hashlib.sha1(b"redis").digest()


def redis_config(url: str, prefix: str | None = None, **kw) -> TrackerConfig:
    return TrackerConfig(site_secrets=SECRETS, store="redis", redis_url=url,
                         redis_prefix=prefix or f"r{secrets.token_hex(4)}:", **kw)


@pytest.fixture
async def make_app():
    async for make in client_factory():
        yield make


async def test_one_swarm_is_a_few_keys_with_a_ttl_and_nothing_scans(redis_server):
    client = RedisClient(redis_server.url)
    prefix = f"k{secrets.token_hex(4)}:"
    store = RedisPeerStore(client, ttl=0.4, prefix=prefix)
    try:
        await client.call("CONFIG", "RESETSTAT")
        await resolve(store.announce(H, "127.0.0.9", 7001, b"p" * 20, False, "", numwant=50, site="siteA"))
        await resolve(store.announce(H, "127.0.0.9", 7002, b"q" * 20, True, "", numwant=50))
        tag = "{" + H.hex() + "}"
        keys = {f"{prefix}{tag}:{k}" for k in ("s", "l", "p", "a:siteA")}
        for key in keys:
            assert 0 < await client.call("PTTL", key) <= 800, key  # 2 x ttl: outlives every member
        assert await client.call("ZSCORE", f"{prefix}swarms", H) is not None
        stats = (await client.call("INFO", "commandstats")).decode()
        assert "cmdstat_scan" not in stats and "cmdstat_keys" not in stats
        await asyncio.sleep(0.9)
        assert await client.call("EXISTS", *keys) == 0, "a dead swarm vanishes by itself"
        assert await store.expire() >= 1 and await resolve(store.swarms(10)) == []
    finally:
        await client.close()


async def test_redis_gone_gives_a_failure_reason_in_bounded_time_and_the_tracker_recovers(make_app, tmp_path):
    with RedisServer(tmp_path / "redis") as server:
        app = await make_app(redis_config(server.url, open=True, redis_timeout=0.5))
        assert b"interval" in await announce_raw(app, query(H, port=7001))
        server.stop()
        t0 = time.monotonic()
        answers = [bencoding.decode(await announce_raw(app, query(H, port=7002))) for _ in range(5)]
        assert time.monotonic() - t0 < 3.0
        # Answered from this process's memory (tracker/fallback.py), and asked back soon.
        assert all(a[b"interval"] == 5 and a[b"incomplete"] == 1 for a in answers), answers
        async with app.session.get(app.make_url("/metrics")) as resp:
            assert 'btswarm_tracker_announces_total{result="store_down"} 5.0' in await resp.text()
        server.start()  # same port, empty: the swarm is rebuilt by the next announces

        async def ok() -> bool:
            return b"interval" in await announce_raw(app, query(H, port=7003))
        await until(ok, 5, what="the tracker reconnects by itself")


async def test_a_hung_redis_costs_an_announce_at_most_the_redis_timeout_and_it_gets_the_sites_seeds(make_app,
                                                                                                      tmp_path):
    with RedisServer(tmp_path / "redis") as server:
        app = await make_app(redis_config(server.url, redis_timeout=0.5))
        site = beat_body("site1", "http://127.0.0.2:9", ["127.0.0.2:6881"], [H], seeding=[H])
        assert await heartbeat(app, "site1", site) == 200
        assert b"interval" in await announce_raw(app, query(H, port=7001))
        os.kill(server.proc.pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            answers = await asyncio.gather(*(announce_raw(app, query(H, b"-TT0001-%012d" % i, port=7100 + i))
                                             for i in range(20)))
            took = time.monotonic() - t0
            assert took < 2.0, took
            # From what this tracker knows: the seed site1's heartbeat lists, the peers announced meanwhile.
            for a in map(bencoding.decode, answers):
                assert a[b"interval"] == 5 and b"\x7f\x00\x00\x02\x1a\xe1" in a[b"peers"], a
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)

        async def ok() -> bool:
            return b"interval" in await announce_raw(app, query(H, port=7003))
        await until(ok, 5, what="announces answered again once Redis is continued")


async def test_any_tracker_answers_any_announce_the_same_way(make_app, redis_server):
    prefix = f"r{secrets.token_hex(4)}:"
    a = await make_app(redis_config(redis_server.url, prefix))
    b = await make_app(redis_config(redis_server.url, prefix))
    site = beat_body("site1", "http://127.0.0.2:9", ["127.0.0.2:6881"], [H], seeding=[H])
    assert await heartbeat(a, "site1", site) == 200  # to one tracker only
    await announce(a, query(H, b"-TT0001-someseed0000", port=6881, left=0))  # a seed, announced to a

    async def known_at_b() -> bool:
        return b"failure reason" not in await announce_raw(b, query(H, port=7001))
    await until(known_at_b, 3, what="b learns the site from Redis")
    answer = await announce(b, query(H, b"-TT0001-000000000002", port=7002))
    # The seed site1's heartbeat lists (127.0.0.2:6881), and the one announced to a (127.0.0.1:6881).
    assert answer[b"complete"] == 2 and answer[b"incomplete"] == 2
    assert b"\x7f\x00\x00\x01\x1a\xe1" in answer[b"peers"]  # handed out by b
    async with a.session.get(a.make_url(f"/api/swarms/{H.hex()}")) as resp:
        assert (await resp.json())["sites"] == ["site1"]


async def test_200_first_announces_over_two_trackers_start_one_seed_per_site(make_app, redis_server):
    prefix = f"r{secrets.token_hex(4)}:"
    config = redis_config(redis_server.url, prefix, start_wait=3.0, min_seeds=2)
    a, b = await make_app(config), await make_app(config)
    async with StandInSite("site1", "127.0.0.2") as s1, StandInSite("site2", "127.0.0.3") as s2:
        for s in (s1, s2):
            assert await heartbeat(a, s.name, beat_body(s.name, s.url, [f"{s.ip}:6881"], [H])) == 200
            assert await heartbeat(b, s.name, beat_body(s.name, s.url, [f"{s.ip}:6881"], [H])) == 200
        answers = await asyncio.gather(*(announce((a, b)[i % 2], query(H, b"-TT0001-%012d" % i, port=7000 + i))
                                         for i in range(200)))
        assert s1.posts == [H.hex()] and s2.posts == [H.hex()]
        with_seed = sum(1 for x in answers if b"\x7f\x00\x00\x02\x1a\xe1" in x[b"peers"]
                        or b"\x7f\x00\x00\x03\x1a\xe1" in x[b"peers"])
        assert with_seed == 200, "announces at the other tracker waited for the start too"


class LateClaims:
    """A tracker's RedisStartState whose claims go out only once `go` is set: the loaded host whose
    announce read the claims and the swarm, then ran late while the other tracker did a whole start."""

    def __init__(self, state, go: asyncio.Event) -> None:
        self.state, self.go = state, go
        self.waiting = asyncio.Event()

    def __getattr__(self, name: str):
        return getattr(self.state, name)

    async def claim(self, info_hash: bytes, site: str, ttl: float) -> bool:
        self.waiting.set()
        await asyncio.wait_for(self.go.wait(), 10)
        return await self.state.claim(info_hash, site, ttl)


async def test_a_start_the_other_tracker_finished_before_this_one_claimed_is_not_asked_again(make_app, redis_server):
    prefix = f"r{secrets.token_hex(4)}:"
    config = redis_config(redis_server.url, prefix, start_wait=3.0)
    a, b = await make_app(config), await make_app(config)
    async with StandInSite("site1", "127.0.0.2", delay=0) as s1:
        for app in (a, b):
            assert await heartbeat(app, "site1", beat_body("site1", s1.url, ["127.0.0.2:6881"], [H])) == 200
        starter_a, starter_b = (app.server.app[ANNOUNCER].starter for app in (a, b))
        done = asyncio.Event()
        release = starter_a.state.release

        async def released(info_hash: bytes, site: str) -> None:
            await release(info_hash, site)
            done.set()

        starter_a.state.release = released
        starter_b.state = late = LateClaims(starter_b.state, done)
        # B's announce finds no claim and no seed, and is held just before it claims...
        at_b = asyncio.ensure_future(announce(b, query(H, b"-TT0001-000000000001", port=7001)))
        await asyncio.wait_for(late.waiting.wait(), 5)
        # ...while A claims, asks site1, adds its seed and gives the claim up; then B's claim succeeds.
        at_a = await announce(a, query(H, b"-TT0001-000000000002", port=7002))
        at_b = await asyncio.wait_for(at_b, 10)
        assert done.is_set() and s1.posts == [H.hex()], f"site1 asked {len(s1.posts)} times"
        assert at_a[b"complete"] == 1 and at_b[b"complete"] == 1 and b"\x7f\x00\x00\x02\x1a\xe1" in at_b[b"peers"], at_b


async def test_a_claim_left_by_a_dead_tracker_expires_and_the_next_announce_starts_the_seed(make_app, redis_server):
    prefix = f"r{secrets.token_hex(4)}:"
    app = await make_app(redis_config(redis_server.url, prefix, start_wait=0.5))
    client = RedisClient(redis_server.url)
    try:
        async with StandInSite("site1", "127.0.0.2", delay=0) as s1:
            assert await heartbeat(app, "site1", beat_body("site1", s1.url, ["127.0.0.2:6881"], [H])) == 200
            # What a tracker killed during its start leaves behind.
            await client.call("SET", f"{prefix}{{{H.hex()}}}:start:site1", "dead:1", "PX", 1500)
            first = await announce(app, query(H, port=7001))
            assert s1.posts == [] and first[b"complete"] == 0 and first[b"interval"] == 5
            await asyncio.sleep(1.6)
            second = await announce(app, query(H, b"-TT0001-000000000002", port=7002))
            assert s1.posts == [H.hex()] and second[b"complete"] == 1
    finally:
        await client.close()


async def test_a_client_call_never_waits_past_its_timeout():
    """A server that accepts and never answers (a hung host): StoreUnavailable after the timeout."""
    async def silent(reader, writer):
        await reader.read()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = RedisClient(f"redis://127.0.0.1:{port}/0", timeout=0.3)
    try:
        t0 = time.monotonic()
        with pytest.raises(StoreUnavailable, match="no answer within 0.3 s"):
            await client.call("PING")
        assert time.monotonic() - t0 < 1.0
    finally:
        await client.close()
        server.close()


async def announce_raw(app, q: str) -> bytes:
    status, body = await get_raw(app, "/announce?" + q)
    assert status == 200
    return body


async def test_a_redis_restarted_empty_gets_the_registry_back_at_the_next_heartbeat(make_app, tmp_path):
    with RedisServer(tmp_path / "redis") as server:
        prefix = f"r{secrets.token_hex(4)}:"
        a = await make_app(redis_config(server.url, prefix))
        site = beat_body("site1", "http://127.0.0.2:9", ["127.0.0.2:6881"], [H])
        assert await heartbeat(a, "site1", site) == 200
        server.restart()  # empty: nothing is persisted
        await until(lambda: heartbeat_ok(a, site), 5, what="a heartbeat to be taken again")
        b = await make_app(redis_config(server.url, prefix))  # a tracker started after the restart

        async def known_at_b() -> bool:
            return b"failure reason" not in await announce_raw(b, query(H, port=7001))
        await until(known_at_b, 3, what="b reads site1's can_seed from the new Redis")


async def heartbeat_ok(app, body) -> bool:
    return await heartbeat(app, "site1", body) == 200


async def test_the_bytes_a_site_sent_reach_every_tracker(make_app, redis_server):
    prefix = f"r{secrets.token_hex(4)}:"
    a = await make_app(redis_config(redis_server.url, prefix))
    b = await make_app(redis_config(redis_server.url, prefix))
    site = {**beat_body("site1", "http://127.0.0.2:9", ["127.0.0.2:6881"], [H]), "uploaded": {H.hex(): 123_456}}
    assert await heartbeat(a, "site1", site) == 200  # to one tracker only

    async def at_b() -> dict | None:
        async with b.session.get(b.make_url(f"/api/swarms/{H.hex()}")) as resp:
            return await resp.json() if resp.status == 200 else None
    row = await until(at_b, 3, what="b reads site1 from Redis")
    assert (row["site_uploaded"], row["uploaded_by_site"]) == (123_456, {"site1": 123_456})
    async with b.session.get(b.make_url("/api/sites")) as resp:
        assert [(s["name"], s["uploaded"]) for s in (await resp.json())["sites"]] == [("site1", 123_456)]
