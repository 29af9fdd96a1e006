"""A fetched copy of a dataset against its source, byte for byte: `btswarm demo`'s proof, the tests' too."""

from __future__ import annotations

import filecmp
from pathlib import Path


def compare_trees(source: Path, copy: Path) -> list[str]:
    """LFNs that differ or are missing in `copy` (byte for byte); dot directories (.bt-get state) left out."""
    bad = []
    for path in sorted(source.rglob("*")):
        if not path.is_file() or any(p.startswith(".") for p in path.relative_to(source).parts):
            continue
        rel = path.relative_to(source)
        other = copy / rel
        if not other.is_file() or not filecmp.cmp(path, other, shallow=False):
            bad.append(rel.as_posix())
    return bad
