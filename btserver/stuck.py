"""Telling a seed whose storage hangs from one that has nothing to do. Pure.

A site's storage hangs more often than it dies: a dCache pool stalls, an
NFS mount freezes, and every read of the replica blocks while bt-server's
control API and heartbeats go on. From the seed's side this looks like
peers that are owed blocks (interested, unchoked, requests queued or disk
reads pending) while nothing is uploaded. A seed in that state for `after`
seconds is *stuck*: the heartbeat says so, and the tracker stops handing
it out and counting it as a seed (so another site's seed is started).

Clients give up on a silent seed within seconds (btget/worker/stall.py), sooner
than `after`: peers that leave while owed blocks do not end the stall. Only
moving uploads end it, or, once nobody waits any more, a read of our own
that the storage answers (`wants_probe`, `probe_done`: the seeder reads a
block of the replica past the page cache). The same ends a stuck state. A
slow seed is not stuck: any upload counts as moving.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PeerWait:
    """What the seed owes one connected peer (from libtorrent's peer_info)."""

    interested: bool  # the peer wants pieces of ours
    choked: bool  # we choke it: it may not ask, it is owed nothing
    queued: int  # its requests we have not served (upload_queue_length)
    pending_disk: int  # bytes of disk reads in flight for it (pending_disk_bytes)


def waiting(peers: list[PeerWait]) -> int:
    """Peers owed blocks: interested, unchoked, with requests queued or reads pending."""
    return sum(1 for p in peers if p.interested and not p.choked and (p.queued > 0 or p.pending_disk > 0))


@dataclass
class StuckWatch:
    """One seed's samples → stuck or not. `after` <= 0: never stuck (detection off)."""

    after: float
    uploaded: int = -1  # at the last sample; -1 before the first
    calm: float = 0.0  # the last time uploads moved, nobody was owed anything, or a probe answered
    stalled: bool = False  # peers were owed blocks since `calm` and nothing has moved
    since: float | None = None  # stuck since (the stall's start, `calm`), None while not stuck
    probing: bool = False  # a read of our own is in flight
    waiting: int = 0  # peers owed blocks at the last sample

    @property
    def stuck(self) -> bool:
        return self.since is not None

    def moving(self, uploaded: int) -> bool:
        """Whether uploads moved since the last sample (then who waits need not be asked)."""
        return uploaded != self.uploaded

    def step(self, now: float, uploaded: int, waiting: int) -> bool:
        """Take one sample (monotonic time, total payload uploaded, peers owed blocks); True if `stuck` changed."""
        was = self.stuck
        if self.after <= 0 or self.uploaded < 0 or uploaded != self.uploaded:
            self._calm(now)
        elif waiting > 0:
            self.stalled = True
        elif not self.stalled:
            self.calm = now  # nothing asked of it, nothing owed: idle, not stalled
        # Peers owed blocks that leave (clients give up on a silent seed within seconds) do not end
        # the stall: only moving uploads or a probe that answers show that reads work.
        if self.stalled and not self.stuck and now - self.calm >= self.after:
            self.since = self.calm
        self.uploaded, self.waiting = uploaded, waiting
        return self.stuck != was

    def wants_probe(self) -> bool:
        """Whether to read from the storage ourselves: stalled, and no peer left waiting whose uploads would
        show that reads work again (while peers wait, their uploads tell)."""
        return self.stalled and not self.probing and self.waiting == 0

    def probe_started(self) -> None:
        self.probing = True

    def probe_done(self, now: float, ok: bool) -> bool:
        """Our read ended (`ok`: the storage returned the bytes); True if `stuck` changed."""
        self.probing = False
        was = self.stuck
        if ok and self.stalled:
            self._calm(now)
        return self.stuck != was

    def _calm(self, now: float) -> None:
        self.calm, self.stalled, self.since = now, False, None
