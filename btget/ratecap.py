"""A run's rate caps shared among its workers (pure).

`--max-rate R` caps the whole run, like aria2's overall limit: four workers
share R, they do not each get it. Each libtorrent session can only cap
itself, so the parent shares R out and moves it to where it is used: a
site's seed unchokes one T3 connection at a time (`upload_slots`), so at any
moment some workers are held back by the cap and others by the swarm. A
rigid R/4 each gave four workers 0.4-0.5 of R on shaped links (one worker:
0.9). So every second or so: a worker using less than it was given keeps
what it uses and some headroom, and the rest goes evenly to the workers that
use all they have (`fill`). A finished worker needs none. Uploads are split
evenly. libtorrent reads a limit of 0 as "none": every part is at least 1 B/s.
"""

from __future__ import annotations

from collections.abc import Mapping

FLOOR = 0.25  # of an even share: the least a worker still fetching is given
CHANGE = 0.10  # a worker's new share is sent only when it moves by more than this
BUSY = 0.8  # a worker using this much of what it was given is held back by the cap
HEADROOM = 1.3  # what a worker that is not held back keeps, over what it uses: room to grow


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


def fill(total: int, using: Mapping[int, float], given: Mapping[int, int]) -> dict[int, int]:
    """`total` bytes/s (0: no cap) re-shared among the workers still fetching (`given`: what each
    was given, `using`: what each took through the cap lately, bytes/s)."""
    if total <= 0 or not given:
        return {k: 0 for k in given}
    floor = total * FLOOR / len(given)
    light = {k: max(floor, using.get(k, 0.0) * HEADROOM) for k, g in given.items()
             if using.get(k, 0.0) < BUSY * g}
    busy = [k for k in given if k not in light]
    spare = total - sum(light.values())
    if busy and spare >= floor * len(busy):
        shares = {**light, **{k: spare / len(busy) for k in busy}}
    else:  # everyone held back by the swarm, or the light ones took too much: scale to the cap
        wanted = {**light, **{k: floor for k in busy}}
        scale = total / sum(wanted.values())
        shares = {k: v * scale for k, v in wanted.items()}
    return {k: max(1, int(v)) for k, v in shares.items()}
