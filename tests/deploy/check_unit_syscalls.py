#!/usr/bin/env python3
"""Which system calls each service makes, against the seccomp filter of deploy/systemd/*.service.

Runs a small federation on loopback (tracker, repository, two sites, each
under `strace -f -c`), a real bt-get through it, a SIGHUP rescan at each
site and a SIGTERM stop, then lists every call each service made that
`SystemCallFilter=@system-service` does not allow or `~@privileged` takes
away. Run it after changing the units or a dependency (uvloop, libtorrent,
SQLite): a call the filter refuses fails with EPERM (SystemCallErrorNumber).

    .venv/bin/python -m tests.deploy.check_unit_syscalls [--keep DIR]   (from the checkout)

A tool of the test bed (it runs the deployment of tests/deploy/), not a test: pytest does not collect it.

Needs strace and systemd-analyze. Exit 1 when a service needs a call the units refuse.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.deploy.deployment import Deployment
from tests.support import command, wait_for
from torrents import sample
from torrents.procs import children



NOBODY = 65534
SETPRIV_OWN = {"capset", "setgroups", "setresuid", "setresgid"}  # setpriv's calls before it runs the service


class Traced(Deployment):
    """Each service under strace; as root, as the units run it: an unprivileged user (nobody here)."""

    def argv(self, label: str) -> list[str]:
        user = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if os.geteuid() == 0 else []
        return ["strace", "-f", "-qq", "-c", "-U", "name", "-o", str(self.root / f"{label}.syscalls"), *user,
                *super().argv(label)]

    def write(self) -> None:
        super().write()
        if os.geteuid() == 0:
            for sub in ("repo", "sites"):
                (self.root / sub).mkdir(exist_ok=True)
            for path in [self.root, *self.root.rglob("*")]:
                os.chown(path, NOBODY, NOBODY)


def groups() -> dict[str, list[str]]:
    text = subprocess.run(["systemd-analyze", "syscall-filter"], capture_output=True, text=True, check=True).stdout
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("@"):
            current = line.strip()
            out[current] = []
        elif current and line.strip() and not line.strip().startswith("#"):
            out[current].append(line.strip())
    return out


def expand(table: dict[str, list[str]], group: str) -> set[str]:
    names: set[str] = set()
    for member in table.get(group, []):
        names |= expand(table, member) if member.startswith("@") else {member}
    return names


def used(path: Path) -> set[str]:
    return {line.split()[0] for line in path.read_text().splitlines()
            if line.strip() and re.fullmatch(r"[a-z_0-9]+", line.split()[0])
            and line.split()[0] not in ("syscall", "total")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="Run in this directory and keep it (default: a temporary one).")
    args = parser.parse_args()
    for tool in ("strace", "systemd-analyze"):
        if shutil.which(tool) is None:
            print(f"check_unit_syscalls: error: {tool}: not installed", file=sys.stderr)
            return 2
    work = args.keep or Path(tempfile.mkdtemp(prefix="btswarm-syscalls-"))
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o755)
    sample.generate(work / "data", files=8, total_size=16 * 2**20)
    fed = Traced(work / "fed", work / "data", sites=2)
    with fed:
        fed.published(1)
        got = subprocess.run([command("bt-get"), sample.SAMPLE_NAME, "--repo", fed.repo_url, "-o",
                              str(work / "download"), "-q"], capture_output=True, text=True, timeout=300)
        print(f"bt-get: exit {got.returncode}")
        for label, proc in fed.procs.items():
            traced = wait_for(lambda: children(proc.pid), timeout=10, what=f"{label} under strace")
            if label.startswith("site"):
                before = proc.log()
                os.kill(traced[0], signal.SIGHUP)
                wait_for(lambda: proc.log().count("datasets ready") > before.count("datasets ready"), timeout=60,
                         what=f"{label}'s rescan")
            for pid in traced:  # stop the service itself: strace writes its table when the tracee exits
                os.kill(pid, signal.SIGTERM)
        for proc in fed.procs.values():
            proc.popen.wait(60)
    table = groups()
    allowed, refused = expand(table, "@system-service"), expand(table, "@privileged")
    bad = 0
    for path in sorted((work / "fed").glob("*.syscalls")):
        calls = used(path) - (SETPRIV_OWN if os.geteuid() == 0 else set())
        outside, taken = sorted(calls - allowed), sorted(calls & refused)
        bad += bool(outside or taken)
        print(f"{path.stem:8} {len(calls):3} calls; not in @system-service: {', '.join(outside) or 'none'}; "
              f"in @privileged: {', '.join(taken) or 'none'}")
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
