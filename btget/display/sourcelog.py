"""Bytes per source over a run, for --json's `sources_over_time` (what `btswarm plot` draws).

The parent sees each worker's cumulative bytes per peer endpoint in its
Progress events (sampled from libtorrent every 50 ms); this keeps their sum
at most once a second, and the last one, so a run of an hour is a few
hundred points whatever its events. Past MAX_SAMPLES every other sample is
dropped and the interval doubles: a long run keeps its whole span at a
coarser step. Pure: time is passed in.
"""

from __future__ import annotations

from typing import Mapping

INTERVAL = 0.25
MAX_SAMPLES = 600


class SourceLog:
    def __init__(self, interval: float = INTERVAL, max_samples: int = MAX_SAMPLES) -> None:
        self.interval = interval
        self.max_samples = max_samples
        self.samples: list[tuple[float, dict[str, int]]] = []  # (seconds from the start, endpoint → bytes so far)

    def sample(self, t: float, raw: Mapping[str, int]) -> None:
        """The cumulative bytes per endpoint at `t` seconds from the start."""
        if self.samples and t - self.samples[-1][0] < self.interval:
            return
        self.samples.append((t, dict(raw)))
        if len(self.samples) > self.max_samples:
            self.samples = [*self.samples[:-1:2], self.samples[-1]]  # the first and the newest stay
            self.interval *= 2

    def finish(self, t: float, raw: Mapping[str, int]) -> list[tuple[float, dict[str, int]]]:
        """Every sample kept, with the end of the run (`t`, `raw`) last."""
        if self.samples and self.samples[-1][0] >= t:
            self.samples.pop()
        self.samples.append((t, dict(raw)))
        return self.samples
