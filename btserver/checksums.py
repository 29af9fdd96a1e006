"""A replica against its catalog: the adler32 the catalog lists vs the one its bytes have. Pure.

The builder reads every byte to hash the pieces and sums adler32 in the
same pass (when the dataset has catalog checksums at all), so checking
costs no extra read. A mismatch is a problem for that file, and the
dataset is not published: a torrent made from bytes the catalog
contradicts would make bad bytes the dataset.
"""

from __future__ import annotations

from typing import Mapping

from torrents.build import FileSum
from torrents.dataset import Dataset, Problem



def wants_adler32(ds: Dataset) -> bool:
    """Whether to sum adler32 while hashing: some file has a catalog checksum."""
    return any(f.adler32 is not None for f in ds.files)


def mismatches(ds: Dataset, sums: Mapping[str, FileSum]) -> list[Problem]:
    """Files whose bytes disagree with the catalog's adler32, each with both checksums."""
    out = []
    for f in ds.files:
        have = sums.get(f.lfn)
        if f.adler32 is None or have is None or have.adler32 is None:
            continue
        if have.adler32 != f.adler32:
            out.append(Problem(ds.name, f"{ds.name}/{f.lfn}",
                               f"adler32 of the replica is {have.adler32}, the catalog says {f.adler32}"))
    if out:
        out.append(Problem(ds.name, ds.name, f"{len(out)} of {len(ds.files)} files contradict the catalog's "
                                             "checksums; not published"))
    return out
