"""Deterministic sample datasets, named like real ones, for demos, tests and benchmarks."""

from __future__ import annotations

import os
import random
from pathlib import Path

SAMPLE_NAME = "data08_cos.00091949.physics_IDCosmic.merge.DPD_IDCOMM.o4_r653_p26_tid051203"
_CHUNK = 4 * 1024 * 1024


def sample_lfn(i: int) -> str:
    return f"DPD_IDCOMM.051203._{i:05d}.pool.root.1"


def generate(dest: str | os.PathLike, *, name: str = SAMPLE_NAME, files: int = 29, total_size: int = 300 * 2**20,
             seed: int = 51203, jitter: float = 0.3) -> Path:
    """Write `files` files of about `total_size` bytes in all into dest/name; return that directory.

    The same arguments always give the same bytes, so two sites generating
    it independently hold the same replica (and compute the same info-hash).
    Existing files of the right size are kept.
    """
    rng = random.Random(seed)
    root = Path(dest) / name
    root.mkdir(parents=True, exist_ok=True)
    sizes = _sizes(rng, files, total_size, jitter)
    for i, size in enumerate(sizes, 1):
        path = root / sample_lfn(i)
        if path.is_file() and path.stat().st_size == size:
            continue
        frng = random.Random(seed * 1_000_003 + i)
        tmp = path.with_name(path.name + ".part")
        with open(tmp, "wb") as out:
            left = size
            while left:
                n = min(left, _CHUNK)
                out.write(frng.randbytes(n))
                left -= n
        os.replace(tmp, path)
    return root


def _sizes(rng: random.Random, files: int, total_size: int, jitter: float) -> list[int]:
    """`files` sizes within ±jitter of the mean that add up to exactly `total_size` (each at least 1 byte)."""
    if files <= 0:
        return []
    weights = [1 + rng.uniform(-jitter, jitter) for _ in range(files)]
    scale = max(total_size - files, 0) / sum(weights)
    sizes = [1 + int(w * scale) for w in weights]
    sizes[-1] += max(total_size - sum(sizes), 0)
    return sizes
