"""How many peers of a swarm a site's seed unchokes at once. Pure.

`[server] upload_slots` (1 by default) spares the site: it serves that many
T3s of a swarm at a time, at full speed, and the T3s pass the pieces on to
each other (docs/benchmarks.md "egress"). Peers that want different parts
of the dataset cannot: a `--shard` array's hosts, or one run's several
workers (each fetches its own share), lack what the others have. Served one
at a time, they wait in turn, long after one client fetching everything
would be done (docs/benchmarks.md "wan"). So the limit applies per part:
`upload_slots` for each part that the seed's interested peers want
(torrents/peerid.py; the whole dataset is one part), at most MAX_SLOTS.

libtorrent sets no fewer than 2 slots on a running torrent: a seed whose
slots were raised goes back to 2, not 1, until it stops.
"""

from __future__ import annotations

from typing import Iterable

MAX_SLOTS = 32
LIBTORRENT_MIN = 2  # torrent_handle.set_max_uploads refuses fewer


def slots(base: int, parts: Iterable[str | None], current: int) -> int:
    """The slots a seed should have: `base` per distinct part in `parts` (one entry per interested peer,
    None for one that wants every piece), at least `base`; 0 (no limit) stays 0. `current` is what it has."""
    if base <= 0:
        return 0
    want = min(base * max(1, len(set(parts))), max(base, MAX_SLOTS))
    if want < LIBTORRENT_MIN and want != current:
        return LIBTORRENT_MIN
    return want
