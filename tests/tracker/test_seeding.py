"""On-demand seed starts against stand-in sites (real aiohttp apps on 127.0.0.x), and the pure policies."""

from __future__ import annotations

import asyncio
import hashlib
import random

from aiohttp import web
from aiohttp.test_utils import TestServer

from torrents import auth
from tracker.config import TrackerConfig
from tracker import handout
from tracker.app import ANNOUNCER
from tracker.peerstore import LocalPeerStore, SwarmCounts
from tracker.seeding import order_sites, wanted_seeds
from tracker.sites import Site

from tests.tracker.helpers import SECRETS, announce, beat_body, heartbeat, query

H = hashlib.sha1(b"on-demand").digest()


class StandInSite:
    """POST /api/seeds like bt-server: checks the signature, records the call, answers after `delay`."""

    def __init__(self, name: str, ip: str, *, status: int = 200, delay: float = 0.3) -> None:
        self.name, self.ip, self.status, self.delay = name, ip, status, delay
        self.posts: list[str] = []
        self.clock = 0  # the site's stamps (bt-server's heartbeat.stamp): heartbeats' `built`, starts' `started`
        self.verifier = auth.Verifier({name: SECRETS[name]})
        app = web.Application()
        app.router.add_post("/api/seeds", self.seeds)
        self.server = TestServer(app, host=ip, port=0)

    async def seeds(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.verifier.verify(request.method, request.path_qs, request.headers, body)
        info_hash = (await request.json())["info_hash"]
        self.posts.append(info_hash)
        await asyncio.sleep(self.delay)
        if self.status != 200:
            return web.json_response({"error": f"{self.name}: at capacity", "capacity": 1}, status=self.status)
        return web.json_response({"state": "seeding", "info_hash": info_hash, "peers": [f"{self.ip}:6881"],
                                  "started": self.stamp()})

    def stamp(self) -> int:
        self.clock += 1
        return self.clock

    async def __aenter__(self) -> "StandInSite":
        await self.server.start_server()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.server.close()

    @property
    def url(self) -> str:
        return f"http://{self.ip}:{self.server.port}"


async def publish(client, *sites: StandInSite, h: bytes = H) -> None:
    for s in sites:
        assert await heartbeat(client, s.name, beat_body(s.name, s.url, [f"{s.ip}:6881"], [h])) == 200


async def test_first_answer_lists_the_started_seed(make_client):
    client = await make_client()
    async with StandInSite("site1", "127.0.0.2") as site:
        await publish(client, site)
        answer = await announce(client, query(H, port=7001))
        assert site.posts == [H.hex()]
        assert answer[b"peers"] == bytes([127, 0, 0, 2]) + (6881).to_bytes(2, "big")
        assert answer[b"complete"] == 1
        # the next leecher finds the seed in the swarm: no second start
        again = await announce(client, query(H, b"-TT0001-000000000002", port=7002))
        assert site.posts == [H.hex()] and b"\x7f\x00\x00\x02\x1a\xe1" in again[b"peers"]
        async with client.session.get(client.make_url(f"/api/swarms/{H.hex()}")) as resp:
            assert await resp.json() == {"info_hash": H.hex(), "seeds": 1, "leechers": 2, "completed": 0,
                                         "sites": ["site1"], "holders": ["site1"], "site_uploaded": 0,
                                         "uploaded_by_site": {"site1": 0}}


async def test_a_lone_leecher_is_answered_with_every_holders_seed(make_client):
    """min_seeds 3 by default: a lone T3 on a cold federation gets every holder's uplink. At 1 the other
    sites idled through its whole fetch (3 sites: 4.9 s against 3.4 s, docs/benchmarks.md "wan")."""
    client = await make_client()
    async with StandInSite("site1", "127.0.0.2", delay=0) as s1, StandInSite("site2", "127.0.0.3", delay=0) as s2, \
            StandInSite("site3", "127.0.0.4", delay=0) as s3:
        await publish(client, s1, s2, s3)
        answer = await announce(client, query(H, port=7001))
        assert [s.posts for s in (s1, s2, s3)] == [[H.hex()]] * 3
        got = {answer[b"peers"][i:i + 6] for i in range(0, len(answer[b"peers"]), 6)}
        assert got == {bytes([127, 0, 0, k]) + (6881).to_bytes(2, "big") for k in (2, 3, 4)}
        assert answer[b"complete"] == 3


async def test_fifty_concurrent_announces_send_one_post_per_site(make_client):
    client = await make_client()
    async with StandInSite("site1", "127.0.0.2") as s1, StandInSite("site2", "127.0.0.3") as s2:
        await publish(client, s1, s2)
        answers = await asyncio.gather(*(announce(client, query(H, b"-TT0001-%012d" % i, port=7000 + i))
                                         for i in range(50)))
        assert s1.posts == [H.hex()] and s2.posts == [H.hex()]
        seeds = {bytes([127, 0, 0, 2]) + (6881).to_bytes(2, "big"), bytes([127, 0, 0, 3]) + (6881).to_bytes(2, "big")}
        for a in answers:
            got = {a[b"peers"][i:i + 6] for i in range(0, len(a[b"peers"]), 6)}
            assert got & seeds, "every answer carries a seed"


async def test_a_start_that_lands_between_the_swarm_read_and_the_wait_counts_as_gained(make_client):
    """Under load, an announce read the swarm (no seed), then another announce's start landed, then this
    one came to the start path: it must answer with the new seed counted, not its stale view
    (tests/faults/test_trackers: 51 of 200 first answers said complete=0 while both sites seeded)."""
    client = await make_client()
    async with StandInSite("site1", "127.0.0.2", delay=0) as site:
        await publish(client, site)
        first = await announce(client, query(H, port=7001))
        assert site.posts == [H.hex()] and first[b"complete"] == 1
        starter = client.server.app[ANNOUNCER].starter
        stale = SwarmCounts(complete=0, incomplete=2, downloaded=0)
        assert await starter.ensure(H, stale) is True, "the seed that landed is one the view lacked"
        assert site.posts == [H.hex()], "and the site is not asked again"
        current = SwarmCounts(complete=1, incomplete=2, downloaded=0)
        assert await starter.ensure(H, current) is False


async def test_a_heartbeat_built_before_a_start_and_received_after_it_keeps_the_new_seed(make_client):
    """The order two trackers met 2 runs in 10: a site's heartbeat built just before a seed start
    (its old seed had just idled out) and received just after it took the new seed out of the
    swarm, and the next announce asked the site a second time."""
    client = await make_client(TrackerConfig(site_secrets=SECRETS, start_wait=3.0, trust_ip=True))

    async def seeds() -> int:
        async with client.session.get(client.make_url(f"/api/swarms/{H.hex()}")) as resp:
            return (await resp.json())["seeds"] if resp.status == 200 else 0

    async with StandInSite("site1", "127.0.0.2", delay=0) as site:
        def body(seeding: list[bytes]) -> dict:
            return beat_body("site1", site.url, ["127.0.0.2:6881"], [H], seeding=seeding, built=site.stamp())

        assert await heartbeat(client, "site1", body([H])) == 200  # its old seed of H...
        # ...idles out: its 'stopped' announce, then the heartbeat that no longer lists H, built now and
        # delivered after the start below.
        await announce(client, query(H, b"-LT2110-site1seed000", port=6881, left=0, event="stopped", ip="127.0.0.2"))
        assert await seeds() == 0
        late = body([])
        first = await announce(client, query(H, port=7001))
        assert site.posts == [H.hex()] and first[b"complete"] == 1 and await seeds() == 1
        assert await heartbeat(client, "site1", late) == 200
        assert await seeds() == 1, "a heartbeat built before the start took its seed out of the swarm"
        second = await announce(client, query(H, b"-TT0001-000000000002", port=7002))
        assert site.posts == [H.hex()], f"site1 asked {len(site.posts)} times"
        assert second[b"complete"] == 1
        # Heartbeats built after the start still settle a seed whose 'stopped' announce was lost.
        assert await heartbeat(client, "site1", body([H])) == 200
        assert await heartbeat(client, "site1", body([])) == 200
        assert await seeds() == 0


async def test_site_that_answered_429_is_skipped_for_the_backoff(make_client):
    client = await make_client(TrackerConfig(site_secrets=SECRETS, start_wait=3.0, site_backoff=60))
    async with StandInSite("site1", "127.0.0.2", status=429, delay=0) as busy:
        await publish(client, busy)
        first = await announce(client, query(H, port=7001))
        assert busy.posts == [H.hex()] and first[b"peers"] == b""
        await announce(client, query(H, b"-TT0001-000000000002", port=7002))
        assert busy.posts == [H.hex()], "backed off: not asked again"
        async with StandInSite("site2", "127.0.0.3", delay=0) as ok:
            await publish(client, ok)
            third = await announce(client, query(H, b"-TT0001-000000000003", port=7003))
            assert ok.posts == [H.hex()] and busy.posts == [H.hex()]
            assert bytes([127, 0, 0, 3]) + (6881).to_bytes(2, "big") in third[b"peers"]
    async with client.session.get(client.make_url("/metrics")) as resp:
        text = await resp.text()
    assert 'btswarm_tracker_seed_starts_total{outcome="busy"} 1.0' in text
    assert 'btswarm_tracker_seed_starts_total{outcome="started"} 1.0' in text


async def test_unreachable_site_fails_fast_and_the_next_one_is_asked(make_client):
    client = await make_client()
    async with StandInSite("site2", "127.0.0.3", delay=0) as ok:
        # site1's control URL points at a closed port: connection refused
        from tests.support import free_port
        dead = beat_body("site1", f"http://127.0.0.2:{free_port('127.0.0.2')}", ["127.0.0.2:6881"], [H], load=0)
        assert await heartbeat(client, "site1", dead) == 200
        assert await heartbeat(client, "site2", beat_body("site2", ok.url, ["127.0.0.3:6881"], [H], load=5)) == 200
        answer = await announce(client, query(H, port=7001))
        assert ok.posts == [H.hex()]
        assert answer[b"peers"] == bytes([127, 0, 0, 3]) + (6881).to_bytes(2, "big")


# --- pure policies ---------------------------------------------------------

def _site(name: str, load: int = 0, capacity: int = 10, seeding: frozenset = frozenset()) -> Site:
    return Site(name, f"http://{name}", (), frozenset(), seeding, load, capacity, 0.0)


def test_wanted_seeds():
    assert wanted_seeds(0, 4, 3) == 0
    assert [wanted_seeds(n, 4, 3) for n in (1, 4, 5, 8, 9, 100)] == [1, 1, 2, 2, 3, 3]
    assert wanted_seeds(100, 4, 0) == 1
    # min_seeds: a federation that wants every swarm spread over two sites from the first leecher
    assert [wanted_seeds(n, 4, 3, minimum=2) for n in (0, 1, 9, 100)] == [0, 2, 3, 3]
    assert wanted_seeds(1, 4, 1, minimum=2) == 1


def test_order_already_seeding_then_least_loaded_then_round_robin():
    a, b, c = _site("a", load=5), _site("b", load=1), _site("c", load=9, seeding=frozenset({H}))
    assert [s.name for s in order_sites([a, b, c], H, 0)] == ["c", "b", "a"]
    ties = [_site("x"), _site("y"), _site("z")]
    firsts = [order_sites(ties, H, r)[0].name for r in range(6)]
    assert firsts == ["x", "y", "z", "x", "y", "z"]
    # load is relative to capacity
    big, small = _site("big", load=10, capacity=100), _site("small", load=5, capacity=10)
    assert order_sites([small, big], H, 0)[0].name == "big"


def _peers(n: int, seeds: int = 0, ip: str = "127.0.0.9") -> list:
    store = LocalPeerStore(ttl=100)
    for i in range(n):
        store.update(H, ip, 1000 + i, b"%020d" % i, i < seeds, "started")
    return store.peers(H)


def test_handout_excludes_requester_and_caps():
    peers = _peers(300)
    chosen = handout.select(peers, ("127.0.0.9", 1000), 500, rng=random.Random(1))
    assert len(chosen) == 200 and all(p.port != 1000 for p in chosen)
    assert handout.select(peers, ("127.0.0.9", 1000), 0) == []


def test_handout_always_includes_a_seed():
    peers = _peers(100, seeds=1)
    for seed in range(20):
        chosen = handout.select(peers, ("127.0.0.1", 1), 5, rng=random.Random(seed))
        assert len(chosen) == 5 and any(p.seed for p in chosen)


def test_handout_prefers_own_site_then_seeds():
    store = LocalPeerStore(ttl=100)
    for i in range(30):
        store.update(H, "127.0.0.5", 2000 + i, b"%020d" % i, False, "")  # other site, leechers
    for i in range(3):
        store.update(H, "127.0.0.6", 3000 + i, b"s%019d" % i, True, "")  # seeds
    for i in range(4):
        store.update(H, "127.0.0.7", 4000 + i, b"l%019d" % i, False, "")  # requester's own site
    site_of = {"127.0.0.5": "far", "127.0.0.6": "t2", "127.0.0.7": "home"}.get
    chosen = handout.select(store.peers(H), ("127.0.0.7", 9), 8, site_of=site_of, requester_site="home",
                            rng=random.Random(3))
    assert [p.ip for p in chosen] == ["127.0.0.7"] * 4 + ["127.0.0.6"] * 3 + ["127.0.0.5"]


# --- a seed that is not a site's never keeps the sites away (issue 26) -------------------------

SITE1_SEED = bytes([127, 0, 0, 2]) + (6881).to_bytes(2, "big")


def _compact(answer: dict) -> set[bytes]:
    return {answer[b"peers"][i:i + 6] for i in range(0, len(answer[b"peers"]), 6)}


async def test_a_peer_that_says_it_is_a_seed_does_not_keep_the_site_from_being_asked(make_client):
    client = await make_client(TrackerConfig(site_secrets=SECRETS, start_wait=3.0, trust_ip=True))
    async with StandInSite("site1", "127.0.0.2", delay=0) as site:
        await publish(client, site)
        # A liar (or an unreachable T3) announces left=0 before any leecher: a seed of the swarm, not a site's.
        claim = await announce(client, query(H, b"-LI0001-000000000001", port=9001, left=0, ip="127.0.0.88"))
        assert claim[b"complete"] == 1 and site.posts == []
        answer = await announce(client, query(H, port=7001))
        assert site.posts == [H.hex()]
        assert SITE1_SEED in _compact(answer)
        async with client.session.get(client.make_url(f"/api/swarms/{H.hex()}")) as resp:
            swarm = await resp.json()
        assert (swarm["seeds"], swarm["sites"]) == (2, ["site1"])


async def test_every_leecher_gets_a_site_seed_however_many_other_seeds_crowd_the_swarm(make_client):
    client = await make_client(TrackerConfig(site_secrets=SECRETS, start_wait=3.0, trust_ip=True))
    async with StandInSite("site1", "127.0.0.2", delay=0) as site:
        await publish(client, site)
        for i in range(60):  # more than any numwant: a sample of the seeds would miss the site's
            await announce(client, query(H, b"-LI0001-%012d" % i, port=9000 + i, left=0, ip="127.0.0.88"))
        await announce(client, query(H, port=7001))
        assert site.posts == [H.hex()]
        for i in range(20):
            answer = await announce(client, query(H, b"-TT0001-%012d" % i, port=7100 + i, numwant=5))
            peers = _compact(answer)
            assert len(peers) == 5 and SITE1_SEED in peers, i
            listed = await announce(client, query(H, b"-TT0002-%012d" % i, port=7200 + i, numwant=5, compact=0))
            assert len(listed[b"peers"]) == 5
            assert any((p[b"ip"], p[b"port"]) == (b"127.0.0.2", 6881) for p in listed[b"peers"]), i
        assert site.posts == [H.hex()]  # the site was asked once: its seed counts
