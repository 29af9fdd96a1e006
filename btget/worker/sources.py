"""Which source sent how many bytes: one worker's accounting of its peers (pure, standard library only).

libtorrent counts payload per connection (`peer_info.total_download`), and a
connection's count goes with it when it closes. The worker samples its
connections every 50 ms (`Ledger.sample`) and adds up the growth of each
count; what arrived after the last sample that saw it (a seed hangs up the
instant we complete) is shared out at the end (`Ledger.attribute_rest`), so
the sources add up to what was downloaded.

The share-out is computed whenever the sources are read, from what is known
then: the alerts that name the peers who left at the end (their peer ids)
come after the one that says we finished. When no sample saw bytes at all
(a loaded host: a whole share arrived between two samples) the guess is by
the peers that completed a handshake, each once: a sibling worker is often
connected twice for a moment (to its listen endpoint, and from its ephemeral
one, until libtorrent closes one as a duplicate peer id). Counting those as
two peers, and the second not known as a sibling, put one worker's bytes
under two names in a summary (issue 26: `'worker 1': 4543829,
'127.0.0.1:46365': 4543829`).

A source is named by its connection's endpoint `ip:port`; a web seed (BEP 19)
`web seed ip:port`, so that one on the workers' own address is not taken for
a sibling worker. A sibling worker (another process of this run) is known
by its peer id (this run's prefix and its 2-digit index), whatever its
endpoint: the one it listens on when we connected to it, an ephemeral one
when it connected to us.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from torrents.hostport import format_hostport, host_of, own_addresses

from btget.events import WEB_SEED

SEED_WEIGHT = 1000  # a seed weighs this much more than a leecher when nothing was ever seen moving


@dataclass(frozen=True)
class Connection:
    """One connection as libtorrent's get_peer_info shows it."""

    ip: str
    port: int
    total: int  # payload bytes received over this connection
    pid: bytes = b""  # the peer id; zeros before the handshake
    web_seed: bool = False  # an HTTP server (BEP 19), not a BitTorrent peer
    seed: bool = False
    busy: bool = False  # connecting, or in the handshake
    hashfails: int = 0  # libtorrent's count for this endpoint, kept across its connections


def sibling_index(pid: bytes, prefix: bytes) -> int | None:
    """The index of the sibling worker whose peer id this is (this run's prefix + 2 digits), else None."""
    index = pid[len(prefix):len(prefix) + 2]
    if prefix and pid.startswith(prefix) and index.isdigit():
        return int(index)
    return None


