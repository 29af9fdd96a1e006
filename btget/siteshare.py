"""A T3 of a busy swarm takes its share of the sites, not all of them. Pure.

Sites serve `upload_slots` T3s of a swarm at a time (1 by default). The
first T3 to connect is unchoked by every site and takes the dataset at ΣR,
while it can pass pieces on only at its own uplink C: the other T3s wait
for it, and the sites end up sending the whole dataset to that one T3 and
then most of it again (docs/benchmarks.md "wan": the first of 8 T3s got
29-37 MB from each of 3 sites, 105 MB in all). So a worker unchoked by more
sites than its share lets the extra ones go (by its IP filter, for `SHED_FOR`
seconds): their slot passes to another T3, each site then feeds a
different T3, and each of those forwards what it gets at about the rate it
gets it.

Its share is ceil(sites / T3s downloading): a lone T3 keeps every site, two
T3s on three sites keep two each, eight keep one. T3s downloading are this
one and the connected peers that are neither seeds nor sibling workers. The
sites kept are those that have sent most on this connection (a site shed
mid-transfer costs its queued blocks).

A T3 that fetches only part of the dataset (`--shard`, `--files`) keeps every
site: the T3s around it may want other pieces and cannot pass on to it
what it lacks (the shard rule).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SHED_FOR = 10.0  # s a site let go is not connected again (then the worker re-announces and chooses anew)


@dataclass(frozen=True)
class SitePeer:
    ip: str
    received: int  # payload bytes it has sent us on this connection
    unchokes_us: bool


def share(sites: int, downloading: int) -> int:
    """How many sites one T3 keeps unchoking it: ceil(sites / T3s downloading), at least one."""
    return max(1, math.ceil(sites / max(1, downloading)))


def to_shed(peers: list[SitePeer], sites: int, downloading: int, whole: bool) -> list[str]:
    """The site addresses to let go: those unchoking us beyond our share (fewest bytes received first)."""
    if not whole:
        return []
    serving = sorted((p for p in peers if p.unchokes_us), key=lambda p: (-p.received, p.ip))
    return [p.ip for p in serving[share(sites, downloading):]]
