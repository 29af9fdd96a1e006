"""The tracker as a busy swarm's scheduler: which sites' seeds each T3 is handed. Pure.

With `[server] upload_slots = 1` a site serves one T3 of a swarm at a time.
Handed every site, all T3s connect to all of them and every site gives its
slot to the same first T3, which takes the dataset at ΣR and can pass it on
only at its own uplink C while the others wait (docs/benchmarks.md "wan").
Here each downloading T3 (a leecher) of a swarm is assigned one site, the
one with the fewest leechers assigned (ties broken by an order rotated by
the swarm, so swarms do not all start at the first site), and is handed its
own site's seeds and those of sites with no leecher assigned: a lone T3
still gets every site, the second of two on three sites shares the third,
and eight get about three per site, so the sites serve different T3s that
then trade.

Rotation: a T3 that completes or stops leaves the plan, so its site is idle
again and is handed to every leecher at its next announce (the announcer
asks leechers of a scheduled swarm back sooner); an entry not renewed within
`ttl` is forgotten (a T3 that vanished).

Seeds that are not sites (finished T3s) and leechers are never filtered:
T3s trade with every other T3.

Off by default (`[tracker] schedule`): on shaped links it gained nothing
over the T3s' own rule (btget/siteshare.py), since the first T3 keeps the
connections it was handed before the others announced, and it gives a
`--shard` array fewer sites (docs/benchmarks.md "wan").
"""

from __future__ import annotations

import ipaddress
import zlib
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

Endpoint = tuple[str, int]


@dataclass
class SwarmPlan:
    """One swarm's assignment: leecher endpoint → (site, monotonic time it expires)."""
    assigned: dict[Endpoint, tuple[str, float]] = field(default_factory=dict)

    def load(self, now: float) -> dict[str, int]:
        """Leechers assigned to each site, expired entries dropped."""
        for ep in [ep for ep, (_, exp) in self.assigned.items() if exp <= now]:
            del self.assigned[ep]
        counts: dict[str, int] = {}
        for site, _ in self.assigned.values():
            counts[site] = counts.get(site, 0) + 1
        return counts


def site_order(sites: Iterable[str], salt: bytes) -> list[str]:
    """`sites` sorted, rotated by a hash of `salt` (the info-hash): ties between idle sites differ by swarm."""
    ordered = sorted(set(sites))
    if not ordered:
        return []
    k = zlib.crc32(salt) % len(ordered)
    return ordered[k:] + ordered[:k]


def assign(plan: SwarmPlan, me: Endpoint, sites: Sequence[str], now: float, ttl: float) -> str | None:
    """`me`'s site (kept if still among `sites`, else the least-loaded one, first in `sites` order on ties);
    its entry renewed until now + ttl. None when there is no site."""
    if not sites:
        return None
    load = plan.load(now)
    current = plan.assigned.get(me)
    if current is not None and current[0] in sites:
        site = current[0]
    else:
        if current is not None:
            load[current[0]] -= 1
        site = min(sites, key=lambda s: (load.get(s, 0), sites.index(s)))
    plan.assigned[me] = (site, now + ttl)
    return site


def share(plan: SwarmPlan, me: Endpoint, sites: Sequence[str], now: float) -> frozenset[str]:
    """The sites whose seeds `me` is handed: its own, and every site no other leecher is assigned to."""
    load = plan.load(now)
    own = plan.assigned.get(me, (None, 0.0))[0]
    return frozenset(s for s in sites if s == own or load.get(s, 0) - (s == own) <= 0)


def leave(plan: SwarmPlan, me: Endpoint) -> None:
    """`me` completed or stopped: its site is free for the others."""
    plan.assigned.pop(me, None)


def keep_peers(compact: bytes, site_of: Mapping[Endpoint, str], allowed: frozenset[str], width: int = 6) -> bytes:
    """Compact peers (BEP 23: 4-byte address, 2-byte port; BEP 7: width 18) without the seeds of sites
    not in `allowed`; peers that are no site's seed are kept."""
    if not site_of:
        return compact
    return b"".join(entry for entry, site in _entries(compact, site_of, width) if site is None or site in allowed)


def has_site(compact: bytes, site_of: Mapping[Endpoint, str], width: int = 6) -> bool:
    """Some site's seed is among these compact peers."""
    return any(site is not None for _, site in _entries(compact, site_of, width))


def _entries(compact: bytes, site_of: Mapping[Endpoint, str], width: int) -> Iterable[tuple[bytes, str | None]]:
    for i in range(0, len(compact) - width + 1, width):
        entry = compact[i:i + width]
        yield entry, site_of.get((str(ipaddress.ip_address(entry[:-2])), int.from_bytes(entry[-2:], "big")))

