"""Orchestration: start the workers, feed their events to the decisions, carry those out.

The parent process owns the terminal and every decision (timeout, stall,
blocked files, seeding, verification, exit status: btget.transfer.runstate.step,
pure); the workers only move bytes. Workers trade pieces with each other:
once all listen, each is told the others' endpoints, so a piece one worker
fetched for a boundary is not fetched twice from a storage site.
"""

from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing
import multiprocessing.connection
import secrets
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from torrents import metainfo, peerid
from torrents.errors import BtswarmError
from torrents.hostport import ANY, format_hostport
from torrents.metainfo import Metainfo
from torrents.proxyenv import NONE, Proxies, Proxy

from btget.display.result import SourceLog, WorkerReport
from btget.errors import Blocked, Interrupted, TransferError, VerifyFailed
from btget.events import Connect, Event, Listening, Progress, Rates, Stop, Tick, Verified, WebSeeds, WorkerGone
from btget.resolve import plan, reach
from btget.resolve.bearer import TokenSource
from btget.transfer import finish, ratecap, timeline, webseeds
from btget.transfer.runstate import (Action, Completed, Ending, Introduce, Note, Policy, RunState, SetRates,
                                     SetWebSeeds, Show, StartVerify, observe, step)
from btget.worker.process import STOP_WITHIN
from btget.worker.process import run as worker_main
from btget.worker.sharestate import remove_stale
from btget.worker.spec import WorkerSpec

log = logging.getLogger("btget.download")
STATE_DIR = ".bt-get"


@dataclass(frozen=True)
class Job:
    """Everything decided before the first byte moves."""
    meta: Metainfo
    torrent: bytes
    directory: Path  # DIR: files land in DIR/FOLDER/<LFN>
    shares: tuple[tuple[plan.PlanFile, ...], ...]  # one per worker, none empty
    selected: tuple[plan.PlanFile, ...]
    peers: tuple[tuple[str, int], ...] = ()
    web: webseeds.Rule = webseeds.Rule()  # the web seeds (the torrent's, --web-seed) and when to use them
    listen_ip: str = ANY  # every address (the default), or the one given with --listen
    recheck: bool = False
    max_connections: int = 200
    seed_time: float = 0.0
    seed_ratio: float = 0.0
    linger: float = 0.0  # [get] linger: serving the T3s still downloading, after completion
    timeout: float = 0.0
    stall_timeout: float = 300.0
    blocked_after: float = 30.0  # seeds connected, nothing arriving this long: name the files that are stuck
    checksums: dict[str, str] = field(default_factory=dict)  # LFN → adler32 hex, when the catalog has them
    folder: str | None = None  # the dataset's directory in DIR; None: the torrent's name (target.placement)
    site_peers: tuple[str, ...] = ()  # the sites' seeds, 'ip:port' (btget/worker/siteshare.py)
    prefer_ips: tuple[str, ...] = ()  # addresses of the sites preferred and left out (btget/transfer/sitechoice.py)
    exclude_ips: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()  # the names of the sites left out, for the messages
    max_rate: int = 0  # bytes/s, the whole run (--max-rate; 0: none)
    max_upload_rate: int = 0
    proxies: Proxies = NONE  # the web seeds' (torrents/proxyenv.py)
    tracker_proxy: Proxy | None = None  # the proxy of the announces (btget/resolve/reach.py)
    closed: bool = False  # this host accepts no inbound connection (btget/resolve/reach.py)
    token: TokenSource | None = None  # a members-only dataset: the user's token for its web seeds (btget/resolve/bearer.py)
    peer_cert: tuple[str, str, str] = ()  # a restricted dataset: (peer CA, certificate, key) files (btget/worker/spec.py)
    peer_cert_repo: tuple[str, str] = ()  # (repository, CA file) when the certificate is the repository's


    @property
    def root(self) -> Path:
        """DIR/FOLDER: where the dataset's files are."""
        return self.directory / (self.folder or self.meta.name)


