"""What the repository serves again and again, kept until the catalog changes.

A batch start (a 1,000-job array) asks for one dataset's record and
.torrent within seconds. Read from SQLite, built and encoded for every
request, a record is served too slowly for that (docs/benchmarks.md
"repo"): SQLite reads on a thread pool, one JSON or bencode encoding per
request. Kept here, a request costs
a dictionary lookup and the live parts (the swarm, the web seeds of the
sites holding the version now), which are never kept.

Every entry carries the catalog's generation read *before* what it was
computed from; it is used only while the generation is unchanged. The
generation (btrepo.db.Database.generation) is SQLite's data_version,
which moves with every commit of any other connection: this process's
writer, `bt-repo choose` on the same file, another bt-repo process. So no
write path has to remember to invalidate, and a publish is seen by the
first request after its answer.

Standard library only; the clock of change is passed in.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Hashable

DEFAULT_MAX_BYTES = 64 << 20
# Larger values are not kept: one would push out everything else (a 100,000-file
# record is ~10 MB) and is asked for rarely enough to build each time.
MAX_SHARE = 4


class CatalogCache:
    """An LRU of values keyed by anything hashable, bounded by the sizes given, cleared when the
    generation moves."""

    def __init__(self, generation: Callable[[], int], *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._generation = generation
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._bytes = 0
        self._current: int | None = None
        self.hits = self.misses = 0

    def fresh(self) -> int:
        """The generation now, forgetting everything kept under an earlier one. Call it first in a
        request and pass what it returns to `put`."""
        gen = self._generation()
        if gen != self._current:
            self._entries.clear()
            self._bytes = 0
            self._current = gen
        return gen

    def get(self, key: Hashable) -> object | None:
        """The value kept for `key` under the generation of the last `fresh()`, or None."""
        found = self._entries.get(key)
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(key)
        return found[0]

    def put(self, generation: int, key: Hashable, value: object, size: int) -> None:
        """Keep `value`, computed from reads made after `fresh()` returned `generation`. Nothing is
        kept when a later `fresh()` saw the catalog change (the value may predate the change); a
        change no `fresh()` has seen yet clears the value with the rest at the next one."""
        if generation != self._current or size > self.max_bytes // MAX_SHARE:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old[1]
        self._entries[key] = (value, size)
        self._bytes += size
        while self._bytes > self.max_bytes:
            _, (_, dropped) = self._entries.popitem(last=False)
            self._bytes -= dropped

    def __len__(self) -> int:
        return len(self._entries)
