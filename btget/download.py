"""Orchestration: start the workers, feed their events to the display, decide the outcome.

The parent process owns the terminal and every decision (timeout, stall,
seeding, verification, exit status); the workers only move bytes. Workers
trade pieces with each other: once all listen, each is told the others'
endpoints (connect_peer), so a piece one worker fetched for a boundary is
not fetched twice from a storage site.
"""

from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing
import multiprocessing.connection
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from torrents.errors import BtswarmError
from torrents import metainfo
from torrents.metainfo import Metainfo

from btget import plan, timeline, verify
from btget.errors import Blocked, Incomplete, Interrupted, TransferError, VerifyFailed
from btget.worker import WorkerSpec, run as worker_main

log = logging.getLogger("btget.download")
STATE_DIR = ".bt-get"


@dataclass(frozen=True)
class Job:
    """Everything decided before the first byte moves."""
    meta: Metainfo
    torrent: bytes
    directory: Path  # DIR: files land in DIR/NAME/<LFN>
    shares: tuple[tuple[plan.PlanFile, ...], ...]  # one per worker, none empty
    selected: tuple[plan.PlanFile, ...]
    peers: tuple[tuple[str, int], ...] = ()
    web_seeds: tuple[str, ...] = ()
    listen_ip: str = "127.0.0.1"
    recheck: bool = False
    max_connections: int = 200
    seed_time: float = 0.0
    seed_ratio: float = 0.0
    timeout: float = 0.0
    stall_timeout: float = 300.0
    blocked_after: float = 30.0  # seeds connected, nothing arriving this long: name the files that are stuck
    checksums: dict[str, str] = field(default_factory=dict)  # LFN → adler32 hex, when the catalog has them
    worker_settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class WorkerState:
    spec: WorkerSpec
    process: Any
    conn: multiprocessing.connection.Connection
    endpoint: tuple[str, int] | None = None
    last: dict = field(default_factory=dict)
    files: dict[int, int] = field(default_factory=dict)
    finished: bool = False
    stopped: bool = False
    tracker_error: str | None = None  # the last announce's failure, None once one succeeds


@dataclass
class Outcome:
    complete: bool
    error: BtswarmError | None
    seconds: float  # from start until complete (or until it gave up): seeding not counted
    workers: list[dict]  # last event of each worker
    files: dict[int, int]  # file index → verified bytes on disk
    verify_results: dict[str, bool]  # LFN → adler32 matched
    endpoints: dict[str, int]  # "ip:port" of each worker → worker number


class Display(Protocol):
    def start(self, shares: list[tuple[int, int, int]]) -> None: ...
    def update(self, event: dict) -> None: ...
    def note(self, text: str) -> None: ...
    def stop(self) -> None: ...


def stop_seeding(elapsed: float, uploaded: int, size: int, seed_time: float, seed_ratio: float) -> bool:
    """Seed until --seed-time has passed or --seed-ratio is reached, whichever comes first.

    With neither set, stop at once; with only one set, that one decides.
    """
    ratio_reached = seed_ratio > 0 and size > 0 and uploaded / size >= seed_ratio
    time_reached = seed_time > 0 and elapsed >= seed_time
    if seed_time <= 0 and seed_ratio <= 0:
        return True
    return ratio_reached or time_reached


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


def state_dir(job: Job) -> Path:
    return job.directory / job.meta.name / STATE_DIR