@dataclass
class WorkerProcess:
    spec: WorkerSpec
    process: Any
    conn: multiprocessing.connection.Connection
    gone: bool = False  # its pipe is closed: it said it stopped, or died


@dataclass
class Outcome:
    complete: bool
    error: BtswarmError | None
    seconds: float  # from start until complete (or until it gave up): seeding not counted
    workers: list[WorkerReport]
    files: dict[int, int]  # file index → verified bytes on disk
    verify_results: dict[str, bool]  # LFN → adler32 matched
    endpoints: dict[str, int]  # "ip:port" of each worker, and of connections from one → worker number
    web_switches: list[dict] = field(default_factory=list)  # when the web seeds were switched on or off, and why
    # (seconds from the start, endpoint → payload bytes from it so far), btget.display.result.SourceLog
    source_samples: list[tuple[float, dict[str, int]]] = field(default_factory=list)


class Display(Protocol):
    def start(self, shares: list[tuple[int, int, int]]) -> None: ...
    def update(self, event: Listening | Progress) -> None: ...
    def note(self, text: str, warning: bool = False) -> None: ...
    def stop(self) -> None: ...


def check_case(directory: Path, meta: Metainfo) -> None:
    """Refuse, before any byte moves, a file system that cannot hold two names differing in case
    when the dataset has such a pair (one would overwrite the other)."""
    twins = metainfo.case_twins(meta)
    if not twins:
        return
    probe = directory / "case-probe"
    probe.touch()
    try:
        folds = (directory / "CASE-PROBE").exists()
    finally:
        probe.unlink(missing_ok=True)
    if folds:
        a, b = (meta.files[i].lfn for i in twins[:2])
        raise TransferError(directory.parent, f"this file system does not tell {a!r} from {b!r} (it ignores case) "
                                              f"and the dataset holds both; download elsewhere (-o DIR)")


def file_names(meta: Metainfo, folder: str | None) -> dict[int, str]:
    """libtorrent's renamed_files: the info dict's own names (metainfo.own_names: case twins), or,
    when the dataset lands in a directory of another name (a DID's), every file under that one."""
    if not folder or folder == meta.name or meta.single_file:
        return metainfo.own_names(meta)
    return {i: f"{folder}/{f.lfn}" for i, f in enumerate(meta.files)}


def state_dir(job: Job) -> Path:
    return job.root / STATE_DIR


def policy_of(job: Job) -> Policy:
    return Policy(name=job.meta.name, workers=len(job.shares), size=sum(f.size for f in job.selected),
                  timeout=job.timeout, stall_timeout=job.stall_timeout, blocked_after=job.blocked_after,
                  seed_time=job.seed_time, seed_ratio=job.seed_ratio, linger=job.linger,
                  closed_stay=reach.CLOSED_STAY if job.closed else 0.0,
                  max_rate=job.max_rate, max_upload_rate=job.max_upload_rate,
                  verify=any(f.lfn in job.checksums for f in job.selected), web=job.web,
                  trackers=() if job.peers or given_web_seeds(job) else tuple(job.meta.trackers()))


def given_web_seeds(job: Job) -> tuple[webseeds.Source, ...]:
    """The web seeds the user named (--web-seed), not the torrent's url-list (the sites', which serve only
    what the federation published)."""
    return tuple(s for s in job.web.sources if s.url not in job.meta.url_list)


def sibling_prefix(whole: bool) -> str:
    """A peer-id prefix for one run's workers (each adds its 2-digit index and its part:
    torrents/peerid.py; libtorrent fills the rest).

    A worker's incoming connection from a sibling comes from an ephemeral port on the shared
    address, as does one from any other client on this host: the peer id tells them apart. A site
    reads from it whether the worker wants every piece (btserver/uploadslots.py).
    """
    return peerid.run_prefix(whole, secrets.token_hex(3))


