"""The state behind on-demand starts: which starts are in flight, and which sites are backed off.

A start of H at a site is claimed before the site is asked (`claim`, with
a time to live): the claim is what makes a start exactly-once across every
tracker process sharing the state, and its expiry is what frees it when
the process that held it died. A site that answered 429 or failed is left
alone for `site_backoff` seconds; one that does not know H (404), for that
H only.

Two implementations side by side, as for the peer store: LocalStartState
here (one process) and RedisStartState in tracker/redisstore.py
(`SET ... NX PX`). Maybe-async like the peer store: see tracker.peerstore.
"""

from __future__ import annotations

import time
from typing import Callable, Protocol, Sequence

from tracker.peerstore import Maybe

MAX_PAIRS = 10_000  # (info-hash, site) back-offs kept before the expired ones are swept


class StartState(Protocol):
    def claim(self, info_hash: bytes, site: str, ttl: float) -> Maybe[bool]:
        """True if this process may start H at `site` now (nobody else holds the claim)."""
    def release(self, info_hash: bytes, site: str) -> Maybe[None]:
        """Give a claim up (the start is over); a claim someone else took since is left alone."""
    def claimed(self, info_hash: bytes, sites: Sequence[str]) -> Maybe[set[str]]:
        """Those of `sites` with a start of H in flight, by any process."""
    def back_off(self, site: str, seconds: float, info_hash: bytes | None = None) -> Maybe[None]:
        """Leave `site` alone for `seconds` (for H only, when given)."""
    def backed_off(self, info_hash: bytes, sites: Sequence[str]) -> Maybe[set[str]]:
        """Those of `sites` backed off, for every swarm or for H."""


class LocalStartState:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._claims: dict[tuple[bytes, str], float] = {}
        self._sites: dict[str, float] = {}
        self._pairs: dict[tuple[bytes, str], float] = {}

    def claim(self, info_hash: bytes, site: str, ttl: float) -> bool:
        now = self.clock()
        key = (info_hash, site)
        if self._claims.get(key, 0.0) > now:
            return False
        if len(self._claims) > MAX_PAIRS:
            self._claims = {k: v for k, v in self._claims.items() if v > now}
        self._claims[key] = now + ttl
        return True

    def release(self, info_hash: bytes, site: str) -> None:
        self._claims.pop((info_hash, site), None)

    def claimed(self, info_hash: bytes, sites: Sequence[str]) -> set[str]:
        now = self.clock()
        return {s for s in sites if self._claims.get((info_hash, s), 0.0) > now}

    def back_off(self, site: str, seconds: float, info_hash: bytes | None = None) -> None:
        until = self.clock() + seconds
        if info_hash is None:
            self._sites[site] = until
            return
        if len(self._pairs) > MAX_PAIRS:
            now = self.clock()
            self._pairs = {k: v for k, v in self._pairs.items() if v > now}
        self._pairs[(info_hash, site)] = until

    def backed_off(self, info_hash: bytes, sites: Sequence[str]) -> set[str]:
        now = self.clock()
        return {s for s in sites if self._sites.get(s, 0.0) > now or self._pairs.get((info_hash, s), 0.0) > now}
