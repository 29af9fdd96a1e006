"""When bt-get reached each step of its start: epoch seconds by name, for --json's `timeline`.

The parent marks its own steps (imported, configured, resolved, parsed, workers
started); the workers' steps (session listening, torrent added, first peer
connected) arrive in their events and are merged here, the earliest worker's
kept. scripts/bench_cost.py splits a start into phases from these marks and
the launch time it took itself; a mark costs one dict lookup.
"""

from __future__ import annotations

import time
from typing import Mapping

_marks: dict[str, float] = {}


def mark(name: str, at: float | None = None) -> None:
    """Record `name` at `at` (default now) unless an earlier time is recorded already."""
    at = time.time() if at is None else at
    if name not in _marks or at < _marks[name]:
        _marks[name] = at


def merge(marks: Mapping[str, float] | None) -> None:
    for name, at in (marks or {}).items():
        mark(name, at)


def marks() -> dict[str, float]:
    """Every mark so far, in time order, rounded to the millisecond."""
    return {k: round(v, 3) for k, v in sorted(_marks.items(), key=lambda kv: kv[1])}
