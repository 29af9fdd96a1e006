"""A T3 of a busy swarm takes its share of the sites, not all of them. Pure.

Sites serve `upload_slots` T3s of a swarm at a time (1 by default). The
first T3 to connect is unchoked by every site and takes the dataset at ΣR,
while it can pass pieces on only at its own uplink C: the other T3s wait
for it, and the sites end up sending the whole dataset to that one T3 and
then most of it again (docs/benchmarks.md "wan"). So a worker unchoked by more
sites than its share lets the extra ones go (by its IP filter, for `SHED_FOR`
seconds): their slot passes to another T3, each site then feeds a
different T3, and each of those forwards what it gets at about the rate it
gets it.

Its share is ceil(sites / T3s downloading), in a busy swarm only (at least
three T3s and as many as sites, see busy): four T3s on three sites keep one
each, eight keep one; two T3s keep every site. T3s downloading are this
one and the connected peers that are neither seeds nor sibling workers. The
sites kept are those that have sent most on this connection (a site shed
mid-transfer costs its queued blocks).

A T3 that fetches only part of the dataset (`--shard`, `--files`) keeps every
site: the T3s around it may want other pieces and cannot pass on to it
what it lacks (the shard rule).

So that the sites send each piece about once, in a busy swarm (see busy):

- each site has its slice of the pieces, the k-th of K sites (sorted by
  address, the same order at every T3) the k-th K-th: a T3 asks first for
  the slices of the sites it keeps (piece priority TOP: first among pieces
  of equal availability, the rarest first). Without it the T3s fed by
  different sites asked them for the same "rarest" pieces, queued ahead and
  unseen by the others until they arrived: the sites sent those twice.
- a T3 lets go of each site whose slice the T3s around it and it hold (by
  their bitfields): what that site would send is a second copy of pieces a
  T3 can forward. The T3 a site fed keeps it past its slice, or takes it
  back, only while a slower site's slice is held nowhere (helps).

- a T3 that lags the T3s around it (behind: LAG of the pieces fewer than
  their median) keeps one site, past its turn and its slice held around,
  until it has caught up. The T3s ahead serve each other as much as it,
  and a T3 a site fed first sends its slice to all of them while its
  requests to them wait behind those pieces: it got 2–5 MB/s from them
  while they got 10–20 from each other, and finished 8–16 s after them,
  with the sites idle (docs/design-notes.md "A T3 left behind (1 GiB)").
  Within a budget of the sites' bytes (lag_budget).

- a site slow enough to steer (Paces) sends one T3 a turn of TURN of its
  slice, then that T3 lets it go (turns_done): the site's slot passes to
  another T3, and its slice enters the swarm at several T3s, not one. Without
  turns the T3 a site fed held the whole slice and all the others took it
  from its one uplink; half-slice turns put fewer copies on the wire in the
  same time, though not on long round trips (docs/benchmarks.md "wan").

The T3s' view of each other lags on a saturated uplink (their HAVE
messages wait behind piece data in TCP send buffers), so a site is still
unchoked now and then by a T3 that does not yet see its slice held
(docs/benchmarks.md "wan").

Both rules steer a site by what the worker sees at its looks, further apart
on a loaded host than the loop's interval. A site that would
send its slice within STEER_WITHIN, faster than STEER_FLOOR (loopback, a
LAN) has sent most of it before a look can act, and the slot it gives up
goes to another T3 that it feeds a copy too: such a site is kept while it
unchokes us (Paces).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# libtorrent piece priorities: a kept site's slice, and the rest (libtorrent's default). Not 7: libtorrent
# picks priority-7 pieces in no order of availability, so a T3 a site unchoked took from it the pieces of its
# slice that other T3s held as readily as those nobody held (several turns per site where two would do);
# 4-6 are ordered by availability (halved, so a piece one T3 around holds ties with one none holds), the
# higher priority first when equal. 3 and 1 (availability whole) sent no fewer copies
# (docs/benchmarks.md "wan").
TOP, NORMAL = 6, 4
HELP_AFTER = 3.0  # s the pieces held nowhere would take to be held somewhere when our slice is in (helps)
PACE_OVER = 1.0  # s over which that pace is measured
SHED_FOR = 10.0  # s a site let go is not connected again (then the worker re-announces and chooses anew)
STEER_WITHIN = 2.0  # s: a site that would send a slice within this is too fast to steer (Paces)...
STEER_FLOOR = 25_000_000  # bytes/s: ...if it sends faster than this (twice the 100 Mbit/s the rules were built on)
PACE_SPAN = 0.1  # s a site must have sent for before its pace is judged (unless it is fast sooner)
MIN_BUSY = 3  # T3s in a swarm before the sites are steered at all (busy)
TURN = 0.5  # of a slice: what a site sends one T3 of a busy swarm on a connection before that T3 lets it go


@dataclass(frozen=True)
class SitePeer:
    ip: str
    received: int  # payload bytes it has sent us on this connection
    unchokes_us: bool


def pace(slice_bytes: int, sent: int, seconds: float) -> bool | None:
    """A site's pace from what it has sent us (`sent` bytes in `seconds`) since it began to: True if it
    would send a slice within STEER_WITHIN and sends faster than STEER_FLOOR (too fast to steer), False
    if not, None while it has sent for less than PACE_SPAN and is not yet fast."""
    span = max(seconds, PACE_SPAN)
    if sent * STEER_WITHIN >= slice_bytes * span and sent >= STEER_FLOOR * span:
        return True
    return False if seconds >= PACE_SPAN else None


class Paces:
    """Which sites the rules may let go while they unchoke us (see pace): each judged once, on what it sent
    us from the last look at which it had not begun to; until then, and for good once it is fast, it is
    kept. A site that chokes us sends nothing and may always be let go.

    Judged at the worker's looks (docs/benchmarks.md "egress"): loopback sites send a T3 slices faster
    than a look can act; shaped ones far slower, yet a small dataset's slice comes almost as fast, and
    there the rules are what keeps egress down: hence the floor as well as the slice."""

    def __init__(self, slice_bytes: int) -> None:
        self.slice_bytes = slice_bytes
        self.since: dict[str, tuple[float, int]] = {}  # site → (time, bytes received) before it began to send
        self.fast: dict[str, bool] = {}  # site → its pace, once judged

    def see(self, now: float, peers: list[SitePeer]) -> None:
        for p in peers:
            if p.ip in self.fast:
                continue
            then, before = self.since.get(p.ip, (now, p.received))
            if not p.unchokes_us or p.received == before:
                self.since[p.ip] = (now, p.received)
                continue
            verdict = pace(self.slice_bytes, p.received - before, now - then)
            if verdict is not None:
                self.fast[p.ip] = verdict

    def judged(self, peers: list[SitePeer]) -> bool:
        """Whether the pace of every site unchoking us is known."""
        return all(p.ip in self.fast for p in peers if p.unchokes_us)

    def held(self, peers: list[SitePeer]) -> set[str]:
        """The sites unchoking us that are not to be let go: too fast to steer, or not yet judged."""
        return {p.ip for p in peers if p.unchokes_us and self.fast.get(p.ip, True)}


def share(sites: int, downloading: int) -> int:
    """How many sites one T3 keeps unchoking it: ceil(sites / T3s downloading), at least one."""
    return max(1, math.ceil(sites / max(1, downloading)))


def busy(sites: int, t3s: int, downloading: int) -> bool:
    """At least as many T3s (this one and those around it, downloading or seeding) as sites, and at least
    MIN_BUSY of them, two or more downloading: their uplinks can carry what the sites would. Two T3s can
    each take a site whole, and a site let go is uplink lost to the swarm: on hosts of their own, two T3s
    on two sites took far longer with the rules than without (docs/benchmarks.md "hosts"). Seeding
    T3s count: at the end of a swarm the last T3s are fed by the finished ones. A lone T3 arriving after
    the others are done is not a busy swarm: it takes the sites' uplinks too."""
    return sites > 0 and t3s >= max(sites, MIN_BUSY) and downloading >= 2


