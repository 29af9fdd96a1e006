"""The parent's decisions during a download, as a pure function: `step(state, event, now) -> actions`.

btget.transfer.download feeds every worker event (and the passing of time) through
`step` and carries out what it returns: introduce the workers to each
other, show progress, say a note, start the checksum check, end the run.
Nothing here touches a process, a pipe or a clock, so every rule —
introductions, timeout, stall, blocked files, completion, verification,
the end of seeding — is tested in milliseconds (tests/btget/test_runstate.py).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from torrents.errors import BtswarmError

from btget.errors import Incomplete, TrackersRefuse, TransferError
from btget.events import (WEB_SEED, Event, Listening, Phase, Progress, TrackerReply, Verified, WebSeedBanned,
                          WorkerFailed, WorkerGone)
from btget.transfer import ratecap, webseeds


@dataclass(frozen=True)
class Policy:
    """The rules of one run (from the command line and the configuration)."""

    name: str  # the dataset's, for messages
    workers: int
    size: int  # bytes selected
    timeout: float = 0.0  # 0: none
    stall_timeout: float = 300.0  # 0: none
    blocked_after: float = 30.0  # 0: never
    seed_time: float = 0.0
    seed_ratio: float = 0.0
    linger: float = 0.0  # with neither seed_time nor seed_ratio: serving the T3s still downloading (serving)
    # A closed T3 (btget/resolve/reach.py) stays this long after completion (within linger) whatever it sees: nobody
    # can find it, and the T3s that came since its last announce reach it only once its completion's announce
    # has brought them and it has connected to them (docs/benchmarks.md "closed").
    closed_stay: float = 0.0
    verify: bool = False  # the record has checksums for the selected files
    # the torrent's (when every one says no for good and no byte came, the run ends); none when the user named
    # sources of their own (--peer, --web-seed), which may serve it whatever the trackers say
    trackers: tuple[str, ...] = ()
    web: webseeds.Rule = webseeds.Rule()  # when to use the sites' web seeds
    max_rate: int = 0  # bytes/s for the whole run, all workers together (0: none)
    max_upload_rate: int = 0


QUIET = 2.0  # s without a byte uploaded after which the T3s around us no longer need us (serving)
RESHARE = 0.5  # seconds between two looks at where the run's rate cap is used (the workers report as often)


class Ending(enum.Enum):
    SEEDED = "seeded"  # complete (verified), seeding done
    FAILED = "failed"  # an error ends the run
    BLOCKED = "blocked"  # seeds connected (or gone), nothing arriving: name the stuck files


# --- actions ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Introduce:
    worker: int
    peers: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Show:
    event: Listening | Progress


@dataclass(frozen=True)
class Note:
    text: str
    warning: bool = False  # said even without a display (as `bt-get: warning: ...`)


@dataclass(frozen=True)
class Completed:
    """Every wanted piece is on disk (seeding, if asked, goes on)."""

    seconds: float
    seeding: bool


@dataclass(frozen=True)
class StartVerify:
    pass


@dataclass(frozen=True)
class End:
    ending: Ending
    error: BtswarmError | None = None
    why: str = ""  # for BLOCKED: what was seen


@dataclass(frozen=True)
class SetWebSeeds:
    """Every worker uses exactly these web seeds from now on (btget/transfer/webseeds.py decided)."""

    sources: tuple[webseeds.Source, ...]
    probe: bool = False


@dataclass(frozen=True)
class SetRates:
    """Each worker's part of the run's caps from now on (btget/transfer/ratecap.py split them)."""

    rates: dict[int, tuple[int, int]]  # worker → (download, upload) bytes/s
    using: dict[int, float] = field(default_factory=dict)  # worker → capped bytes/s lately (for the log)


Action = Introduce | Show | Note | Completed | StartVerify | End | SetWebSeeds | SetRates


# --- state ------------------------------------------------------------------------------------

@dataclass
class WorkerView:
    endpoint: tuple[str, int] | None = None
    last: Progress | None = None
    files: dict[int, int] = field(default_factory=dict)
    finished: bool = False
    stopped: bool = False
    tracker_error: str | None = None  # the last announce's failure, None once one succeeds
    refused: dict[str, str] = field(default_factory=dict)  # tracker URL → its definitive no


@dataclass
class RunState:
    policy: Policy
    started: float
    workers: dict[int, WorkerView] = field(default_factory=dict)
    last_progress: float = 0.0
    best_done: int = 0  # the most wanted bytes verified so far (more than that is progress)
    introduced: bool = False
    seeded: bool = False  # some seed (or peer) was connected at some point
    completed_at: float | None = None
    uploaded_at: tuple[float, int] = (0.0, 0)  # when the bytes uploaded last grew, and to how many
    verifying: bool = False
    verified: bool = False
    ended: End | None = None
    web: webseeds.State | None = None
    download_caps: dict[int, int] = field(default_factory=dict)  # what each worker was last told
    reshared_at: float = float("-inf")
    # (when, each worker's capped bytes) of the looks within ratecap.WINDOW, oldest first
    capped_seen: list[tuple[float, dict[int, int]]] = field(default_factory=list)
    cap_gain: float = 1.0  # the workers' parts add up to this times the cap (btget/transfer/ratecap.py gain)

    @classmethod
    def start(cls, policy: Policy, now: float) -> "RunState":
        return cls(policy, now, {k: WorkerView() for k in range(1, policy.workers + 1)}, last_progress=now,
                   web=webseeds.State.start(policy.web, now))

    def total(self, attr: str) -> int:
        return sum(getattr(w.last, attr) for w in self.workers.values() if w.last is not None)

    @property
    def files(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for w in self.workers.values():
            out.update(w.files)
        return out

    def peer_note(self) -> str:
        errors = sorted({w.tracker_error for w in self.workers.values() if w.tracker_error})
        return (f"{self.total('peers')} peers, {self.total('seeds')} seeds"
                + (f"; tracker: {', '.join(errors)}" if errors else ""))


def serving(elapsed: float, quiet: float, leechers: int, linger: float) -> bool:
    """With neither --seed-time nor --seed-ratio, whether a complete run goes on serving the swarm: while a
    connected peer is still downloading and something was uploaded within QUIET s (`quiet`: since the last
    byte), for at most `linger` s after completion. A lone T3 (only seeds around) leaves at once."""
    return linger > 0 and elapsed < linger and leechers > 0 and quiet < QUIET


def stop_seeding(elapsed: float, uploaded: int, size: int, seed_time: float, seed_ratio: float) -> bool:
    """Seed until --seed-time has passed or --seed-ratio is reached, whichever comes first.

    With neither set, stop at once; with only one set, that one decides.
    """
    ratio_reached = seed_ratio > 0 and size > 0 and uploaded / size >= seed_ratio
    time_reached = seed_time > 0 and elapsed >= seed_time
    if seed_time <= 0 and seed_ratio <= 0:
        return True
    return ratio_reached or time_reached


# --- the decisions ----------------------------------------------------------------------------

def step(state: RunState, event: Event, now: float) -> list[Action]:
    """What to do about `event` at `now` (monotonic seconds); updates `state`."""
    if state.ended is not None:
        return []
    if isinstance(event, WorkerGone):
        observe(state, event)
        return _end(state, End(Ending.FAILED, TransferError(f"worker {event.worker}", f"exited unexpectedly "
                                                                                        f"(exit code {event.exitcode})")))
    if isinstance(event, WorkerFailed):
        return _end(state, End(Ending.FAILED, TransferError(event.subject, event.problem)))
    actions = observe(state, event)
    if isinstance(event, TrackerReply):
        return actions + _trackers_refuse(state, now)
    if isinstance(event, WebSeedBanned):
        return actions + _web_seeds(webseeds.banned(state.policy.web, _web(state), event.url), warning=True)
    actions += _introductions(state) + _progress(state, now) + _rates(state, now)
    if state.ended is None:
        actions += _web_seeds(webseeds.decide(state.policy.web, _web(state), _seen(state), now,
                                              state.completed_at is not None))
    if state.ended is None:
        actions += _trackers_refuse(state, now)  # the web seeds' time for a first byte may be over
    return actions


def observe(state: RunState, event: Event) -> list[Action]:
    """Record what `event` says (also after the run has ended: the workers' last words); what to show."""
    w = state.workers.get(getattr(event, "worker", 0))
    if w is None:
        if isinstance(event, Verified):
            state.verified = True
        return []
    if isinstance(event, WorkerGone):
        w.stopped = True
    elif isinstance(event, TrackerReply):
        if event.definitive:
            w.refused[event.url] = event.message
        else:
            w.refused.pop(event.url, None)
        note = _tracker_change(w, event)
        return [Note(note, warning=not event.ok)] if note else []
    elif isinstance(event, Listening):
        w.endpoint = (event.ip, event.port)
        return [Show(event)]
    elif isinstance(event, Progress):
        w.last = event
        if event.files is not None:
            w.files = dict(event.files)
        w.finished = w.finished or event.phase is Phase.FINISHED or event.flushed
        w.stopped = event.phase is Phase.STOPPED
        return [Show(event)]
    return []


def _introductions(state: RunState) -> list[Action]:
    """Workers trade pieces: once all listen, each connects to all the others."""
    views = state.workers
    if state.introduced or len(views) < 2 or not all(v.endpoint for v in views.values()):
        return []
    state.introduced = True
    return [Introduce(k, tuple(o.endpoint for j, o in views.items() if j != k))  # type: ignore[misc]
            for k in views]


def _progress(state: RunState, now: float) -> list[Action]:
    p = state.policy
    done = state.total("done")
    if done > state.best_done:
        state.best_done, state.last_progress = done, now
    if state.completed_at is None and all(v.finished for v in state.workers.values()):
        held = sum(state.files.values())
        if all(v.files for v in state.workers.values()) and held < p.size:
            # libtorrent's "finished" means every piece of priority above 0 is held: a piece left at 0 that
            # a selected file needs would end the fetch short, and no checksum need name the file.
            return _end(state, End(Ending.FAILED, Incomplete(p.name, f"the workers said complete with {held} of "
                                                                     f"{p.size} bytes held; run again to resume")))
        state.completed_at = now
        state.uploaded_at = (now, state.total("uploaded"))
        done_now: list[Action] = [Completed(now - state.started, p.seed_time > 0 or p.seed_ratio > 0)]
        if p.verify:
            state.verifying = True
            return done_now + [Note("verifying checksums"), StartVerify()]
        state.verified = True
        return done_now + _done_seeding(state, now)
    if state.completed_at is None:
        if p.timeout and now - state.started > p.timeout:
            return _end(state, End(Ending.FAILED, Incomplete(p.name, f"not complete after --timeout {p.timeout:g} s "
                                                                     f"({state.peer_note()}); run again to resume")))
        seeds = state.total("seeds")
        state.seeded = state.seeded or seeds > 0 or any(v.last is not None and v.last.connected
                                                        for v in state.workers.values())
        idle = now - state.last_progress
        if p.blocked_after and state.seeded and idle > p.blocked_after:
            # Seeds that claim every piece and send none of some (a site that cannot read
            # them, a hung one), or seeds that left and none came back: name the stuck files.
            seeds = max((v.last.seeds for v in state.workers.values() if v.last is not None), default=0)
            why = (f"no byte for {p.blocked_after:g} s from the {seeds} seeds connected" if seeds else
                   f"every seed left and none came back in {p.blocked_after:g} s")
            return _end(state, End(Ending.BLOCKED, why=why))
        if p.stall_timeout and idle > p.stall_timeout:
            return _end(state, End(Ending.FAILED, Incomplete(p.name, f"no progress for {p.stall_timeout:g} s "
                                                                     f"({state.peer_note()}); run again to resume")))
        return []
    uploaded = state.total("uploaded")
    if uploaded > state.uploaded_at[1]:
        state.uploaded_at = (now, uploaded)
    return _done_seeding(state, now) if state.verified else []


def _done_seeding(state: RunState, now: float) -> list[Action]:
    """The end once the seeding asked for is done (--seed-time, --seed-ratio), or without either, once the
    swarm no longer needs us (serving)."""
    p, elapsed = state.policy, now - (state.completed_at or now)
    if p.seed_time > 0 or p.seed_ratio > 0:
        done = stop_seeding(elapsed, state.total("uploaded"), p.size, p.seed_time, p.seed_ratio)
    else:
        done = (not serving(elapsed, now - state.uploaded_at[0], state.total("leechers"), p.linger)
                and elapsed >= min(p.closed_stay, p.linger))
    return _end(state, End(Ending.SEEDED)) if done else []


def _rates(state: RunState, now: float) -> list[Action]:
    """The run's download cap goes where it is used (btget/transfer/ratecap.py), looked at every RESHARE s."""
    p = state.policy
    views = state.workers
    if not p.max_rate or now - state.reshared_at < RESHARE or not all(v.last is not None for v in views.values()):
        return []
    state.reshared_at = now
    capped = {k: _capped_bytes(v.last) for k, v in views.items()}  # type: ignore[arg-type]
    using: dict[int, float] = {}
    if state.capped_seen:
        # over a window, not since the last look: the bytes come in bursts (docs/benchmarks.md
        # "ratecap"), and a worker seen idle would lose its part
        at, seen = state.capped_seen[0]
        elapsed = max(now - at, 1e-3)
        using = {k: max(0, capped[k] - seen.get(k, 0)) / elapsed for k in views}
        fetching = {k: state.download_caps.get(k, p.max_rate // len(views)) for k, v in views.items()
                    if not v.finished}
        state.cap_gain = ratecap.gain(state.cap_gain, sum(using.values()), p.max_rate,
                                      ratecap.held_back(using, fetching))
        caps = {**ratecap.fill(p.max_rate, using, fetching, state.cap_gain),
                **{k: 1 for k, v in views.items() if v.finished}}
    else:
        caps = ratecap.split(p.max_rate, {k: 0 if v.finished else max(0, v.last.wanted - v.last.done)  # type: ignore
                                          for k, v in views.items()})
    state.capped_seen = [(at, seen) for at, seen in state.capped_seen if now - at < ratecap.WINDOW] + [(now, capped)]
    caps = ratecap.moved(state.download_caps, caps)
    if not caps:
        return []
    state.download_caps = {**state.download_caps, **caps}
    up = ratecap.even(p.max_upload_rate, len(views))
    return [SetRates({k: (c, up) for k, c in caps.items()}, using)]


def _capped_bytes(p: Progress) -> int:
    """What a worker took through the cap: from remote peers and web seeds, not from its siblings."""
    return p.peer_bytes + sum(n for key, n in p.sources.items() if key.startswith(WEB_SEED))


def _trackers_refuse(state: RunState, now: float) -> list[Action]:
    """Every tracker of the torrent said no for good, to every worker, and no peer or web seed has sent a
    byte: nothing will start this swarm; say the trackers' words now rather than wait out the timeouts.

    A connection is not a source: the sites' web seeds answer 404 for a torrent they never made (a forged
    one, or a version nobody published), and sibling workers have nothing to trade. Counted as sources,
    they made such a run wait 30 s and blame the sites (exit 7), or never end with --no-web-seeds.

    Web seeds switched on (the trackers' no is what switches them on) get the web rule's `after` for a first
    byte: a members-only dataset whose tracker refuses plain announces is served by its token-checking web
    seeds, and on a loaded host their first byte came after the tracker's second no, 3 s after its first."""
    p = state.policy
    if not p.trackers or state.best_done > 0 or state.total("downloaded") > 0:
        return []
    if state.web is not None and state.web.active and now - state.web.since < p.web.after:
        return []
    views = state.workers.values()
    if not all(url in v.refused for v in views for url in p.trackers):
        return []
    words = sorted({f"tracker {url}: {v.refused[url]}" for v in views for url in p.trackers})
    return _end(state, End(Ending.FAILED, TrackersRefuse(p.name, "; ".join(words))))


def _web(state: RunState) -> webseeds.State:
    if state.web is None:
        state.web = webseeds.State.start(state.policy.web, state.started)
    return state.web


def _seen(state: RunState) -> webseeds.Seen:
    last = [w.last for w in state.workers.values() if w.last is not None]
    return webseeds.Seen(peer_bytes=sum(p.peer_bytes for p in last), peers_connected=sum(p.peers_remote for p in last),
                         connect_attempts=sum(p.connect_attempts for p in last),
                         connect_failures=sum(p.connect_failures for p in last),
                         trackers_failing=all(w.tracker_error for w in state.workers.values()))


def _web_seeds(switch: webseeds.Switch | None, warning: bool = False) -> list[Action]:
    if switch is None:
        return []
    return [Note(switch.why, warning=warning or switch.warning), SetWebSeeds(switch.sources, switch.probe)]


def _end(state: RunState, end: End) -> list[Action]:
    state.ended = end
    return [end]


def _tracker_change(w: WorkerView, event: TrackerReply) -> str | None:
    """Record an announce's outcome; a line for the user when the tracker starts or stops failing."""
    before = w.tracker_error
    w.tracker_error = None if event.ok else event.message
    if w.tracker_error and w.tracker_error != before:
        return f"tracker {event.url}: {w.tracker_error}"
    if before and not w.tracker_error:
        return f"tracker {event.url}: reachable again ({event.message})"
    return None
