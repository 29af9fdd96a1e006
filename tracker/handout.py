"""Which peers an announce gets back: pure, given the swarm's groups and the requester.

Order of preference: peers at the requester's own site (traffic that stays
on the site's network and spares the T2s), then seeds, then the rest; each
group shuffled so load spreads over the swarm. At least one seed is always
handed out when the swarm has one, so no client is left with only peers
that lack the pieces it needs.

`pick` draws from groups the store keeps apart (seeds, leechers, the
requester's site), sampling only what it hands out: its cost does not grow
with the swarm. `select` builds those groups from a plain list of peers.
The Redis store runs the same rules in Lua (tracker/lua/announce.lua); the
tests hold both stores to them.
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


def pick(local: Sequence[P], seeds: Sequence[P], others: Sequence[P], requester: tuple[str, int], numwant: int,
         rng: random.Random | None = None, me: P | None = None) -> list[P]:
    """Up to `numwant` (≤ MAX_NUMWANT) peers: `local` first, then `seeds`, then `others`; never the requester.

    `local` (the requester's site) may overlap the other two; a peer is
    handed out once. `me`, the requester's own entry when the caller has
    it, is excluded by identity (cheaper than comparing endpoints).
    """
    rng = rng or _RNG
    numwant = max(0, min(numwant, MAX_NUMWANT))
    if numwant == 0:
        return []
    ip, port = requester

    def draw(group: Sequence[P], k: int, extra: int) -> list[P]:
        got = sample(group, k + extra, rng)
        if me is not None:
            return [p for p in got if p is not me]
        return [p for p in got if p.port != port or p.ip != ip]

    if not local:
        # The usual case: seeds and others are disjoint, only the requester to leave out.
        chosen = draw(seeds, numwant, 1)[:numwant]
        if len(chosen) < numwant:
            chosen += draw(others, numwant - len(chosen), 1)[:numwant - len(chosen)]
        return chosen
    chosen = draw(local, numwant, 1)[:numwant]
    taken = {id(p) for p in chosen}
    seed_room = numwant - len(chosen)
    for group in (seeds, others):
        room = numwant - len(chosen)
        if room <= 0:
            continue
        # Enough extra draws to cover the requester and peers already taken from `local`.
        for p in draw(group, room, 1 + len(taken)):
            if id(p) not in taken:
                chosen.append(p)
                taken.add(id(p))
                room -= 1
                if room == 0:
                    break
    if seed_room <= 0 and seeds and not any(p.seed for p in chosen):
        for s in draw(seeds, len(chosen) + 1, 1):
            if id(s) not in taken:
                chosen[-1] = s
                break
    return chosen


def select(peers: Sequence[P], requester: tuple[str, int], numwant: int, *,
           site_of: Callable[[str], str | None] | None = None, requester_site: str | None = None,
           rng: random.Random | None = None) -> list[P]:
    """Up to `numwant` (≤ MAX_NUMWANT) peers from `peers`, never the requester itself."""
    seeds = [p for p in peers if p.seed]
    others = [p for p in peers if not p.seed]
    local: list[P] = []
    if requester_site is not None and site_of is not None:
        local = [p for p in peers if site_of(p.ip) == requester_site]
    return pick(local, seeds, others, requester, numwant, rng)


def sample(group: Sequence[P], k: int, rng: random.Random) -> list[P]:
    """min(k, len(group)) members of `group`, uniformly at random, in random order; O(k), not O(len(group)).

    Random numbers come from one `randbytes`, scaled by multiply-and-shift
    (bias below len(group) / 2**32): rng.sample draws each number through a
    Python-level `_randbelow`. For a small group, a partial Fisher-Yates over
    a copy; for a large one, distinct indices drawn with rejection.
    """
    n = len(group)
    k = min(k, n)
    if k <= 0:
        return []
    if 4 * k >= n:
        pool = list(group)
        for i, x in enumerate(memoryview(rng.randbytes(4 * k)).cast("I")):
            j = i + ((x * (n - i)) >> 32)
            pool[i], pool[j] = pool[j], pool[i]
        del pool[k:]
        return pool
    seen: set[int] = set()
    out = []
    while len(out) < k:
        for x in memoryview(rng.randbytes(4 * (k - len(out)) + 8)).cast("I"):
            j = (x * n) >> 32
            if j not in seen:
                seen.add(j)
                out.append(group[j])
                if len(out) == k:
                    break
    return out



