"""Storage that hangs on demand, for the fault tests and scripts/bench_wan.py.

A `bindfs -f` FUSE pass-through over a replica: SIGSTOP its daemon and every
read below the mount blocks while the rest of the host goes on, as a site
sees a stalled dCache pool or a frozen NFS mount; SIGCONT and reads go on.
Needs root, bindfs, fusermount3 and /dev/fuse (scripts/install-system-deps.sh).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Iterator

from torrents import procs


@contextlib.contextmanager
def bindfs(src: Path, mnt: Path, log: Path, timeout: float = 20.0) -> Iterator[subprocess.Popen]:
    """`bindfs -f SRC MNT`, its process. Always continued and unmounted at the end: a stopped FUSE
    daemon left mounted hangs anything that stats the mount."""
    mnt.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(["bindfs", "-f", "--no-allow-other", str(src), str(mnt)], stdout=out, stderr=out,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while not os.path.ismount(mnt) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if not os.path.ismount(mnt):
            raise RuntimeError(f"bindfs did not mount {mnt} (exit {proc.poll()}): {log.read_text()[-500:]}")
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True, timeout=30)
        procs.stop(proc, 10)


def drop_cached(directory: Path) -> None:
    """Evict the files' pages (POSIX_FADV_DONTNEED on each), so that reads go to the FUSE daemon again."""
    for p in directory.rglob("*"):
        if p.is_file():
            fd = os.open(p, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
