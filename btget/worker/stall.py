"""Giving up on a peer that stops sending: which peers to shut out, and for how long. Pure.

A site that hangs (its bt-server stopped, its storage reads blocked) keeps
its TCP connection and the blocks we asked it for. libtorrent frees those
only slowly: a request timeout snubs the peer and takes back one block at a
time, and in end-game every other peer is asked for a busy block one at a
time, so a few seconds of requests queued at the hung site (request queue
depth = rate x request_queue_time) trickle in at a few hundred KB/s. The
worker instead shuts out, by its address (libtorrent's IP filter, which
disconnects it and returns its blocks to the picker at once), a peer that
holds requests of ours, is not choking us and has sent nothing for
`after` seconds; after BAN_FOR seconds it may be connected again.

Another T3 is given longer (`peer_after`) than a site, and news of a new
piece from it counts as a sign of life. A T3 passes pieces to the whole
swarm through one uplink, and its connections go silent for seconds while it
is healthy, on shaped links often for longer than a site's limit, HAVEs
counted as life or not. With a site's limit the watch shut healthy T3s out,
a T3 so left with fewer peers saw fewer of the pieces held around it, and
so kept its sites sending pieces the swarm already held (docs/benchmarks.md
"wan"). A site serves a few T3s at a time (its
upload slots), so its connections do not starve so, and its requests are
the ones worth freeing fast.

Nothing must have moved the other way either. Our requests travel on the
connection that carries our pieces to that peer, behind them in our send
buffers: a T3 the swarm downloads from (the first holder of a site's slice)
had megabytes queued to each peer, and its requests waited there for
seconds while the peer, which had not yet received them, sent nothing. The
watch took that for a hang and shut healthy T3s out of it, and the T3s
that the sites fed finished last (docs/benchmarks.md "wan"). A hung
peer receives nothing either (its socket fills), so it is still found.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

STALL_AFTER = 3.0  # s a site is silent holding our requests (a live one at 100 kbit/s sends a block per 1.3 s)
PEER_STALL_AFTER = 15.0  # s another T3 is (longer than any healthy silence: see above)
BAN_FOR = 30.0  # s before a shut-out address may be connected again


@dataclass(frozen=True)
class PeerSample:
    ip: str
    port: int
    downloaded: int  # payload bytes received from it on this connection
    queued: int  # our requests it holds
    choked: bool  # it chokes us (then it holds no requests that count)
    uploaded: int = 0  # payload bytes sent to it on this connection (our requests queue behind them)
    pieces: int = 0  # pieces it has told us it holds (a T3 announces each new one: alive)
    site: bool = True  # a storage site's seed, not another T3


@dataclass
class StallWatch:
    after: float = STALL_AFTER
    peer_after: float = PEER_STALL_AFTER
    never: frozenset[str] = frozenset()  # addresses never shut out (our own: sibling workers)
    # peer → ((bytes from it, bytes to it, its pieces), since when none moved)
    _last: dict[tuple[str, int], tuple[tuple[int, int, int], float]] = field(default_factory=dict)

    def step(self, now: float, peers: Iterable[PeerSample], out: Collection[str] = ()) -> list[str]:
        """Addresses to shut out now (each once), from this sample of the connected peers; `out`: those
        shut out already (for BAN_FOR, by the caller: btget/worker/steering.py)."""
        seen, stalled = {}, []
        for p in peers:
            key = (p.ip, p.port)
            moved = (p.downloaded, p.uploaded, p.pieces)
            then, since = self._last.get(key, ((-1, -1, -1), now))
            if moved != then or p.queued == 0 or p.choked:
                since = now  # moving (either way, or news of its pieces), or nothing asked of it: not stalled
            seen[key] = (moved, since)
            if (now - since >= (self.after if p.site else self.peer_after) and p.ip not in self.never
                    and p.ip not in out and p.ip not in stalled):
                stalled.append(p.ip)
        self._last = seen
        return stalled
