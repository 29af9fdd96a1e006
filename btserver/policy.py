"""Which seeds to stop: idle expiry and eviction when at capacity. Pure.

A seed is busy while it has peers, and during a short grace after it
starts (the tracker starts a seed and the client connects a moment later;
evicting it in that gap would make the start useless).
"""

from __future__ import annotations

from typing import Iterable, Protocol


class SeedView(Protocol):
    info_hash: str
    peers: int
    started_at: float  # monotonic
    last_active: float  # monotonic: start, or the last time it had a peer


def busy(seed: SeedView, now: float, grace: float) -> bool:
    return seed.peers > 0 or now - seed.started_at < grace


def idle_expired(seeds: Iterable[SeedView], now: float, idle_ttl: float) -> list[str]:
    """Seeds that have had no peer for longer than `idle_ttl`."""
    return [s.info_hash for s in seeds if s.peers == 0 and now - s.last_active > idle_ttl]


def eviction_victim(seeds: Iterable[SeedView], now: float, grace: float) -> str | None:
    """The least recently active idle seed, or None when every seed is busy (→ 429)."""
    idle = [s for s in seeds if not busy(s, now, grace)]
    if not idle:
        return None
    return min(idle, key=lambda s: (s.last_active, s.info_hash)).info_hash


def admits(key: str, busy: set[str], capacity: int) -> bool:
    """Whether serving `key` fits: it is busy already (a seed, or served over HTTP lately), or a slot is free."""
    return key in busy or len(busy) < capacity
