"""One `btswarm up` per state directory, and nothing left behind by one that was killed.

The lock (`STATE/up.lock`, flock) is held for the run's life: a second
`btswarm up` on the same directory would rewrite its configs (new ports,
new secrets) and republish under the running federation. The children
(`STATE/children.json`, written by the supervisor) are what a `kill -9`
of `btswarm up` would orphan; they also get SIGTERM when their parent
dies (PR_SET_PDEATHSIG), and the next `btswarm up` stops any still there.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import signal
import time
from pathlib import Path
from typing import Callable, Iterator

from torrents.errors import BtswarmError
from torrents.procs import cmdline

LOCK_FILE = "up.lock"
CHILDREN_FILE = "children.json"
_PR_SET_PDEATHSIG = 1


@contextlib.contextmanager
def held(state: Path) -> Iterator[None]:
    """Hold STATE's lock for the block; BtswarmError naming the holder if another run has it."""
    state.mkdir(parents=True, exist_ok=True)
    fd = os.open(state / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise BtswarmError(state, f"in use by btswarm up (pid {holder})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def record_children(state: Path, children: list[tuple[str, int, list[str]]]) -> None:
    """What the supervisor runs now: (label, pid, argv)."""
    tmp = state / f".{CHILDREN_FILE}.tmp"
    tmp.write_text(json.dumps([{"label": l, "pid": p, "argv": a} for l, p, a in children]))
    os.replace(tmp, state / CHILDREN_FILE)


def stop_leftovers(state: Path, report: Callable[[str], None], timeout: float = 10.0) -> int:
    """Stop, by PID, the children an earlier `btswarm up` here recorded and left running; how many."""
    try:
        recorded = json.loads((state / CHILDREN_FILE).read_text())
    except (OSError, ValueError):
        return 0
    # Only a process running what was recorded: a PID reused by another program is left alone.
    alive = [c for c in recorded if isinstance(c, dict) and cmdline(int(c.get("pid", 0))) == c.get("argv")]
    for c in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(c["pid"], signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(cmdline(c["pid"]) for c in alive) and time.monotonic() < deadline:
        time.sleep(0.1)
    for c in alive:
        if cmdline(c["pid"]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(c["pid"], signal.SIGKILL)
    (state / CHILDREN_FILE).unlink(missing_ok=True)
    if alive:
        report(f"stopped {len(alive)} processes an earlier btswarm up left running: "
               + ", ".join(f"{c['label']} (pid {c['pid']})" for c in alive))
    return len(alive)


def die_with_parent() -> None:
    """In a child just forked: SIGTERM when the parent dies (a kill -9 of `btswarm up` too)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
