"""A run's rate caps shared among its workers (pure).

`--max-rate R` caps the whole run, like aria2's overall limit: four workers
share R, they do not each get it. Each libtorrent session can only cap
itself, so the parent splits R: by the bytes each worker still has to fetch
(the one that lags gets more of the link), never below a floor so that a
nearly finished worker is not starved into the end-game; a finished worker
needs none, and its part goes to the others. Uploads are split evenly.
libtorrent reads a limit of 0 as "none": every share is at least 1 B/s.
"""

from __future__ import annotations

from collections.abc import Mapping

FLOOR = 0.25  # of an even share: the least a worker still fetching is given
CHANGE = 0.10  # a worker's new share is sent only when it moves by more than this


def split(total: int, remaining: Mapping[int, int]) -> dict[int, int]:
    """`total` bytes/s (0: no cap) over the workers `remaining` names (worker → bytes left;
    0 for one that is done, which keeps the least share)."""
    if total <= 0 or not remaining:
        return {k: 0 for k in remaining}
    fetching = {k: r for k, r in remaining.items() if r > 0}
    if not fetching:  # all done: seeding, or about to stop
        return {k: max(1, total // len(remaining)) for k in remaining}
    floor = total * FLOOR / len(fetching)
    spare = total - floor * len(fetching)
    left = sum(fetching.values())
    return {k: max(1, int(floor + spare * fetching[k] / left)) if k in fetching else 1 for k in remaining}


def even(total: int, workers: int) -> int:
    """One worker's part of an upload cap (0: no cap)."""
    return max(1, total // workers) if total > 0 and workers > 0 else 0


def changed(old: Mapping[int, int], new: Mapping[int, int]) -> bool:
    """Whether `new` is worth sending: some share moved by more than CHANGE, or appeared."""
    return any(k not in old or abs(v - old[k]) > CHANGE * max(old[k], 1) for k, v in new.items())
