"""Both peer stores, held to the same rules: the memory store and the Redis store (real redis-server).

The Redis store takes the same injected clock (its expiry scores are
`clock()` in ms), so expiry is tested without waiting.
"""

from __future__ import annotations

import hashlib
import secrets

import pytest

from tracker.peerstore import LocalPeerStore, SwarmCounts, resolve
from tracker.protocol import compact_endpoint
from tracker.redisstore import RedisPeerStore
from tracker.resp import RedisClient

H = hashlib.sha1(b"stores").digest()
TTL = 100.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "redis"])
async def store(request):
    clock = Clock()
    if request.param == "memory":
        s = LocalPeerStore(ttl=TTL, clock=clock, max_peers_per_swarm=50)
    else:
        url = request.getfixturevalue("redis_server").url
        s = RedisPeerStore(RedisClient(url), ttl=TTL, prefix=f"s{secrets.token_hex(4)}:", clock=clock,
                           max_peers_per_swarm=50)
    s.test_clock = clock
    yield s
    await s.close()


async def ann(store, ip: str, port: int, *, seed: bool = False, event: str = "", numwant: int = 50,
              site: str | None = None, listed: bool = False, h: bytes = H):
    return await resolve(store.announce(h, ip, port, b"-TT0001-%012d" % port, seed, event, numwant=numwant,
                                        site=site, listed=listed))


def endpoints(peers4: bytes) -> list[tuple[str, int]]:
    return [(".".join(str(b) for b in peers4[i:i + 4]), int.from_bytes(peers4[i + 4:i + 6], "big"))
            for i in range(0, len(peers4), 6)]


async def test_own_site_first_then_seeds_then_the_rest(store):
    for i in range(30):
        await ann(store, "127.0.0.5", 2000 + i, numwant=0, site="far")
    for i in range(3):
        await ann(store, "127.0.0.6", 3000 + i, seed=True, numwant=0, site="t2")
    for i in range(4):
        await ann(store, "127.0.0.7", 4000 + i, numwant=0, site="home")
    for _ in range(10):
        view = await resolve(store.handout(H, "127.0.0.7", 9, numwant=8, site="home"))
        assert [ip for ip, _ in endpoints(view.peers4)] == ["127.0.0.7"] * 4 + ["127.0.0.6"] * 3 + ["127.0.0.5"]
    assert (view.complete, view.incomplete) == (3, 34)


async def test_a_seed_is_handed_out_even_when_the_own_site_fills_the_answer(store):
    for i in range(10):
        await ann(store, "127.0.0.7", 4000 + i, numwant=0, site="home")
    await ann(store, "127.0.0.6", 3000, seed=True, numwant=0, site="t2")
    for _ in range(10):
        view = await resolve(store.handout(H, "127.0.0.7", 9, numwant=5, site="home"))
        got = endpoints(view.peers4)
        assert len(got) == 5 and ("127.0.0.6", 3000) in got and len(set(got)) == 5


async def test_the_requester_is_never_handed_itself_and_numwant_is_capped(store):
    for i in range(40):
        await ann(store, "127.0.0.9", 1000 + i, numwant=0)
    view = await ann(store, "127.0.0.9", 1000, numwant=500)
    got = endpoints(view.peers4)
    assert len(got) == 39 == len(set(got)) and ("127.0.0.9", 1000) not in got
    assert len(endpoints((await ann(store, "127.0.0.9", 1000, numwant=7)).peers4)) == 7
    assert (await ann(store, "127.0.0.9", 1000, numwant=0)).peers4 == b""


async def test_completed_moves_a_leecher_to_the_seeds_and_stopped_removes(store):
    await ann(store, "127.0.0.9", 1000)
    view = await ann(store, "127.0.0.9", 1001)
    assert (view.complete, view.incomplete, view.downloaded) == (0, 2, 0)
    view = await ann(store, "127.0.0.9", 1000, seed=True, event="completed")
    assert (view.complete, view.incomplete, view.downloaded) == (1, 1, 1)
    assert [(s.ip, s.port) for s in await resolve(store.seeds(H))] == [("127.0.0.9", 1000)]
    view = await ann(store, "127.0.0.9", 1000, seed=True, event="stopped", numwant=0)
    assert (view.complete, view.incomplete) == (0, 1)
    assert await resolve(store.counts([H, b"\0" * 20])) == [SwarmCounts(0, 1, 1), SwarmCounts(0, 0, 0)]


async def test_peers_expire_after_the_ttl(store):
    await ann(store, "127.0.0.9", 1000, seed=True)
    store.test_clock.now += TTL - 1
    await ann(store, "127.0.0.9", 1001)
    view = await resolve(store.handout(H, "127.0.0.9", 2000, numwant=50))
    assert endpoints(view.peers4) != [] and (view.complete, view.incomplete) == (1, 1)
    store.test_clock.now += 2
    view = await resolve(store.handout(H, "127.0.0.9", 2000, numwant=50))
    assert endpoints(view.peers4) == [("127.0.0.9", 1001)] and (view.complete, view.incomplete) == (0, 1)
    assert await resolve(store.seeds(H)) == []


async def test_a_full_swarm_drops_the_peer_that_announced_longest_ago(store):
    for i in range(50):
        store.test_clock.now += 0.01
        await ann(store, "127.0.0.9", 1000 + i, numwant=0, seed=i % 2 == 0)
    view = await ann(store, "127.0.0.9", 5000, numwant=200)
    got = set(endpoints(view.peers4))
    assert view.complete + view.incomplete == 50
    assert ("127.0.0.9", 1000) not in got and ("127.0.0.9", 1001) in got


async def test_ipv6_peers_and_the_listed_form(store):
    await ann(store, "::1", 7001)
    await ann(store, "127.0.0.9", 7002)
    view = await ann(store, "127.0.0.9", 7003, listed=True)
    assert view.peers6 == compact_endpoint("::1", 7001)[0] and view.peers4 == compact_endpoint("127.0.0.9", 7002)[0]
    assert sorted(view.listed) == [("127.0.0.9", 7002, b"-TT0001-%012d" % 7002), ("::1", 7001, b"-TT0001-%012d" % 7001)]


async def test_a_seed_added_for_a_site_carries_the_site(store):
    await resolve(store.add_seed(H, "127.0.0.2", 6881, b"s" * 20, "site1"))
    await ann(store, "127.0.0.9", 7000)
    assert [tuple(s) for s in await resolve(store.seeds(H))] == [("127.0.0.2", 6881, "site1")]
    assert H in await resolve(store.swarms(10)) and await resolve(store.has(H))
    await resolve(store.remove(H, "127.0.0.2", 6881))
    assert await resolve(store.seeds(H)) == []
