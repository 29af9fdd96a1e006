"""When a worker asks the tracker for peers again before its interval is over. Pure.

A worker with no seed connected while it fetches (every seed it was given
left, was banned for a corrupt piece, or could not be reached) asks the
tracker at once rather than wait out the interval (60 s and more): the
tracker's next answer carries a site's seed, or starts one
(tracker/siteseeds.py). A seed that claims every piece and sends corrupt
ones, handed out with a site's seed that took longer to start than the
tracker waited, left the worker with nothing for up to 10 s after its ban.

At once when a peer was lost since the last such announce (a ban, a
connection that failed or ended); without a new loss, every `every`
seconds. Announces forced one after another with no seed in between wait
twice as long each time, from `gap` to `every`: a tracker that keeps
handing out the same unreachable peers (refused at once on loopback) sees
one announce a second at most, then one per `every`.

Sites the worker let go itself (btget/worker/siteshare.py: its share of them,
their turns, their slices held around it) count as seeds had: the tracker
would only hand them back. Counted as lost, a T3 of a 2-site swarm that let
both go asked every second, and just after a Redis failover, before the
store saw the sites' seeds again, such announces had the tracker ask both
sites to start the seeds they ran.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GAP = 1.0  # s: the shortest wait between two announces forced by losing every seed (the first goes at once)
EVERY = 10.0  # s: the longest, and the wait when no peer was lost since the last one


@dataclass
class Reannounce:
    gap: float = GAP
    every: float = EVERY
    _last: float = -math.inf  # when the last forced announce went out
    _wait: float = GAP  # before the next one, after a loss
    _lost: bool = False
    _in_a_row: bool = False  # the last forced announce brought no seed

    def __post_init__(self) -> None:
        self._wait = self.gap

    def lost(self) -> None:
        """A peer was banned, could not be reached, or hung up."""
        self._lost = True

    def due(self, now: float, seeds: int, seedless: bool, let_go: int = 0) -> bool:
        """Whether to announce now. `seeds`: seeds connected; `seedless`: fetching, and a seed was had or a
        connection tried (before that, the tracker's first answer is still on its way); `let_go`: sites
        the worker let go itself, which count as connected."""
        if seeds + let_go > 0:
            self._wait, self._lost, self._in_a_row = self.gap, False, False
            return False
        if not seedless or now - self._last < (self._wait if self._lost else self.every):
            return False
        if self._lost and self._in_a_row:  # one more with no seed in between: the next waits longer
            self._wait = min(self.every, 2 * self._wait)
        self._last, self._lost, self._in_a_row = now, False, True
        return True
