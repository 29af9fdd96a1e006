"""What bt-get's peer ids say to a site: which part of a dataset a worker wants. Pure.

A BitTorrent peer id is 20 bytes; bt-get sets libtorrent's `peer_fingerprint`:

    -BW0100-RRRRRRII        a worker that wants every piece of the dataset
    -BP0100-RRRRRRIIPPPP    a worker that wants a part of it: a `--shard`, a `--files`
                            selection, or its share of a run's several workers

R is the run (6 hex digits, shared by its workers: they know each other by it),
I the worker's index (2 digits), P the part (4 hex digits of a digest of the
wanted files' indices): workers that want the same files carry the same P,
whichever T3 they run on. libtorrent fills a shorter id up to 20 bytes.

A site serves a few T3s of a swarm at a time and lets them pass pieces on
to each other; peers that want different parts cannot, so each part gets
upload slots of its own (btserver/uploadslots.py). Any other peer id (another
client, an older bt-get) counts as wanting every piece.
"""

from __future__ import annotations

import hashlib
from typing import Iterable

WHOLE = "-BW0100-"
PART = "-BP0100-"
RUN_LEN = 6
INDEX_LEN = 2
PART_LEN = 4


def run_prefix(whole: bool, run: str) -> str:
    """A run's prefix: the tag for what its workers want, then the run's 6 hex digits."""
    if len(run) != RUN_LEN:
        raise ValueError(f"a run is {RUN_LEN} characters, got {run!r}")
    return (WHOLE if whole else PART) + run


def part_tag(file_indices: Iterable[int]) -> str:
    """The part a set of files is: the same files give the same tag."""
    text = ",".join(str(i) for i in sorted(set(file_indices)))
    return hashlib.sha1(text.encode()).hexdigest()[:PART_LEN]


def fingerprint(prefix: str, index: int, part: str = "") -> str:
    """A worker's peer-id prefix: its run's, its index, and its part when it wants one."""
    return f"{prefix}{index:0{INDEX_LEN}d}{part}"


def part_of(pid: bytes) -> str | None:
    """The part a peer wants, from its peer id; None for every piece (any id but a partial bt-get worker's)."""
    start = len(PART) + RUN_LEN + INDEX_LEN
    tag = pid[start:start + PART_LEN]
    if not pid.startswith(PART.encode()) or len(tag) != PART_LEN:
        return None
    try:
        return tag.decode("ascii")
    except UnicodeDecodeError:
        return None
