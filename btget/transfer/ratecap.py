"""A run's rate caps shared among its workers (pure).

`--max-rate R` caps the whole run, like aria2's overall limit: four workers
share R, they do not each get it. Each libtorrent session can only cap
itself, so the parent shares R out and moves it to where it is used: a
site's seed unchokes one T3 connection at a time (`upload_slots`), so at any
moment some workers are held back by the cap and others by the swarm, and
a rigid R/4 each leaves much of R unused (docs/benchmarks.md "ratecap").
So every second or so: a worker using less than it was given keeps what it
uses and some headroom, and the rest goes evenly to the workers that use
all they have (`fill`). That alone still fell short of R: a worker the
seeds choke still holds a floor it cannot use, and one they newly unchoke
takes a look or two to get its part. So the parts may add up
to more than R while the run as a whole (over WINDOW) stays below R with some
worker held back by its part (`gain`, up to GAIN_MAX); above R they add up
to less. The run's rate follows R, not the sum of the parts; and the workers
held back get no more than R together, so one worker alone never passes R,
and a burst of the others is bounded by their small parts. A finished
worker needs none. Uploads are split evenly. libtorrent reads a limit of 0
as "none": every part is at least 1 B/s.
"""

from __future__ import annotations

from collections.abc import Mapping

FLOOR = 0.25  # of an even share: the least a worker still fetching is given
CHANGE = 0.10  # a worker's new share is sent only when it moves by more than this
BUSY = 0.8  # a worker using this much of what it was given is held back by the cap
HEADROOM = 1.3  # what a worker that is not held back keeps, over what it uses: room to grow
GAIN_MIN, GAIN_MAX = 0.8, 1.6  # the parts add up to between these times the cap (see `gain`)
WINDOW = 2.0  # seconds over which a worker's use is measured (looks come every 0.5 s; the bytes in bursts)


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


def moved(old: Mapping[int, int], new: Mapping[int, int]) -> dict[int, int]:
    """The parts of `new` worth sending: those that moved by more than CHANGE, or appeared (each
    is a settings pack applied to a worker's session; one that barely moved is not worth it)."""
    return {k: v for k, v in new.items() if k not in old or abs(v - old[k]) > CHANGE * max(old[k], 1)}


def fill(total: int, using: Mapping[int, float], given: Mapping[int, int], gain: float = 1.0) -> dict[int, int]:
    """`total` bytes/s (0: no cap) re-shared among the workers still fetching (`given`: what each
    was given, `using`: what each took through the cap lately, bytes/s), the parts adding up to
    `gain` times `total` (see `gain`) but those held back by it never to more than `total`."""
    if total <= 0 or not given:
        return {k: 0 for k in given}
    floor = total * FLOOR / len(given)
    light = {k: max(floor, using.get(k, 0.0) * HEADROOM) for k, g in given.items()
             if using.get(k, 0.0) < BUSY * g}
    busy = [k for k in given if k not in light]
    spare = min(total * gain - sum(light.values()), total)
    if busy and spare >= floor * len(busy):
        shares = {**light, **{k: spare / len(busy) for k in busy}}
    else:  # everyone held back by the swarm, or the light ones took too much: scale to the cap
        wanted = {**light, **{k: floor for k in busy}}
        scale = total / sum(wanted.values())
        shares = {k: v * scale for k, v in wanted.items()}
    return {k: max(1, int(v)) for k, v in shares.items()}


def held_back(using: Mapping[int, float], given: Mapping[int, int]) -> bool:
    """Whether some worker still fetching takes all it was given (its part, not the swarm, limits it)."""
    return any(using.get(k, 0.0) >= BUSY * g for k, g in given.items())


def gain(old: float, observed: float, total: int, held: bool) -> float:
    """How many times `total` the workers' parts add up to next, from `old`, the run's rate
    `observed` (over WINDOW) and whether some worker is `held` back by its part. A feedback on the
    run's own rate, damped (the square root of the error) against the noise of the looks."""
    if total <= 0 or not held:
        return 1.0  # the swarm, not the cap, sets the pace: nothing to make up for
    error = total / max(observed, total / GAIN_MAX ** 2)
    return min(GAIN_MAX, max(GAIN_MIN, old * error ** 0.5))
