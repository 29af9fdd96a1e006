"""Bytes served, from the counters the repository samples (btrepo/swarmlog.py): pure arithmetic.

A site's count of the bytes it sent runs from its daemon's start, and the
tracker's count of completions from the tracker's: a count that went down
was started again, so what it grew by since the sample before is its new
value. What T3s sent is not counted anywhere; it is estimated from the
completions: each one took the whole dataset, and what the sites did not
send of that came from other peers, the T3s.
"""

from __future__ import annotations

from itertools import accumulate, pairwise
from typing import Mapping, Sequence


def grown(before: int, after: int) -> int:
    """What a counter grew by between two samples; one that went down was restarted and counted from 0."""
    return after - before if after >= before else after


def increments(counts: Sequence[int]) -> list[int]:
    """What a counter grew by from each sample to the next."""
    return [grown(a, b) for a, b in pairwise(counts)]


def sites_sent(samples: Sequence[Mapping[str, int]]) -> list[int]:
    """Each sample's {site: its count} → what all sites sent since the sample before (0 for the first).
    A site missing from a sample says nothing (the tracker restarted and has not heard from it yet): its
    next count is taken against its last one."""
    last: dict[str, int] = {}
    out = []
    for counts in samples:
        out.append(sum(grown(last[site], n) for site, n in counts.items() if site in last))
        last.update(counts)
    return out


def bytes_served(samples: Sequence[tuple[float, int, Mapping[str, int]]], total_size: int
                 ) -> list[tuple[float, int, int]]:
    """(epoch, completions, {site: bytes it sent}) oldest first → (epoch, bytes the sites sent, bytes the
    T3s sent, estimated) since the first sample.

    The T3s' share is, at each sample, the completions' bytes (completions × `total_size`) less the sites'
    bytes, at least 0 and never less than before: the sites' bytes that went to downloads not complete yet
    count against those downloads when they complete, however many samples later.
    """
    sites = accumulate(sites_sent([counts for _, _, counts in samples]))
    completions = accumulate([0] + increments([c for _, c, _ in samples]))
    out = []
    t3s = 0
    for (at, _, _), by_sites, done in zip(samples, sites, completions):
        t3s = max(t3s, done * total_size - by_sites)
        out.append((at, by_sites, t3s))
    return out


def egress(samples: Sequence[tuple[float, int]]) -> list[tuple[float, float]]:
    """(epoch, bytes a site had sent) oldest first → (epoch, bytes/s since the sample before)."""
    times = [at for at, _ in samples]
    return [(at, sent / (at - then)) for (then, at), sent in zip(pairwise(times), increments([n for _, n in samples]))
            if at > then]