def run(job: Job, display: Display) -> Outcome:
    """Download `job`; return how it ended (errors are returned, not raised, so the summary can report them).

    The decisions are btget.transfer.runstate.step's; this carries them out: worker
    processes, their pipes, the display, the checksum thread.
    """
    sdir = make_state_dir(job)
    # fork, not spawn: a spawned worker re-imports Python, libtorrent and this
    # package before it can announce (docs/benchmarks.md "get"). Forking is
    # safe as no other thread exists yet: asyncio.run() has shut its
    # executor down, and the display's refresh thread starts after the fork.
    ctx = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    procs: dict[int, WorkerProcess] = {}
    state = RunState.start(policy_of(job), time.monotonic())
    sources = SourceLog()
    interrupted = False
    verifier: concurrent.futures.Future | None = None
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="verify")
    previous_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        for spec in worker_specs(job, sdir):
            procs[spec.index] = _start(ctx, spec)
        timeline.mark("workers_started")
        display.start([(k, len(s), sum(f.size for f in s)) for k, s in enumerate(job.shares, 1)])
        while state.ended is None:
            for event in _happened(procs, state, verifier):
                _mark(event)
                for action in step(state, event, time.monotonic()):
                    verifier = _carry_out(action, job, procs, display, executor, verifier)
            if state.completed_at is None:
                sources.sample(time.monotonic() - state.started, raw_sources(state))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        _stop_all(procs, state, display)
        signal.signal(signal.SIGTERM, previous_term)
        display.stop()
    results: dict[str, bool] = verifier.result() if verifier is not None else {}
    executor.shutdown(wait=True)
    if state.completed_at is not None:
        finish.restore(job.root, job.meta)
    return outcome_of(job, state, procs, results, interrupted, sources)


def make_state_dir(job: Job) -> Path:
    """DIR/NAME/.bt-get, made; a one-line error naming what refused it, or a file system that cannot hold the
    dataset's names."""
    sdir = state_dir(job)
    try:
        sdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file where a directory belongs, a read-only or full file system
        where = next((p for p in sdir.parents if p.exists()), job.directory)  # what refused us
        problem = "not a directory" if isinstance(exc, (NotADirectoryError, FileExistsError)) else \
            f"cannot write here ({exc.strerror})"
        raise TransferError(where, problem) from None
    check_case(sdir, job.meta)
    return sdir


def worker_specs(job: Job, sdir: Path) -> list[WorkerSpec]:
    """One WorkerSpec a share: its files, this run's peer-id prefix and its part, its share of the caps."""
    whole = len(job.shares) == 1 and len(job.selected) == job.meta.file_count
    prefix = sibling_prefix(whole)
    down = ratecap.split(job.max_rate, {k: sum(f.size for f in s) for k, s in enumerate(job.shares, 1)})
    up = ratecap.even(job.max_upload_rate, len(job.shares))
    return [WorkerSpec(index=k, torrent=job.torrent, save_path=str(job.directory), state_dir=str(sdir),
                       key=plan.share_key(share), wanted=tuple(f.index for f in share),
                       listen_ip=job.listen_ip, peers=job.peers,
                       web_seeds=tuple(s.url for s in webseeds.initial(job.web)),
                       url_list=tuple(s.url for s in job.web.sources), own_names=file_names(job.meta, job.folder),
                       recheck=job.recheck, max_connections=job.max_connections, peer_prefix=prefix,
                       part="" if whole else peerid.part_tag(f.index for f in share),
                       site_peers=job.site_peers, prefer_ips=job.prefer_ips, exclude_ips=job.exclude_ips,
                       rates=(down[k], up), proxies=job.proxies, tracker_proxy=job.tracker_proxy,
                       token=job.token, peer_cert=job.peer_cert, peer_cert_repo=job.peer_cert_repo)
            for k, share in enumerate(job.shares, 1)]