LAG = 0.1  # of the pieces: a T3 this far behind the T3s around it keeps a site (behind)...
LAG_BUDGET = 2.0  # ...while it has taken less than this many copies over the T3s in the swarm (lag_budget)


def behind(held: int, others: list[int], pieces: int) -> bool:
    """Whether we lag the T3s around us (the pieces each holds, a seed all): we hold LAG of the pieces fewer
    than the median of theirs. Their uplinks serve each other as much as us, and the T3s ahead would finish
    and leave us to the last ones' uplinks: a site kept fetches what we lack while the sites stand idle."""
    if not others:
        return False
    return held < sorted(others)[len(others) // 2] - LAG * pieces


def lag_budget(t3s: int) -> float:
    """The copies of the dataset a lagging T3 may have taken from the sites and still keep one (behind):
    twice its even share of one copy among `t3s` T3s (us and those around us). The T3s a site fed first
    lag most, and took more than the others already: uncapped, four T3s' sites sent 1.40 copies, eight
    T3s' 1.54–1.69."""
    return LAG_BUDGET / max(1, t3s)


def to_shed(peers: list[SitePeer], sites: int, downloading: int, whole: bool) -> list[str]:
    """The site addresses to let go: those unchoking us beyond our share (fewest bytes received first)."""
    if not whole:
        return []
    serving = sorted((p for p in peers if p.unchokes_us), key=lambda p: (-p.received, p.ip))
    return [p.ip for p in serving[share(sites, downloading):]]


def turns_done(peers: list[SitePeer], sites: int, t3s: int, downloading: int, whole: bool,
               slice_bytes: int) -> list[str]:
    """The site addresses to let go because each has sent us its turn on this connection (TURN of its
    slice) in a busy swarm. The caller keeps the sites too fast to steer (Paces.held)."""
    if not (whole and busy(sites, t3s, downloading)):
        return []
    return [p.ip for p in peers if p.unchokes_us and p.received >= TURN * slice_bytes]


def feeding(sites: list[str], peers: list[SitePeer], cover: Cover) -> int | None:
    """The slice of the site feeding us (it unchokes us and has sent us half a slice or more), if one does.
    The worker remembers it after it has let the site go: the pace of the pieces held nowhere shows a
    lagging site only once our own site no longer fills them (helps)."""
    for p in peers:
        if p.unchokes_us and p.ip in sites and p.received * 2 >= cover.slice_bytes(len(sites)):
            return sites.index(p.ip)
    return None


def helps(sites: int, fed_by: int | None, cover: Cover, helping: bool, clears_in: float) -> bool:
    """Whether we keep (or take back) the site that fed us our slice, once that slice is held around us, to
    fetch pieces held nowhere around us: a slower site's slice. Some site lags when a quarter of a slice or
    more is held nowhere and would take over HELP_AFTER seconds to be held somewhere at the pace it has been
    shrinking (`clears_in`); then kept until nothing is held nowhere. Sites that merely started a second
    apart clear theirs in a second or two, and the last pieces of a slice are on their way from its site: a
    second copy would only duplicate them (by the size held nowhere alone, sites a second apart helped
    each other and sent more copies; docs/benchmarks.md "wan")."""
    if fed_by is None or not cover.covers(fed_by, sites):
        return False
    nowhere = (cover.lacking & ~cover.held).bit_count()
    if nowhere == 0:
        return False
    return helping or (nowhere * sites * 4 >= cover.pieces and clears_in > HELP_AFTER)


def clearing_time(then: tuple[float, int], now: tuple[float, int]) -> float:
    """Seconds until no piece is held nowhere, at the pace the count went from `then` to `now` ((time,
    pieces held nowhere)); infinite when it did not shrink."""
    (t0, n0), (t1, n1) = then, now
    if n1 <= 0:
        return 0.0
    if n1 >= n0 or t1 <= t0:
        return math.inf
    return n1 * (t1 - t0) / (n0 - n1)


def to_spare(sites: list[str], t3s: int, downloading: int, whole: bool, cover: Cover,
             helper: str | None = None) -> list[str]:
    """The sites to let go (their addresses, connected or not; `sites[k]` has slice k) because the T3s
    around us can give us what they would: in a busy swarm, each site whose slice the T3s around us and we
    hold, but `helper` (see helps)."""
    if not whole or not cover.lacking or not busy(len(sites), t3s, downloading):
        return []
    return sorted(ip for k, ip in enumerate(sites) if ip != helper and cover.covers(k, len(sites)))


@dataclass(frozen=True)
class Cover:
    """What we lack and what the T3s around us hold, as masks (see mask)."""
    pieces: int
    lacking: int
    held: int
    piece_bytes: int = 0

    def slice_bytes(self, sites: int) -> int:
        return self.pieces * self.piece_bytes // max(1, sites)

    def _slice(self, k: int, sites: int) -> int:
        return span(-(-k * self.pieces // sites), -(-(k + 1) * self.pieces // sites))

    def lacking_in(self, k: int, sites: int) -> int:
        """How many pieces of slice k we lack."""
        return (self._slice(k, sites) & self.lacking).bit_count()

    def covers(self, k: int, sites: int) -> bool:
        """Whether every piece of slice k we lack is held around us."""
        return not self._slice(k, sites) & self.lacking & ~self.held


def slice_of(piece: int, pieces: int, sites: int) -> int:
    """The index of the site whose slice holds `piece`: the k-th of K sites has the k-th K-th of the pieces."""
    return piece * sites // pieces


def priorities(pieces: int, sites: int, kept: set[int]) -> list[int] | None:
    """Piece priorities for a T3 fed by the sites of index `kept`: their slices first. None (libtorrent's
    default order, rarest first) when it keeps no site or every one."""
    if not kept or len(kept) >= sites:
        return None
    return [TOP if slice_of(i, pieces, sites) in kept else NORMAL for i in range(pieces)]


def mask(bits: list[bool]) -> int:
    """A bitfield (libtorrent's list of bools, piece 0 first) as an int with piece i in bit 8·i: a byte a
    piece, as bytes() packs it: much faster than a bit a piece (docs/benchmarks.md "wan")."""
    return int.from_bytes(bytes(bits), "little")


def span(first: int, end: int) -> int:
    """Pieces first..end-1 as a mask (see mask)."""
    return int.from_bytes(b"\x01" * max(0, end - first), "little") << (8 * first)