def run(job: Job, display: Display) -> Outcome:
    """Download `job`; return how it ended (errors are returned, not raised, so the summary can report them)."""
    sdir = state_dir(job)
    sdir.mkdir(parents=True, exist_ok=True)
    check_case(sdir, job.meta)
    # fork, not spawn: a spawned worker re-imports Python, libtorrent and this
    # package before it can announce (~0.4 s of a cold start). Forking is safe
    # here because no other thread exists yet: asyncio.run() has shut its
    # executor down, and the display's refresh thread starts after the fork.
    ctx = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    workers: list[WorkerState] = []
    started = time.monotonic()
    completed_at: float | None = None
    error: BtswarmError | None = None
    blocked: str | None = None  # why: seeds connected and nothing arriving
    verifier: concurrent.futures.Future | None = None
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="verify")
    previous_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        for k, share in enumerate(job.shares, 1):
            spec = WorkerSpec(index=k, torrent=job.torrent, save_path=str(job.directory), state_dir=str(sdir),
                              key=plan.share_key(share), wanted=tuple(f.index for f in share),
                              listen_ip=job.listen_ip, peers=job.peers, web_seeds=job.web_seeds,
                              own_names=metainfo.own_names(job.meta),
                              recheck=job.recheck, max_connections=job.max_connections,
                              settings=job.worker_settings)
            parent_end, child_end = ctx.Pipe(duplex=True)
            proc = ctx.Process(target=worker_main, args=(spec, child_end), name=f"bt-get worker {k}")
            proc.start()
            child_end.close()
            workers.append(WorkerState(spec, proc, parent_end))
        timeline.mark("workers_started")
        display.start([(k, len(s), sum(f.size for f in s)) for k, s in enumerate(job.shares, 1)])
        introduced = False
        seeded = False  # some seed (or peer) was connected at some point
        best_done = -1
        last_progress = time.monotonic()
        while True:
            live = [w.conn for w in workers if not w.stopped]
            for conn in multiprocessing.connection.wait(live, timeout=0.2):
                w = next(w for w in workers if w.conn is conn)
                try:
                    event = conn.recv()
                except (EOFError, OSError):
                    w.stopped = True
                    if error is None:
                        w.process.join(2)
                        error = TransferError(f"worker {w.spec.index}",
                                              f"exited unexpectedly (exit code {w.process.exitcode})")
                    continue
                if event["type"] == "tracker":
                    note = _tracker_change(w, event)
                    if note:
                        display.note(note)
                    continue
                _apply(w, event)
                if event["type"] == "listening":
                    timeline.merge(event.get("marks"))
                    # -v: where this run can be reached (a peer for another bt-get while it seeds)
                    log.info("worker %d listening on %s:%d", w.spec.index, event["ip"], event["port"])
                if event["type"] == "error" and error is None:
                    error = TransferError(event["subject"], event["problem"])
                display.update(event)
            if error is not None:
                break
            if not introduced and len(workers) > 1 and all(w.endpoint for w in workers):
                # Workers trade pieces: each connects to all the others.
                for w in workers:
                    others = [o.endpoint for o in workers if o is not w]
                    w.conn.send(("connect", others))
                introduced = True
            now = time.monotonic()
            done = sum(w.last.get("done", 0) for w in workers)
            if done > best_done:
                best_done, last_progress = done, now
            if completed_at is None and all(w.finished for w in workers):
                completed_at = now
                log.info("%s: complete in %.1f s%s", job.meta.name, now - started,
                         "; seeding" if job.seed_time > 0 or job.seed_ratio > 0 else "")
                if job.checksums:
                    display.note("verifying checksums")
                    verifier = executor.submit(verify.verify_files, job.directory / job.meta.name,
                                               {f.lfn: job.checksums[f.lfn] for f in job.selected
                                                if f.lfn in job.checksums})
            if completed_at is None:
                if job.timeout and now - started > job.timeout:
                    error = Incomplete(job.meta.name, f"not complete after --timeout {job.timeout:g} s "
                                       f"({_peer_note(workers)}); run again to resume")
                    break
                seeds = sum(w.last.get("seeds", 0) for w in workers)
                seeded = seeded or seeds > 0 or any(w.last.get("connected") for w in workers)
                if job.blocked_after and seeded and now - last_progress > job.blocked_after:
                    # Seeds that claim every piece and send none of some (a site that cannot read
                    # them, a hung one), or seeds that left and none that came back: say which
                    # files are stuck; a rerun alone will not help.
                    blocked = (f"no byte for {job.blocked_after:g} s from the {seeds} seeds connected" if seeds else
                               f"every seed left and none came back in {job.blocked_after:g} s")
                    break
                if job.stall_timeout and now - last_progress > job.stall_timeout:
                    error = Incomplete(job.meta.name, f"no progress for {job.stall_timeout:g} s "
                                       f"({_peer_note(workers)}); run again to resume")
                    break
            else:
                uploaded = sum(w.last.get("uploaded", 0) for w in workers)
                size = sum(f.size for f in job.selected)
                verified = verifier is None or verifier.done()
                if verified and stop_seeding(now - completed_at, uploaded, size, job.seed_time, job.seed_ratio):
                    break
    except KeyboardInterrupt:
        if completed_at is None:
            error = Interrupted(job.meta.name, "interrupted; run again to resume")
    finally:
        _stop_all(workers)
        signal.signal(signal.SIGTERM, previous_term)
        display.stop()
    results: dict[str, bool] = {}
    if verifier is not None:
        results = verifier.result()
        bad = sorted(lfn for lfn, ok in results.items() if not ok)
        if bad and error is None:
            error = VerifyFailed(bad[0], "adler32 does not match the catalog"
                                 + (f" (and {len(bad) - 1} more files)" if len(bad) > 1 else ""))
    executor.shutdown(wait=True)
    files: dict[int, int] = {}
    for w in workers:
        files.update(w.files)
    if blocked is not None and error is None:
        stuck = [f.lfn for f in job.selected if files.get(f.index, 0) < f.size]
        error = Blocked(job.meta.name, f"{len(stuck)} files cannot be fetched ({blocked}; the sites may be "
                                       f"unable to read them, see their /api/status): {_few(stuck)}")
        error.files = stuck  # type: ignore[attr-defined]
    end = completed_at if completed_at is not None else time.monotonic()
    return Outcome(complete=completed_at is not None, error=error, seconds=end - started,
                   workers=[{**w.last, "worker": w.spec.index, "files_count": len(w.spec.wanted),
                             "bytes": sum(f.size for f in job.shares[w.spec.index - 1])} for w in workers],
                   files=files, verify_results=results,
                   endpoints={f"{w.endpoint[0]}:{w.endpoint[1]}": w.spec.index for w in workers if w.endpoint})