def _start(ctx: Any, spec: WorkerSpec) -> WorkerProcess:
    parent_end, child_end = ctx.Pipe(duplex=True)
    proc = ctx.Process(target=worker_main, args=(spec, child_end), name=f"bt-get worker {spec.index}")
    proc.start()
    child_end.close()
    return WorkerProcess(spec, proc, parent_end)


def _happened(procs: dict[int, WorkerProcess], state: RunState,
              verifier: concurrent.futures.Future | None) -> list[Event]:
    """What the workers said within 0.2 s (a worker whose pipe closed: WorkerGone), the checksum check's
    end, and a Tick."""
    happened: list[Event] = []
    live = [p.conn for p in procs.values() if not p.gone]
    for conn in multiprocessing.connection.wait(live, timeout=0.2):
        p = next(p for p in procs.values() if p.conn is conn)
        try:
            happened.append(conn.recv())
        except (EOFError, OSError):
            p.gone = True
            p.process.join(2)
            happened.append(WorkerGone(p.spec.index, p.process.exitcode))
    if verifier is not None and verifier.done() and not state.verified:
        happened.append(Verified())
    happened.append(Tick())
    return happened


def outcome_of(job: Job, state: RunState, procs: dict[int, WorkerProcess], results: dict[str, bool],
               interrupted: bool, sources: SourceLog) -> Outcome:
    end = state.completed_at if state.completed_at is not None else time.monotonic()
    endpoints = {format_hostport(*v.endpoint): k for k, v in state.workers.items() if v.endpoint}
    for v in state.workers.values():
        endpoints.update(v.last.siblings if v.last else {})
    return Outcome(complete=state.completed_at is not None, error=outcome_error(state, job, results, interrupted),
                   seconds=end - state.started,
                   workers=[WorkerReport(k, len(p.spec.wanted), sum(f.size for f in job.shares[k - 1]),
                                         state.workers[k].last) for k, p in procs.items()],
                   files=state.files, verify_results=results,
                   endpoints=endpoints,
                   web_switches=[{"after_s": round(t - state.started, 3), "to": "web seeds" if on else "peers",
                                  "why": why} for t, on, why in (state.web.switches if state.web else [])],
                   source_samples=sources.finish(end - state.started, raw_sources(state)))


def raw_sources(state: RunState) -> dict[str, int]:
    """Payload bytes per peer endpoint so far, summed over the workers' latest Progress."""
    out: dict[str, int] = {}
    for w in state.workers.values():
        for ep, n in (w.last.sources if w.last else {}).items():
            out[ep] = out.get(ep, 0) + n
    return out


def _mark(event: Event) -> None:
    """The workers' steps of the start, for --json's timeline (the earliest worker's)."""
    if isinstance(event, Listening):
        timeline.merge(event.marks)
    elif isinstance(event, Progress):
        for name, at in (("connected", event.connected_at), ("first_byte", event.first_byte_at)):
            if at:
                timeline.mark(name, at)


def _carry_out(action: Action, job: Job, procs: dict[int, WorkerProcess], display: Display,
               executor: concurrent.futures.Executor,
               verifier: concurrent.futures.Future | None) -> concurrent.futures.Future | None:
    """Do what step decided; returns the checksum thread once it is started."""
    if isinstance(action, Show):
        if isinstance(action.event, Listening):
            # -v: where this run can be reached (a peer for another bt-get while it seeds). The event's address
            # is where sibling workers connect: this host's loopback when listening on every address.
            e = action.event
            where = f"every address, port {e.port}" if job.listen_ip == ANY else format_hostport(e.ip, e.port)
            log.info("worker %d listening on %s", e.worker, where)
        display.update(action.event)
    elif isinstance(action, Note):
        log.info("%s", action.text)
        display.note(action.text, warning=action.warning)
    elif isinstance(action, Introduce):
        procs[action.worker].conn.send(Connect(action.peers))
    elif isinstance(action, SetWebSeeds):
        log.info("web seeds: %s", ", ".join(s.label for s in action.sources) or "none (BitTorrent peers only)")
        for p in procs.values():
            if not p.gone:
                try:
                    p.conn.send(WebSeeds(tuple(s.url for s in action.sources), action.probe))
                except OSError:
                    pass  # it died: its WorkerGone follows
    elif isinstance(action, SetRates):
        log.debug("download caps now %s", ", ".join(
            f"worker {k}: {d} B/s (using {action.using[k]:.0f})" if k in action.using else f"worker {k}: {d} B/s"
            for k, (d, _) in action.rates.items()))
        for k, (download, upload) in action.rates.items():
            if not procs[k].gone:
                try:
                    procs[k].conn.send(Rates(download, upload))
                except OSError:
                    pass  # it died: its WorkerGone follows
    elif isinstance(action, StartVerify):
        return executor.submit(finish.verify_files, job.root,
                               {f.lfn: job.checksums[f.lfn] for f in job.selected if f.lfn in job.checksums})
    elif isinstance(action, Completed):
        log.info("%s: complete in %.1f s%s", job.meta.name, action.seconds, "; seeding" if action.seeding else "")
    return verifier


