"""`btswarm demo`: a federation, a real bt-get of the sample dataset, verified against the source."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from torrents.errors import BtswarmError


def compare_trees(source: Path, copy: Path) -> list[str]:
    """LFNs that differ or are missing in `copy` (byte for byte)."""
    bad = []
    for path in sorted(source.rglob("*")):
        if not path.is_file() or any(p.startswith(".") for p in path.relative_to(source).parts):
            continue
        rel = path.relative_to(source)
        other = copy / rel
        if not other.is_file() or not filecmp.cmp(path, other, shallow=False):
            bad.append(rel.as_posix())
    return bad


def wait_ready(ready_file: Path, proc: subprocess.Popen, timeout: float, log: Path) -> dict:
    """The ready document of `btswarm up`; if it gives up first, its own last words."""
    deadline = time.monotonic() + timeout
    while not ready_file.exists():
        if proc.poll() is not None:
            lines = log.read_text(errors="replace").strip().splitlines()
            why = lines[-1] if lines else f"exited with code {proc.returncode}"
            raise BtswarmError("btswarm up", f"did not come up ({why}); see {log}")
        if time.monotonic() > deadline:
            raise BtswarmError("btswarm up", f"not ready after {timeout:.0f} s; see {log}")
        time.sleep(0.1)
    return json.loads(ready_file.read_text())


def run_demo(state: Path, out: Path, *, sites: int, keep: bool, report: Callable[[str], None],
             sample_size: int, workers: int) -> int:
    bin_dir = Path(sys.executable).parent
    # The federation runs in a session of its own (so that a Ctrl-C reaches
    # bt-get and this process, not it): a closed terminal or a kill must
    # take the same way out as Ctrl-C, through `finally`, or it is orphaned.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    state.mkdir(parents=True, exist_ok=True)
    ready_file = state / "ready.json"
    ready_file.unlink(missing_ok=True)
    up_log = open(state / "up.log", "ab")
    up = subprocess.Popen([str(bin_dir / "btswarm"), "up", "--state", str(state), "--sites", str(sites),
                           "--sample-size", str(sample_size), "--ready-file", str(ready_file)],
                          stdout=up_log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        report(f"starting a federation of {sites} sites (log: {state / 'up.log'})")
        # Longer than `btswarm up`'s own --timeout (5 min), so that its reason is the one shown.
        ready = wait_ready(ready_file, up, timeout=330, log=state / "up.log")
        name = ready["datasets"][0]
        report(f"repository {ready['repo']}/  tracker {ready['tracker']}")
        for s in ready["sites"]:
            report(f"  {s['name']}: peers {s['peer']}, nothing seeding until asked")
        target = out / name
        if target.exists():
            shutil.rmtree(target)  # the demo shows a whole fetch, not a resumed one
        cmd = [str(bin_dir / "bt-get"), name, "--repo", ready["repo"], "-o", str(out), "--workers", str(workers)]
        report("$ bt-get " + " ".join(cmd[1:]))
        code = subprocess.call(cmd)
        if code != 0:
            report(f"bt-get exited with code {code}")
            return code
        bad = compare_trees(Path(ready["data"]) / name, target)
        if bad:
            report(f"verification FAILED: {len(bad)} files differ from the source: {', '.join(bad[:5])}")
            return 5
        nfiles = sum(1 for p in target.iterdir() if p.is_file())
        report(f"verified: all {nfiles} files in {target} are byte-identical to the sites' replicas")
        report(f"browse the repository at {ready['repo']}/")
        if keep:
            report(f"the federation keeps running (pid {up.pid}); stop it with: kill {up.pid}")
        return 0
    finally:
        if not keep and up.poll() is None:
            up.send_signal(signal.SIGTERM)
            try:
                up.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(up.pid, signal.SIGKILL)
                up.wait(5)
            report("federation stopped")
        up_log.close()


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt
