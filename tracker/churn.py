"""Leechers that take the seeds and never download are no reason to start seeds again. Pure.

A client that is handed peers but never connects to them (a firewall, a
client that drops loopback peers as "martian") announces every interval;
each time the seeds it was given have idled out, and each announce would
ask a site to start them again: ten starts in a few minutes for one such
client. So each leecher announce that finds its swarm short of seeds is
weighed: one whose downloaded bytes grew since it was last here (or that
is new) may cause starts; one that made no progress since, `tolerate`
times, may not, until it downloads something. A real new leecher still
gets its seed in its first answer.

The memory is per tracker process and bounded (least recently seen
forgotten first): it is a guard against churn, not swarm state, and a
client announces to one tracker first.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

Key = tuple[bytes, str, int]  # info-hash, ip, port


@dataclass
class ChurnGuard:
    tolerate: int = 2  # announces without progress that may still cause starts
    capacity: int = 100_000
    _seen: OrderedDict[Key, tuple[int, int]] = field(default_factory=OrderedDict)  # → (downloaded, fruitless)

    def may_start(self, info_hash: bytes, ip: str, port: int, downloaded: int) -> bool:
        """Whether this leecher's announce, in a swarm short of seeds, may ask sites for seeds."""
        key = (info_hash, ip, port)
        before = self._seen.pop(key, None)
        if before is None or downloaded > before[0]:
            fruitless = 0
        else:
            fruitless = before[1] + 1
        self._seen[key] = (downloaded, fruitless)
        while len(self._seen) > self.capacity:
            self._seen.popitem(last=False)
        return fruitless < self.tolerate
