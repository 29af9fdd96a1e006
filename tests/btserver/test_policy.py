"""policy: idle expiry and least-recently-active eviction (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from btserver.policy import eviction_victim, idle_expired


@dataclass
class S:
    info_hash: str
    peers: int
    started_at: float
    last_active: float


def test_idle_expired_only_without_peers_past_the_ttl():
    seeds = [S("a", 0, 0, 10), S("b", 0, 0, 50), S("c", 2, 0, 0)]
    assert idle_expired(seeds, now=100, idle_ttl=60) == ["a"]


def test_eviction_picks_the_least_recently_active_idle_seed():
    seeds = [S("a", 0, 0, 30), S("b", 0, 0, 20), S("c", 1, 0, 0)]
    assert eviction_victim(seeds, now=100, grace=5) == "b"


def test_no_victim_when_every_seed_is_busy_or_just_started():
    seeds = [S("a", 1, 0, 0), S("b", 0, 98, 98)]
    assert eviction_victim(seeds, now=100, grace=5) is None
