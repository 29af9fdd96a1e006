"""Which seeds count toward a swarm's wanted seeds (only the sites'), and the site seed in every answer. Pure."""

from __future__ import annotations

import hashlib
import random

from tracker import siteseeds
from tracker.sites import Site, SiteRegistry

H = hashlib.sha1(b"site seeds").digest()
OTHER = hashlib.sha1(b"other").digest()


def registry(now: float = 100.0) -> tuple[SiteRegistry, list[float]]:
    clock = [now]
    reg = SiteRegistry(heartbeat_interval=10, clock=lambda: clock[0])
    return reg, clock


def site(name: str, peers: tuple[str, ...], *, seeding: frozenset = frozenset(), can: frozenset = frozenset({H}),
         stuck: frozenset = frozenset(), seen: float = 100.0) -> Site:
    return Site(name, f"http://{name}", peers, can, seeding, 0, 10, 0.0, seen_mono=seen, stuck=stuck)


def test_a_site_seeds_with_a_seed_in_the_swarm_at_an_endpoint_it_declares():
    reg, _ = registry()
    reg.beat(site("a", ("127.0.0.2:6881",), seeding=frozenset({H})))
    reg.beat(site("b", ("127.0.0.3:6881",)))
    # b's start landed (its seed is in the swarm), its heartbeat saying so not yet in
    assert siteseeds.seeding_sites(reg, H, [("127.0.0.3", 6881)]) == {"b"}
    assert siteseeds.seeding_sites(reg, OTHER, [("127.0.0.3", 6881)]) == {"b"}
    # a's heartbeat says it seeds H, its seed left the swarm ('stopped' comes before the next heartbeat)
    assert siteseeds.seeding_sites(reg, H, []) == set()
    assert siteseeds.said_seeding(reg, H) == {"a"}


def test_at_once_an_announce_counts_the_heartbeats_no_more_than_the_swarm_has_seeds():
    assert siteseeds.at_once(said=1, complete=5) == 1  # liars do not add to it
    assert siteseeds.at_once(said=2, complete=1) == 1  # a site's seed left: the start path reads the swarm
    assert siteseeds.at_once(said=0, complete=3) == 0


def test_a_seed_that_is_no_sites_never_counts():
    reg, _ = registry()
    reg.beat(site("a", ("127.0.0.2:6881",)))
    # a liar, an unreachable T3, one at a site's address but another port: none is the site's seed
    assert siteseeds.seeding_sites(reg, H, [("127.0.0.88", 6881), ("127.0.0.9", 1), ("127.0.0.2", 7000)]) == set()


def test_a_site_that_is_down_or_stuck_does_not_count():
    reg, clock = registry()
    reg.beat(site("a", ("127.0.0.2:6881",), seeding=frozenset({H}), stuck=frozenset({H})))
    reg.beat(site("b", ("127.0.0.3:6881",), seeding=frozenset({H}), seen=60.0))
    assert siteseeds.seeding_sites(reg, H, [("127.0.0.2", 6881), ("127.0.0.3", 6881)]) == set()
    assert siteseeds.said_seeding(reg, H) == set()
    clock[0] = 85.0  # b's last beat is recent again: up
    assert siteseeds.seeding_sites(reg, H, [("127.0.0.3", 6881)]) == siteseeds.said_seeding(reg, H) == {"b"}


def test_the_site_seed_handed_out_is_one_of_theirs_never_the_requester():
    reg, _ = registry()
    reg.beat(site("a", ("127.0.0.2:6881", "127.0.0.2:6882")))
    reg.beat(site("b", ("127.0.0.3:6881",)))
    rng = random.Random(1)
    seen = {siteseeds.site_seed(reg, {"a", "b"}, ("127.0.0.9", 1), rng) for _ in range(50)}
    assert seen == {("127.0.0.2", 6881), ("127.0.0.2", 6882), ("127.0.0.3", 6881)}
    assert siteseeds.site_seed(reg, {"b"}, ("127.0.0.3", 6881), rng) is None
    assert siteseeds.site_seed(reg, {"gone"}, ("127.0.0.9", 1), rng) is None


def test_a_site_seed_is_handed_out_in_the_family_the_requester_asked_from():
    reg, _ = registry()
    reg.beat(site("dual", ("127.0.0.2:6881", "[::1]:6881")))
    reg.beat(site("v4only", ("127.0.0.3:6881",)))
    rng = random.Random(1)
    assert {siteseeds.site_seed(reg, {"dual"}, ("::1", 5), rng) for _ in range(20)} == {("::1", 6881)}
    assert {siteseeds.site_seed(reg, {"dual"}, ("127.0.0.9", 5), rng) for _ in range(20)} == {("127.0.0.2", 6881)}
    # A site with none in that family: what it has (the asker may still reach it).
    assert siteseeds.site_seed(reg, {"v4only"}, ("::1", 5), rng) == ("127.0.0.3", 6881)


def test_with_peer_keeps_an_answer_that_has_it_and_puts_it_first_otherwise():
    a, b, c, s = b"AAAAAA", b"BBBBBB", b"CCCCCC", b"SSSSSS"
    assert siteseeds.with_peer(a + s + b, s, 3) == a + s + b
    assert siteseeds.with_peer(a + b + c, s, 3) == s + a + b  # numwant kept
    assert siteseeds.with_peer(a + b, s, 5) == s + a + b
    assert siteseeds.with_peer(b"", s, 1) == s
    assert siteseeds.with_peer(a, s, 0) == a
    # the peer's bytes straddling two entries are not the peer
    assert siteseeds.with_peer(b"xxxSSS" + b"SSSyyy", s, 2) == s + b"xxxSSS"


def test_in_listed_is_the_same_for_non_compact_answers():
    a, b, s = ("127.0.0.5", 1, b"a" * 20), ("127.0.0.6", 2, b"b" * 20), ("127.0.0.2", 6881, b"s" * 20)
    assert siteseeds.in_listed([a, s], s, 2) == [a, s]
    assert siteseeds.in_listed([a, b], s, 2) == [s, a]
    assert siteseeds.in_listed([], s, 50) == [s]