def outcome_error(state: RunState, job: Job, results: dict[str, bool], interrupted: bool) -> BtswarmError | None:
    """The error a run ends with, if any (pure): what step ended it with, an interruption before
    completion, files stuck (named from the workers' last word on them), bad checksums."""
    end = state.ended
    error = end.error if end is not None else None
    if error is None and interrupted and state.completed_at is None:
        error = Interrupted(job.meta.name, "interrupted; run again to resume")
    if error is None and end is not None and end.ending is Ending.BLOCKED:
        files = state.files
        stuck = [f.lfn for f in job.selected if files.get(f.index, 0) < f.size]
        why = (f"{end.why}; left out by --exclude-site: {', '.join(job.excluded)}" if job.excluded else
               f"{end.why}; the sites may be unable to read them, see their /api/status")
        error = Blocked(job.meta.name, f"{len(stuck)} files cannot be fetched ({why}): {_few(stuck)}")
        error.files = stuck  # type: ignore[attr-defined]
    bad = sorted(lfn for lfn, ok in results.items() if not ok)
    if error is None and bad:
        error = VerifyFailed(bad[0], "adler32 does not match the catalog"
                             + (f" (and {len(bad) - 1} more files)" if len(bad) > 1 else ""))
    return error


def _stop_all(procs: dict[int, WorkerProcess], state: RunState, display: Display) -> None:
    """Ask every worker to save its state and stop; wait a bounded time for its last word (shown: its
    per-file counts are what the summary states); then end it by PID."""
    for p in procs.values():
        if not p.gone:
            try:
                p.conn.send(Stop())
            except (OSError, ValueError):
                p.gone = True
    deadline = time.monotonic() + STOP_WITHIN + 5

    def waiting() -> list[multiprocessing.connection.Connection]:
        return [p.conn for k, p in procs.items() if not p.gone and not state.workers[k].stopped]

    while waiting() and time.monotonic() < deadline:
        for conn in multiprocessing.connection.wait(waiting(), timeout=0.5):
            p = next(p for p in procs.values() if p.conn is conn)
            try:
                shown = observe(state, conn.recv())
            except (EOFError, OSError):
                p.gone = True
                continue
            for action in shown:
                if isinstance(action, Show):
                    display.update(action.event)
    for p in procs.values():
        p.process.join(max(0.1, deadline - time.monotonic()))
        if p.process.is_alive():
            log.warning("worker %d did not stop; terminating pid %d", p.spec.index, p.process.pid)
            p.process.terminate()
            p.process.join(5)
            remove_stale(p.spec)  # what it would have removed on its way out
        p.conn.close()


def _few(names: list[str], limit: int = 10) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _raise_interrupt(signum: int, _frame: object) -> None:
    # SIGTERM (batch system, kill) takes the same path as Ctrl-C: workers save state.
    raise KeyboardInterrupt
