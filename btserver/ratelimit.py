"""A byte rate over many concurrent senders: a token bucket kept as a schedule (GCRA). Pure but for `take`.

Each sender reserves the bytes it is about to send and waits until the
schedule has room: concurrent responses interleave chunk by chunk, so they
share the rate rather than one starving the rest. `burst` bytes may go at
once after a quiet spell.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable


class TokenBucket:
    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = float(rate)
        self.tau = burst / self.rate  # how far the schedule may lag behind now: the burst, in seconds
        self.clock = clock
        self._free_at = 0.0  # when the bytes reserved so far will have gone at `rate`

    def reserve(self, n: int) -> float:
        """Reserve `n` bytes; how long to wait before sending them."""
        now = self.clock()
        self._free_at = max(self._free_at, now) + n / self.rate
        return max(0.0, self._free_at - self.tau - now)

    async def take(self, n: int) -> None:
        wait = self.reserve(n)
        if wait > 0:
            await asyncio.sleep(wait)
