"""What the site's web seed is serving: per dataset, requests in flight and when it last had one.

The same accounting as the libtorrent seeds (btserver/policy.py): a dataset
served over HTTP is busy while a request is in flight and for `idle_ttl`
after the last one, it counts in the load the heartbeat reports, and a
request for a dataset that is not busy yet needs one of `max_seeds` slots,
shared with the seeds. Runs on the event loop only (no lock).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable

from btserver import policy


@dataclass
class Served:
    """One dataset's web-seed use, shaped like a seed for policy's rules (`peers` = requests in flight)."""

    info_hash: str
    name: str
    started_at: float
    last_active: float
    peers: int = 0
    requests: int = 0
    sent: int = 0

    def as_dict(self, now: float) -> dict:
        return {"info_hash": self.info_hash, "name": self.name, "requests": self.requests, "sent": self.sent,
                "active_requests": self.peers, "idle_s": round(max(0.0, now - self.last_active), 3)}


class WebLoad:
    def __init__(self, *, idle_ttl: float, capacity: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.idle_ttl = idle_ttl
        self.capacity = capacity
        self.clock = clock
        self._served: dict[str, Served] = {}
        # info-hash → bytes sent since the daemon started: kept when an idle entry is forgotten (the heartbeat's)
        self.sent_by_hash: dict[str, int] = {}
        self.requests_total = 0

    def busy(self) -> list[str]:
        """Datasets served lately (the heartbeat counts them in the site's load)."""
        self._expire()
        return sorted(self._served)

    def admits(self, info_hash: str, seeding: Iterable[str]) -> bool:
        """Whether a request for `info_hash` fits beside the seeds (`seeding`) and the other datasets served."""
        return policy.admits(info_hash, set(seeding) | set(self.busy()), self.capacity)

    def begin(self, info_hash: str, name: str) -> Served:
        now = self.clock()
        s = self._served.get(info_hash)
        if s is None:
            s = self._served[info_hash] = Served(info_hash, name, now, now)
        s.peers += 1
        s.requests += 1
        s.last_active = now
        self.requests_total += 1
        return s

    def sent(self, served: Served, n: int) -> None:
        served.sent += n
        served.last_active = self.clock()
        self.sent_by_hash[served.info_hash] = self.sent_by_hash.get(served.info_hash, 0) + n

    @property
    def sent_total(self) -> int:
        return sum(self.sent_by_hash.values())

    def end(self, served: Served) -> None:
        served.peers = max(0, served.peers - 1)
        served.last_active = self.clock()

    def forget(self, info_hash: str) -> None:
        """The dataset is gone or changed: its slot is free (a request in flight finishes on its open file)."""
        self._served.pop(info_hash, None)

    def snapshot(self) -> list[dict]:
        self._expire()
        now = self.clock()
        return [s.as_dict(now) for _, s in sorted(self._served.items())]

    def _expire(self) -> None:
        for ih in policy.idle_expired(self._served.values(), self.clock(), self.idle_ttl):
            del self._served[ih]
