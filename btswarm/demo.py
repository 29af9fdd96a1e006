"""`btswarm demo`: a federation, a real bt-get of the sample dataset, verified against the source."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable

from btswarm import federation, topology
from btswarm.trees import compare_trees


def run_demo(state: Path, out: Path, *, sites: int, keep: bool, report: Callable[[str], None],
             sample_size: int, workers: int) -> int:
    bin_dir = Path(sys.executable).parent
    # The federation runs in a session of its own (so that a Ctrl-C reaches
    # bt-get and this process, not it): a closed terminal or a kill must
    # take the same way out as Ctrl-C, through `finally`, or it is orphaned.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    state.mkdir(parents=True, exist_ok=True)
    log = state / "up.log"
    report(f"starting a federation of {sites} sites (log: {log})")
    try:
        # Longer than `btswarm up`'s own --timeout (5 min), so that its reason is the one shown.
        up, fed = federation.launch(state, ["--sites", str(sites), "--sample-size", str(sample_size)],
                                    ready_file=state / "ready.json", log_path=log, timeout=330)
    except KeyboardInterrupt:
        report("federation stopped")  # launch stopped it
        raise
    try:
        name = fed.datasets[0]
        report(f"repository {fed.repo}/  tracker {fed.announce}")
        for s in fed.sites:
            report(f"  {s.name}: peers {s.peer}, nothing seeding until asked")
        target = out / name
        if target.exists():
            shutil.rmtree(target)  # the demo shows a whole fetch, not a resumed one
        # On this host's loopback, as the federation is: bt-get's default (every address) would also offer the
        # host's network addresses to the sites.
        cmd = [str(bin_dir / "bt-get"), name, "--repo", fed.repo, "-o", str(out), "--workers", str(workers),
               "--listen", topology.client_ip(0)]
        report("$ bt-get " + " ".join(cmd[1:]))
        code = subprocess.call(cmd)
        if code != 0:
            report(f"bt-get exited with code {code}")
            return code
        bad = compare_trees(fed.data / name, target)
        if bad:
            report(f"verification FAILED: {len(bad)} files differ from the source: {', '.join(bad[:5])}")
            return 5
        nfiles = sum(1 for p in target.iterdir() if p.is_file())
        report(f"verified: all {nfiles} files in {target} are byte-identical to the sites' replicas")
        report(f"browse the repository at {fed.repo}/")
        if keep:
            report(f"the federation keeps running (pid {up.pid}); stop it with: kill {up.pid}")
        return 0
    finally:
        if not keep and up.poll() is None:
            federation.stop(up)
            report("federation stopped")


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt
