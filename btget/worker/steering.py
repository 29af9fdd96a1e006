"""How a T3 steers its sources, as one pure function: `step(state, seen) -> actions`.

A worker (btget/worker/process.py) samples its connections every SAMPLE_EVERY —
bytes each way, the requests each peer holds, who unchokes us, and when
asked for (`cover_due`) the pieces we lack and those the T3s around us
hold — into a `Seen`, feeds it through `step`, and carries out what comes
back: one IP filter for every address shut out (`Filter`), the sites'
slices asked for first (`Prioritize`), an announce to find again sites let
go (`Announce`), a line for the log (`Said`). Nothing here touches
libtorrent or a clock, so each rule is a line of tests/btget/test_steering.py.

Who is shut out, why and until when is one registry keyed by reason (`ShutOut`):

- STALLED: it holds our requests and sends nothing (btget/worker/stall.py), for BAN_FOR;
- CORRUPT: libtorrent banned it for pieces that failed their check, for the run (`ban`);
- SHED: a site unchoking us beyond our share or past its turn (btget/worker/siteshare.py), for SHED_FOR;
- SPARED: a site whose slice the T3s around us hold (btget/worker/siteshare.py), while they do;
- EXCLUDED: a site the user left out (--exclude-site), for the run (`exclude`);
- DEFERRED: a site other than those the user prefers (--prefer-site), while one of those sends to us;
- PARKED: a T3 holding more of our requests than it sends in PARKED_AFTER, in end game while a site
  unchokes us, for PARKED_FOR.

Why PARKED: libtorrent asks each peer for a block only once until end game, and queues at each peer
request_queue_time of its rate, more in slow start. A T3 fed by another T3 alone (the sites' slots serve
the first T3 of a swarm) has seconds of its remaining blocks queued at that T3 when the sites come to it;
in end game each site is then asked for one busy block at a time, and the rest arrives at one T3's
uplink. Dropping that T3's connection gives its blocks back to the picker, and the sites take them at
their rate. A site unchoking us holds every piece, so nothing is lost.

The sites we let go (SHED and SPARED) stand aside for the T3s around us,
so they come back at once, not when their time is over, when those T3s are
no longer there to stand in for them: when no other T3 is connected (they
finished and left, or were shut out as stalled), every site let go comes
back, and so do they when the T3s still connected hold nothing we lack
(each let the sites go for the others, and the pieces none of them holds
would wait for the sites' time to run out); when the swarm is no longer
busy, or a T3 around us leaves (its bitfield was part of what held a
slice), the spared sites are looked at again. A site that comes back is asked for at once (`Announce`): the IP
filter dropped its connection. A T3 lagging the T3s around it keeps one site through all of this while
within its budget of the sites' bytes (siteshare.behind, siteshare.lag_budget).
"""

from __future__ import annotations

import enum
import math
from collections import deque
from dataclasses import dataclass, field

from btget.worker import siteshare, stall

SAMPLE_EVERY = 0.05  # s between samples while fetching (the worker's loop; btget/worker/process.py says why so often)
STALL_EVERY = 0.5  # s between looks for peers that hold our requests and send nothing (btget/worker/stall.py)
# The looks at which sites' slices the T3s around us hold take at most 1/COVER_SHARE of the time:
# reading every T3's bitfield is costly on large torrents.
COVER_SHARE = 100
BLOCK = 16 * 1024  # bytes libtorrent asks a peer for at a time
PARKED_AFTER = 0.5  # s: a T3 holding more of our requests than it sends in this much is dropped in end game
PARKED_FOR = 5.0  # s it stays out (it would be asked for the same blocks again at once)
# s during which no T3 around us holds a piece we lack before the sites let go come back: libtorrent says so
# for a moment whenever the last piece we wanted from a T3 arrives, and the sites would be asked back for it.
NOTHING_AROUND_FOR = 0.5


class Reason(enum.Enum):
    STALLED = "stalled"
    CORRUPT = "corrupt"
    SHED = "shed"
    SPARED = "spared"
    EXCLUDED = "excluded"
    DEFERRED = "deferred"
    PARKED = "parked"


# The sites we let go ourselves, not for a fault of theirs, while others stand in for them: the tracker would
# only hand them back (btget/worker/reannounce.py counts them as had).
LET_GO = (Reason.SHED, Reason.SPARED, Reason.DEFERRED)


class ShutOut:
    """The addresses shut out, by reason, each until a time (math.inf: until taken back)."""

    def __init__(self) -> None:
        self._until: dict[Reason, dict[str, float]] = {r: {} for r in Reason}

    def add(self, reason: Reason, ip: str, until: float = math.inf) -> None:
        self._until[reason][ip] = until

    def let_back(self, reason: Reason, ip: str) -> bool:
        """End `ip`'s shut-out for `reason`; whether it had one."""
        return self._until[reason].pop(ip, None) is not None

    def take_back(self, *reasons: Reason) -> set[str]:
        """End every shut-out for `reasons`; the addresses it ended."""
        ended: set[str] = set()
        for r in reasons:
            ended |= set(self._until[r])
            self._until[r] = {}
        return ended

    def replace(self, reason: Reason, ips: set[str]) -> set[str]:
        """Shut out exactly `ips` for `reason` (until replaced); the addresses let back."""
        before = set(self._until[reason])
        self._until[reason] = dict.fromkeys(ips, math.inf)
        return before - ips

    def expire(self, now: float) -> dict[Reason, set[str]]:
        """End the shut-outs whose time is over; the addresses let back, by reason."""
        ended = {}
        for reason, until in self._until.items():
            done = {ip for ip, t in until.items() if now >= t}
            if done:
                self._until[reason] = {ip: t for ip, t in until.items() if ip not in done}
                ended[reason] = done
        return ended

    def ips(self, *reasons: Reason) -> set[str]:
        """The addresses shut out for any of `reasons` (every reason when none is named)."""
        return set().union(*(self._until[r] for r in reasons or Reason))


class Kind(enum.Enum):
    SITE = "site"  # a storage site's seed (the tracker's /api/sites)
    T3 = "t3"  # another T3's bt-get, or any other peer of the swarm
    SIBLING = "sibling"  # a worker of this run


@dataclass(frozen=True)
class Peer:
    """One BitTorrent connection at a sample (web seeds are never steered here)."""

    ip: str
    port: int
    kind: Kind
    received: int = 0  # payload bytes it has sent us on this connection
    sent: int = 0  # payload bytes we have sent it (our requests queue behind them)
    queued: int = 0  # our requests it holds
    unchokes_us: bool = True
    pieces: int = 0  # pieces it says it holds (a T3 announces each new one: alive)
    seed: bool = False
    bitfield: int | None = None  # its pieces (siteshare.mask) when a cover was read (cover_due)
    lacked: bool = True  # it holds a piece we lack (libtorrent: we are interested in it)
    endgame: bool = False  # libtorrent asks it for blocks already asked of others: none is left unasked


@dataclass(frozen=True)
class Seen:
    now: float
    fetching: bool
    peers: tuple[Peer, ...] = ()
    have: int | None = None  # the pieces we hold (siteshare.mask), when a cover was read
    cover_cost: float = 0.0  # seconds the worker spent reading it
    from_sites: int = 0  # payload bytes the sites have sent us in all, over every connection, with a cover


# --- actions ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Filter:
    """Shut out exactly these addresses (libtorrent's IP filter: it drops their connections at once)."""
    ips: frozenset[str]


@dataclass(frozen=True)
class Prioritize:
    """Piece priorities (siteshare.priorities); None: libtorrent's default order."""
    priorities: tuple[int, ...] | None


@dataclass(frozen=True)
class Announce:
    """Ask the tracker now: sites we let go are to be connected again."""


@dataclass(frozen=True)
class Said:
    text: str


Action = Filter | Prioritize | Announce | Said


@dataclass
class Steering:
    """What one worker's steering remembers between samples."""

    sites: list[str]  # the sites' addresses, sorted: sites[k] has slice k (siteshare)
    pieces: int
    piece_bytes: int
    whole: bool  # it fetches every file (the shard rule: a part keeps every site)
    preferred: frozenset[str] = frozenset()  # addresses of the sites the user prefers (--prefer-site)
    stall: stall.StallWatch = field(default_factory=stall.StallWatch)
    shut_out: ShutOut = field(default_factory=ShutOut)
    paces: siteshare.Paces | None = None
    crowd: bool = False  # a busy swarm at the last sample (siteshare.busy)
    helping: bool = False  # the site that fed us is kept to fetch a slower site's slice (siteshare.helps)
    lag_site: str | None = None  # the site kept while we lag the T3s around us (siteshare.behind)
    fed_by: int | None = None  # the slice of the site that fed us, remembered after we let it go
    next_cover: float = 0.0
    cover_t3s: frozenset[tuple[str, int]] = frozenset()  # the T3s whose bitfields the last cover read
    next_share: float = 0.0
    next_stall: float = 0.0
    nowhere_seen: deque = field(default_factory=deque)  # (time, pieces held nowhere around us)
    nothing_since: float | None = None  # since when no T3 around us has held a piece we lack
    paced: dict = field(default_factory=dict)  # (ip, port) -> (time, bytes received) at the last look at stalls
    kept_slices: frozenset[int] = frozenset()  # the slices asked for first, as libtorrent was told
    filtered: frozenset[str] = frozenset()  # what the IP filter holds

    def __post_init__(self) -> None:
        if self.paces is None:
            self.paces = siteshare.Paces(self.pieces * self.piece_bytes // max(1, len(self.sites)))

    def let_go(self) -> set[str]:
        return self.shut_out.ips(*LET_GO)


def cover_due(state: Steering, now: float, peers: tuple[Peer, ...]) -> bool:
    """Whether the next Seen should carry the pieces we lack and each T3's bitfield: in a busy swarm, once
    the last reading's time share is over, or at once when a T3 it read has left."""
    if not state.crowd:
        return False
    return now >= state.next_cover or not state.cover_t3s <= {(p.ip, p.port) for p in peers if p.kind is Kind.T3}


def ban(state: Steering, ip: str) -> list[Action]:
    """libtorrent banned `ip` for corrupt pieces: shut out for the rest of the run."""
    state.shut_out.add(Reason.CORRUPT, ip)
    return _filter(state)


def exclude(state: Steering, ips: set[str]) -> list[Action]:
    """The user left these sites' addresses out: never connected, for the run."""
    for ip in ips:
        state.shut_out.add(Reason.EXCLUDED, ip)
    return _filter(state)


def step(state: Steering, seen: Seen) -> list[Action]:
    now = seen.now
    actions: list[Action] = []
    ended = state.shut_out.expire(now)
    stalled: set[str] = set()
    if seen.fetching and Reason.SHED in ended:
        actions.append(Announce())  # the IP filter dropped the sites shed: ask for them again
    if seen.fetching and now >= state.next_stall:
        state.next_stall = now + STALL_EVERY
        stalled = _stalled(state, seen)
        for ip in sorted(stalled):
            actions.append(Said(f"{ip} holds our requests and nothing moved either way: shut out for "
                                f"{stall.BAN_FOR:.0f} s"))
        actions += _parked(state, seen, stalled)
    if seen.fetching and state.preferred:
        actions += _defer(state, seen, stalled)
    if seen.fetching and state.sites:
        actions += _share_sites(state, seen, stalled)
    announce = [Announce()] if any(isinstance(a, Announce) for a in actions) else []
    return [a for a in actions if not isinstance(a, Announce)] + _filter(state) + announce


def _stalled(state: Steering, seen: Seen) -> set[str]:
    samples = [stall.PeerSample(p.ip, p.port, p.received, p.queued, not p.unchokes_us, p.sent, p.pieces,
                                site=p.kind is Kind.SITE) for p in seen.peers]
    out = set(state.stall.step(seen.now, samples, state.shut_out.ips(Reason.STALLED)))
    for ip in out:
        state.shut_out.add(Reason.STALLED, ip, seen.now + stall.BAN_FOR)
    return out


def _parked(state: Steering, seen: Seen, stalled: set[str]) -> list[Action]:
    """The T3s to drop for a while: in end game, while a site unchokes us, those holding more of our requests
    than they sent us in the last PARKED_AFTER (their pace over the last STALL_EVERY)."""
    now = seen.now
    paced, state.paced = state.paced, {(p.ip, p.port): (now, p.received) for p in seen.peers if p.kind is Kind.T3}
    out = state.shut_out.ips(Reason.STALLED) | stalled
    if not any(p.kind is Kind.SITE and p.unchokes_us and p.endgame and p.ip not in out for p in seen.peers):
        return []
    # The IP filter works by address: a T3 on a site's address or ours (one host running both) is kept.
    keep = out | set(state.sites) | state.stall.never
    said: list[Action] = []
    for p in seen.peers:
        if p.kind is not Kind.T3 or p.ip in keep or (p.ip, p.port) not in paced or not p.queued:
            continue
        then, before = paced[(p.ip, p.port)]
        pace = max(0, p.received - before) / (now - then)  # a new connection counts from 0
        if p.queued * BLOCK > PARKED_AFTER * pace:
            state.shut_out.add(Reason.PARKED, p.ip, now + PARKED_FOR)
            said.append(Said(f"{p.ip} holds {p.queued} of our requests, {p.queued * BLOCK / max(pace, 1):.1f} s at "
                             f"its pace, in end game while a site unchokes us: dropped for {PARKED_FOR:.0f} s"))
    return said


def _defer(state: Steering, seen: Seen, stalled: set[str]) -> list[Action]:
    """The other sites wait while a site the user prefers sends to us (it unchokes us and is not stalled),
    and come back when none does: they give only what the preferred ones cannot."""
    out = state.shut_out.ips(Reason.STALLED) | stalled
    giving = any(p.kind is Kind.SITE and p.ip in state.preferred and p.unchokes_us and p.ip not in out
                 for p in seen.peers)
    if giving:
        others = {p.ip for p in seen.peers if p.kind is Kind.SITE} | set(state.sites)
        state.shut_out.replace(Reason.DEFERRED, others - state.preferred)
        return []
    return [Announce()] if state.shut_out.take_back(Reason.DEFERRED) else []


def _share_sites(state: Steering, seen: Seen, stalled: set[str]) -> list[Action]:
    """btget/worker/siteshare.py's rules at one sample: which sites to let go or take back, which slices first."""
    now, sites = seen.now, state.sites
    site_peers = [siteshare.SitePeer(p.ip, p.received, p.unchokes_us) for p in seen.peers
                  if p.kind is Kind.SITE and p.ip in sites]
    t3s = [p for p in seen.peers if p.kind is Kind.T3 and p.ip not in stalled]
    downloading = 1 + sum(1 for p in t3s if not p.seed)
    state.paces.see(now, site_peers)
    held = state.paces.held(site_peers)
    state.crowd = state.whole and siteshare.busy(len(sites), 1 + len(t3s), downloading)
    returned: set[str] = set()
    if state.crowd and seen.have is not None:
        _lag(state, seen, site_peers, t3s)
    if _nothing_around(state, now, t3s):
        # Nobody around us stands in for the sites: the T3s that fed us left or stalled, or those still here
        # hold nothing we lack (every one of them let the sites go too): all come back.
        returned = state.shut_out.take_back(Reason.SHED, Reason.SPARED)
    if state.crowd and now >= state.next_share and state.paces.judged(site_peers):
        # On half a second of bytes: looking every sample, T3s on loopback let sites go on their first bursts.
        state.next_share = now + STALL_EVERY
        # The share is of the dataset's sites: those already let go are no longer connected, and counting
        # only the connected ones would shrink it at every look.
        for ip in siteshare.to_shed(site_peers, len(sites), downloading, state.whole):
            if ip not in held and ip != state.lag_site:
                state.shut_out.add(Reason.SHED, ip, now + siteshare.SHED_FOR)
    for ip in siteshare.turns_done(site_peers, len(sites), 1 + len(t3s), downloading, state.whole,
                                   state.paces.slice_bytes):
        if ip not in held and ip not in state.shut_out.ips(Reason.SHED) and ip != state.lag_site:
            state.shut_out.add(Reason.SHED, ip, now + siteshare.SHED_FOR)
    if state.lag_site is not None and state.shut_out.let_back(Reason.SHED, state.lag_site):
        returned.add(state.lag_site)
    if not state.crowd:
        state.lag_site = None
        state.next_cover = 0.0
        returned |= state.shut_out.take_back(Reason.SPARED)
    elif seen.have is not None:
        returned |= state.shut_out.replace(Reason.SPARED, _spared(state, seen, site_peers, t3s) - held)
    return ([Announce()] if returned else []) + _prioritize(state, site_peers)


def _nothing_around(state: Steering, now: float, t3s: list[Peer]) -> bool:
    """Whether no T3 around us can give us anything: none is connected, or for NOTHING_AROUND_FOR none has
    held a piece we lack."""
    if any(p.lacked for p in t3s):
        state.nothing_since = None
        return False
    if state.nothing_since is None:
        state.nothing_since = now
    return not t3s or now - state.nothing_since >= NOTHING_AROUND_FOR


def _spared(state: Steering, seen: Seen, site_peers: list[siteshare.SitePeer], t3s: list[Peer]) -> set[str]:
    """The sites whose slices the T3s around us hold (siteshare.to_spare), from the bitfields in `seen`."""
    every = siteshare.span(0, state.pieces)
    held = 0
    for p in t3s:
        held |= every if p.seed else (p.bitfield or 0)
    cover = siteshare.Cover(state.pieces, every & ~seen.have, held, state.piece_bytes)
    state.next_cover = seen.now + COVER_SHARE * seen.cover_cost
    state.cover_t3s = frozenset((p.ip, p.port) for p in t3s)
    fed_by = siteshare.feeding(state.sites, site_peers, cover)
    state.fed_by = state.fed_by if fed_by is None else fed_by
    state.helping = siteshare.helps(len(state.sites), state.fed_by, cover, state.helping,
                                    _clearing_time(state, seen.now, cover))
    helper = state.lag_site or (state.sites[state.fed_by] if state.helping else None)
    downloading = 1 + sum(1 for p in t3s if not p.seed)
    return set(siteshare.to_spare(state.sites, 1 + len(t3s), downloading, state.whole, cover, helper))


def _lag(state: Steering, seen: Seen, site_peers: list[siteshare.SitePeer], t3s: list[Peer]) -> None:
    """At a cover reading, before the sites are let go: whether we lag the T3s around us (siteshare.behind),
    and if so the site we keep, chosen once: one unchoking us (the one that sent most), else the one whose
    slice holds the most pieces we lack."""
    others = [state.pieces if p.seed else p.pieces for p in t3s]
    took = seen.from_sites / max(1, state.pieces * state.piece_bytes)
    lagging = siteshare.behind(seen.have.bit_count(), others, state.pieces)
    if not lagging or took >= siteshare.lag_budget(1 + len(t3s)):
        state.lag_site = None
    elif state.lag_site is None:
        serving = [p for p in site_peers if p.unchokes_us]
        if serving:
            state.lag_site = min(serving, key=lambda p: (-p.received, p.ip)).ip
        else:
            lacking = siteshare.Cover(state.pieces, siteshare.span(0, state.pieces) & ~seen.have, 0)
            state.lag_site = state.sites[max(range(len(state.sites)),
                                             key=lambda k: lacking.lacking_in(k, len(state.sites)))]


def _clearing_time(state: Steering, now: float, cover: siteshare.Cover) -> float:
    """When the pieces held nowhere around us will be held somewhere, at their pace of the last second."""
    sample = (now, (cover.lacking & ~cover.held).bit_count())
    state.nowhere_seen.append(sample)
    while len(state.nowhere_seen) > 2 and now - state.nowhere_seen[1][0] >= siteshare.PACE_OVER:
        state.nowhere_seen.popleft()
    return siteshare.clearing_time(state.nowhere_seen[0], sample)


def _prioritize(state: Steering, site_peers: list[siteshare.SitePeer]) -> list[Action]:
    """The slices of the sites we keep first (a whole fetch only), told to libtorrent when they change."""
    if not state.whole:
        return []
    gone = state.let_go()
    kept = frozenset(state.sites.index(p.ip) for p in site_peers if p.unchokes_us and p.ip not in gone)
    if kept == state.kept_slices:
        return []
    state.kept_slices = kept
    order = siteshare.priorities(state.pieces, len(state.sites), set(kept))
    return [Prioritize(None if order is None else tuple(order))]


def _filter(state: Steering) -> list[Action]:
    ips = frozenset(state.shut_out.ips())
    if ips == state.filtered:
        return []
    state.filtered = ips
    return [Filter(ips)]
