"""`--processes N` (bt-tracker, bt-repo): N copies of a service on one port, the kernel spreading connections.

Each child binds the same address with SO_REUSEPORT, so the kernel hands
every new connection to one of them; the state they must agree on lives
outside them: the tracker's in Redis (so more than one process needs
`store = "redis"`), the repository's in its SQLite catalog. The parent only forks, waits and forwards: a child that dies is started
again (at most MAX_RESTARTS in RESTART_WINDOW seconds), SIGTERM or SIGINT
stops every child and then the parent. A killed child loses only the
connections it had open; clients retry, and the others serve them.

Fork before any event loop or thread exists (each child builds its own
app and loop), so nothing is shared that fork would break.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from typing import Callable

log = logging.getLogger("btswarm.prefork")

MAX_RESTARTS = 5
RESTART_WINDOW = 60.0
EXIT_BIND = 3  # a child that could not bind: nothing to restart


def listening(serve: Callable[[], None], name: str, listen: str) -> int:
    """A child's exit code for `serve()` (one process of `name` on `listen`): 0 once it returns,
    EXIT_BIND, said on stderr, when it cannot listen."""
    try:
        serve()
    except OSError as exc:
        print(f"{name}: error: {listen}: cannot listen ({exc.strerror or exc})", file=sys.stderr)
        return EXIT_BIND
    return 0


def run(n: int, serve: Callable[[int], int], *, name: str) -> int:
    """Fork `n` children each running `serve(index)` (its exit code); supervise them; 0 after a clean stop."""
    children: dict[int, int] = {}
    restarts: list[float] = []
    stopping = False
    code = 0

    def spawn(index: int) -> None:
        pid = os.fork()
        if pid == 0:  # the child
            status = 1
            try:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    signal.signal(sig, signal.SIG_DFL)
                status = serve(index)
            except BaseException:  # noqa: BLE001 - a child must never return into the parent's loop
                log.exception("%s process %d failed", name, index)
            finally:
                os._exit(status)
        children[pid] = index

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
    for i in range(n):
        spawn(i)
    log.info("%s: %d processes (pids %s)", name, n, " ".join(map(str, children)))
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        index = children.pop(pid, None)
        if index is None:
            continue
        exit_code = os.waitstatus_to_exitcode(status)
        if stopping:
            continue
        now = time.monotonic()
        restarts[:] = [t for t in restarts if now - t < RESTART_WINDOW]
        if exit_code == EXIT_BIND or len(restarts) >= MAX_RESTARTS:
            why = "could not bind" if exit_code == EXIT_BIND else f"restarted {MAX_RESTARTS} times in {RESTART_WINDOW:.0f} s"
            log.error("%s process %d (pid %d) exited %d; %s: stopping", name, index, pid, exit_code, why)
            code = 1
            stop(signal.SIGTERM, None)
            continue
        restarts.append(now)
        log.warning("%s process %d (pid %d) exited %d; starting it again", name, index, pid, exit_code)
        spawn(index)
    return code