def _apply(w: WorkerState, event: dict) -> None:
    kind = event["type"]
    if kind == "listening":
        w.endpoint = (event["ip"], event["port"])
    elif kind in ("progress", "finished", "stopped"):
        w.last = event
        for name, key in (("connected", "connected_at"), ("first_byte", "first_byte_at")):
            if event.get(key):
                timeline.mark(name, event[key])
        if event.get("files") is not None:
            w.files = {int(i): n for i, n in event["files"].items()}
        if kind == "finished" or event.get("finished"):
            w.finished = True
        if kind == "stopped":
            w.stopped = True


def _stop_all(workers: list[WorkerState]) -> None:
    """Ask every worker to save its state and stop; wait a bounded time; then end it by PID."""
    for w in workers:
        if not w.stopped:
            try:
                w.conn.send(("stop",))
            except (OSError, ValueError):
                w.stopped = True
    deadline = time.monotonic() + 20
    while any(not w.stopped for w in workers) and time.monotonic() < deadline:
        live = [w.conn for w in workers if not w.stopped]
        for conn in multiprocessing.connection.wait(live, timeout=0.5):
            w = next(w for w in workers if w.conn is conn)
            try:
                _apply(w, conn.recv())
            except (EOFError, OSError):
                w.stopped = True
    for w in workers:
        w.process.join(max(0.1, deadline - time.monotonic()))
        if w.process.is_alive():
            log.warning("worker %d did not stop; terminating pid %d", w.spec.index, w.process.pid)
            w.process.terminate()
            w.process.join(5)
        w.conn.close()


def _tracker_change(w: WorkerState, event: dict) -> str | None:
    """Record a worker's announce outcome; a line for the user when the tracker starts or stops failing."""
    before = w.tracker_error
    w.tracker_error = None if event["ok"] else event["message"]
    if w.tracker_error and w.tracker_error != before:
        log.warning("tracker %s: %s", event["url"], w.tracker_error)
        return f"tracker {event['url']}: {w.tracker_error}"
    if before and not w.tracker_error:
        return f"tracker {event['url']}: reachable again ({event['message']})"
    return None


def _peer_note(workers: list[WorkerState]) -> str:
    peers = sum(w.last.get("peers", 0) for w in workers)
    seeds = sum(w.last.get("seeds", 0) for w in workers)
    errors = sorted({w.tracker_error for w in workers if w.tracker_error})
    return f"{peers} peers, {seeds} seeds" + (f"; tracker: {', '.join(errors)}" if errors else "")


def _few(names: list[str], limit: int = 10) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _raise_interrupt(signum: int, _frame: object) -> None:
    # SIGTERM (batch system, kill) takes the same path as Ctrl-C: workers save state.
    raise KeyboardInterrupt

