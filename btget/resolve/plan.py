"""Which files each worker or host fetches (pure: file lists in, index lists out).

The split is largest-first greedy by bytes: each file, biggest first, goes
to the share with the fewest bytes so far. Files are never split (a file
larger than a share simply makes that share big), and ties break on file
index so every host computes the same split from the same .torrent —
`--shard K/N` on N batch hosts is the K-th share of exactly this split.
"""

from __future__ import annotations

import fnmatch
import hashlib
import heapq
import random
from dataclasses import dataclass
from typing import Iterable, Sequence

from torrents.errors import UsageError


@dataclass(frozen=True, slots=True)  # slots: 100,000 of them are 7 MB, not 11
class PlanFile:
    index: int  # position in the torrent's file list
    lfn: str
    size: int


def split(files: Sequence[PlanFile], n: int) -> list[list[PlanFile]]:
    """`n` shares balanced by bytes; each share in torrent order; some may be empty."""
    if n < 1:
        raise UsageError("shares", f"need at least one, got {n}")
    if n == 1:
        return [sorted(files, key=lambda f: f.index)]
    shares: list[list[PlanFile]] = [[] for _ in range(n)]
    # The share with the fewest bytes (then the lowest number) from a heap: min() over all
    # shares for each file was most of a 100,000-file start.
    heap = [(0, k) for k in range(n)]
    for f in sorted(files, key=lambda f: (-f.size, f.index)):
        load, k = heapq.heappop(heap)
        shares[k].append(f)
        heapq.heappush(heap, (load + f.size, k))
    return [sorted(s, key=lambda f: f.index) for s in shares]


def shard(files: Sequence[PlanFile], k: int, n: int) -> list[PlanFile]:
    """Share K of N (1-based), as `--shard K/N` fetches."""
    if not 1 <= k <= n:
        raise UsageError("--shard", f"{k}/{n}: K must be between 1 and N")
    return split(files, n)[k - 1]


def parse_shard(text: str) -> tuple[int, int]:
    """'2/8' → (2, 8)."""
    k_text, sep, n_text = text.partition("/")
    if not sep or not k_text.strip().isdigit() or not n_text.strip().isdigit():
        raise UsageError("--shard", f"{text!r} is not K/N (example: 2/8)")
    k, n = int(k_text), int(n_text)
    if n < 1 or not 1 <= k <= n:
        raise UsageError("--shard", f"{text}: K must be between 1 and N")
    return k, n


def select(files: Sequence[PlanFile], globs: Iterable[str]) -> list[PlanFile]:
    """Files whose LFN (or its last component) matches any glob; all files when there is none."""
    patterns = list(globs)
    if not patterns:
        return list(files)
    chosen = [f for f in files
              if any(fnmatch.fnmatchcase(f.lfn, p) or fnmatch.fnmatchcase(f.lfn.rsplit("/", 1)[-1], p)
                     for p in patterns)]
    if not chosen:
        raise UsageError("--files", f"{' '.join(patterns)}: matches none of the {len(files)} files")
    return chosen


def sample(files: Sequence[PlanFile], count: int, seed: int | str | None) -> list[PlanFile]:
    """`count` files picked at random, the same ones for the same seed (in torrent order)."""
    if count < 1:
        raise UsageError("--nrandom", f"must be at least 1, got {count}")
    if count >= len(files):
        return list(files)
    picked = random.Random(seed).sample(sorted(files, key=lambda f: f.index), count)
    return sorted(picked, key=lambda f: f.index)


WORKERS_PER_CORE = 2  # a worker waits on the wire part of the time; more than two per core only compete


def worker_count(requested: str | int, cpus: int, files: int) -> tuple[int, str | None]:
    """How many workers, and what to tell the user if fewer than asked for are started.

    'auto' → one per core (at most 4: the wire, not Python, is then the limit); a number is
    capped at two per core (each is a process with its own libtorrent session) and at one per file.
    """
    if isinstance(requested, str):
        if requested == "auto":
            return max(1, min(cpus, 4, files)), None
        if not requested.isdigit():
            raise UsageError("--workers", f"{requested!r} is not a number or 'auto'")
        requested = int(requested)
    if requested < 1:
        raise UsageError("--workers", f"must be at least 1, got {requested}")
    cap = WORKERS_PER_CORE * max(cpus, 1)
    if requested > cap:
        return min(cap, files), (f"--workers {requested}: this host has {cpus} cores; starting "
                                 f"{min(cap, files)} (at most {WORKERS_PER_CORE} per core)")
    return max(1, min(requested, files)), None


def share_key(share: Sequence[PlanFile]) -> str:
    """A stable name for a share's resume state: the same files → the same state file."""
    digest = hashlib.sha1(",".join(str(f.index) for f in sorted(share, key=lambda f: f.index)).encode())
    return digest.hexdigest()[:12]
