"""Which peers an announce gets back: pure, given the swarm and the requester.

Order of preference: peers at the requester's own site (traffic that stays
on the site's network and spares the T2s), then seeds, then the rest; each
group shuffled so load spreads over the swarm. At least one seed is always
handed out when the swarm has one, so no client is left with only peers
that lack the pieces it needs.
"""

from __future__ import annotations

import random
from typing import Callable, Sequence, TypeVar

from tracker.protocol import MAX_NUMWANT


class _PeerLike:  # the attributes selection reads; tracker.peerstore.Peer has them
    ip: str
    port: int
    seed: bool


P = TypeVar("P", bound=_PeerLike)
_RNG = random.Random()


def select(peers: Sequence[P], requester: tuple[str, int], numwant: int, *,
           site_of: Callable[[str], str | None] | None = None, requester_site: str | None = None,
           rng: random.Random | None = None) -> list[P]:
    """Up to `numwant` (≤ MAX_NUMWANT) peers from `peers`, never the requester itself."""
    rng = rng or _RNG
    numwant = max(0, min(numwant, MAX_NUMWANT))
    if numwant == 0:
        return []
    ip, port = requester
    local: list[P] = []
    seeds: list[P] = []
    others: list[P] = []
    for p in peers:
        if p.port == port and p.ip == ip:
            continue
        if requester_site is not None and site_of is not None and site_of(p.ip) == requester_site:
            local.append(p)
        elif p.seed:
            seeds.append(p)
        else:
            others.append(p)
    total = len(local) + len(seeds) + len(others)
    if total <= numwant:
        # Everyone goes out; order still matters to clients that connect in order.
        rng.shuffle(local)
        rng.shuffle(seeds)
        rng.shuffle(others)
        return local + seeds + others
    chosen: list[P] = []
    for group in (local, seeds, others):
        room = numwant - len(chosen)
        if room <= 0:
            break
        chosen += rng.sample(group, room) if len(group) > room else _shuffled(group, rng)
    if seeds and not any(p.seed for p in chosen):
        chosen[-1] = rng.choice(seeds)
    return chosen


def _shuffled(group: list[P], rng: random.Random) -> list[P]:
    rng.shuffle(group)
    return group