class Ledger:
    """One worker's per-source byte counts and what it knows of its peers."""

    def __init__(self, listen_ip: str, prefix: str = "", web_seeds: Iterable[tuple[str, int]] = ()) -> None:
        self.own = own_addresses(listen_ip)  # where sibling workers connect from
        self.prefix = prefix.encode()
        # Web seeds by endpoint: a connection to one that ends between two samples is still
        # named a web seed, not taken for a sibling worker.
        self.web_seeds: set[tuple[str, int]] = set(web_seeds)
        self.counted: dict[str, int] = {}  # source → payload bytes the samples saw from it (all its connections)
        self.siblings: dict[str, int] = {}  # endpoint of a connection with another worker → its index
        self.introduced: set[str] = set()  # where the parent said the other workers listen
        self.peer_hash_failures: dict[str, int] = {}  # source → failed pieces it took part in
        self.banned: list[str] = []  # sources libtorrent banned for sending corrupt pieces
        self.hash_failures = 0
        self.peers_remote = 0  # remote peers connected at the last sample
        self.connect_attempts = 0  # connections to remote peers tried
        self.connect_failures = 0  # connections to remote peers that failed (refused, timed out)
        self._last: dict[str, int] = {}  # source → its connection's count at the last sample
        self._seen: dict[str, int] = {}  # every peer seen connected (small transfers end between samples)
        self._talked: set[str] = set()  # sources that completed a handshake (a peer id seen)
        self._recent: dict[str, int] = {}  # source → bytes it sent in the last sample that saw any
        self._failures_at_connect: dict[str, int] = {}  # source → hash failures counted when it connected
        self._total: int | None = None  # bytes downloaded in all, once the transfer is over
        self._piece_length = 0

    def key(self, ip: str, port: int) -> str:
        return f"{WEB_SEED}{format_hostport(ip, port)}" if (ip, port) in self.web_seeds else format_hostport(ip, port)

    def introduce(self, peers: Iterable[tuple[str, int]]) -> None:
        """The parent's Connect: the other workers listen there."""
        self.introduced.update(format_hostport(ip, port) for ip, port in peers)

    def remote(self, ip: str, key: str) -> bool:
        """A BitTorrent peer that is neither a web seed nor a sibling worker: one known by its peer id (this
        run's prefix) or by the endpoint the parent introduced; without a prefix, any on our own addresses."""
        if key.startswith(WEB_SEED) or key in self.siblings or key in self.introduced:
            return False
        return bool(self.prefix) or ip not in self.own

    # --- what libtorrent says -------------------------------------------------------------------
    def sample(self, connections: Iterable[Connection]) -> None:
        """One look at every connection: the growth of each count since the last look."""
        recent: dict[str, int] = {}
        remote = 0
        for c in connections:
            key = format_hostport(c.ip, c.port)
            if c.web_seed:
                key = WEB_SEED + key
            self._identify(key, c.pid)
            if not c.busy and self.remote(c.ip, key):
                remote += 1
            if c.hashfails:
                self.peer_hash_failures[key] = max(c.hashfails, self.peer_hash_failures.get(key, 0))
            self._seen[key] = SEED_WEIGHT if c.seed else 1
            last = self._last.get(key, 0)
            # A smaller count than last time is a new connection from the same
            # endpoint: its bytes add to what the old one brought.
            delta = c.total - last if c.total >= last else c.total
            if delta:
                self.counted[key] = self.counted.get(key, 0) + delta
                recent[key] = delta
            self._last[key] = c.total
        if recent:
            self._recent = recent
        self.peers_remote = remote

    def _identify(self, key: str, pid: bytes) -> None:
        """What a peer id says of a source: it talked to us, and whether it is a sibling worker."""
        if any(pid):
            self._talked.add(key)
            index = sibling_index(pid, self.prefix)
            if index is not None:
                self.siblings.setdefault(key, index)

    def connected(self, ip: str, port: int, pid: bytes = b"") -> None:
        """peer_connect_alert: a connection is tried (ours) or accepted (theirs, before its handshake)."""
        key = self.key(ip, port)
        self._identify(key, pid)
        self._seen.setdefault(key, 1)
        if (ip, port) not in self.web_seeds and self.remote(ip, key):
            self.connect_attempts += 1
        self._failures_at_connect.setdefault(format_hostport(ip, port), self.hash_failures)

    def disconnected(self, ip: str, port: int, pid: bytes = b"", connect_failed: bool = False) -> None:
        """peer_disconnected_alert (its peer id, once the handshake was done); `connect_failed`: it never
        connected (refused, timed out) while fetching."""
        key = self.key(ip, port)
        self._identify(key, pid)
        self._seen.setdefault(key, 1)
        if connect_failed and (ip, port) not in self.web_seeds and self.remote(ip, key):
            self.connect_failures += 1

    def hash_failed(self) -> None:
        self.hash_failures += 1

    def ban(self, ip: str, port: int) -> str:
        """libtorrent banned this endpoint for corrupt pieces; returns its source name."""
        key = self.key(ip, port)
        if key not in self.banned:
            self.banned.append(key)
            # Banned between two samples, its count unseen: it took part in at least one of the
            # failures since it connected (the failing piece's alert comes before the ban's).
            since = self.hash_failures - self._failures_at_connect.get(key, 0)
            self.peer_hash_failures[key] = max(self.peer_hash_failures.get(key, 0), since, 1)
        return key

    # --- at the end -------------------------------------------------------------------------------
    def attribute_rest(self, total: int, piece_length: int) -> None:
        """The transfer is over: `total` bytes were downloaded. From now on `sources` adds up to it."""
        self._total, self._piece_length = total, piece_length

    @property
    def sources(self) -> dict[str, int]:
        """Payload bytes per source; once over, what arrived after the last sample shared out among the
        peers of that sample (a seed hangs up the instant we complete, taking its count with it)."""
        out = dict(self.counted)
        if self._total is None:
            return out
        rest = self._total - sum(out.values())
        for key in self.banned:
            if rest > 0 and key not in out:
                # Banned between two samples (it sent its bad pieces in a few milliseconds):
                # it sent at least the pieces that failed.
                out[key] = min(rest, self.peer_hash_failures.get(key, 0) * self._piece_length)
                rest -= out[key]
        if rest <= 0:
            return out
        weights = self._recent or out or self._peers_seen() or {"unattributed": 1}
        whole = sum(weights.values())
        shares = {key: rest * w // whole for key, w in weights.items()}
        heaviest = max(weights, key=weights.__getitem__)
        shares[heaviest] += rest - sum(shares.values())  # what the rounding down left: the sum is exact
        for key, n in shares.items():
            out[key] = out.get(key, 0) + n
        return out

    def _peers_seen(self) -> dict[str, int]:
        """The peers seen connected that can have sent something (a handshake done; any web seed), each once:
        a sibling's connections weigh as one, under the first of its endpoints. All of them when none talked."""
        talked = {k: w for k, w in self._seen.items() if k in self._talked or k.startswith(WEB_SEED)}
        out: dict[str, int] = {}
        first: dict[int, str] = {}
        for key, w in (talked or self._seen).items():
            index = self.siblings.get(key)
            key = first.setdefault(index, key) if index is not None else key
            out[key] = max(out.get(key, 0), w)
        return out

    def named(self) -> dict[str, Any]:
        """What the parent is told of the peers (events.Progress's fields of that name)."""
        return {"siblings": dict(self.siblings), "peer_hash_failures": dict(self.peer_hash_failures),
                "banned": tuple(self.banned),
                "peer_bytes": sum(n for k, n in self.sources.items() if self.remote(host_of(k), k)),
                "peers_remote": self.peers_remote, "connect_attempts": self.connect_attempts,
                "connect_failures": self.connect_failures}
