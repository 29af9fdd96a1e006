"""A real SLURM on this one host, in a directory of its own: munged, slurmctld, slurmd.

Tests and benchmarks use it to run bt-get batch arrays under a scheduler
nobody here wrote (Debian's slurm-wlm and munge). Everything lives under
one directory: the munge key and socket, slurm.conf, the controller's
state, slurmd's spool, the logs and the job-completion record. The node
is this host as `slurmd -C` sees it, addressed as 127.0.0.1; the ports are
chosen free. The three daemons run in the foreground as our children and
are stopped by PID; every wait has a deadline.

There is no slurmdbd (it needs a MySQL server): job records go to the
jobcomp/filetxt plugin, and `sacct --completion` reads them. That reader
does not know the array fields its writer emits (it warns "Unknown type
ArrayJobId" on stderr), so `tasks()` maps array tasks to job IDs through
`scontrol show job`, while the controller still remembers them.

Command line, for a person: `python -m btswarm.testbed.localslurm DIR` runs one
until Ctrl-C and prints the SLURM_CONF to export.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from btswarm.federation import wait_for
from torrents.errors import BtswarmError
from torrents.procs import free_port, stop

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "sinfo", "sacct", "scontrol", "scancel")
PARTITION = "batch"
COMMAND_TIMEOUT = 30.0  # any one sbatch/squeue/sacct call


class SlurmError(BtswarmError):
    """A SLURM daemon did not start, or a SLURM command failed; the message carries the log tail."""


@dataclass(frozen=True)
class Node:
    """This host as slurmd sees it (`slurmd -C`)."""
    name: str
    cpus: int
    memory_mb: int


def parse_slurmd_c(text: str) -> Node:
    """The first line of `slurmd -C` ('NodeName=vm CPUs=2 ... RealMemory=24105') → Node."""
    fields = dict(re.findall(r"(\w+)=(\S+)", text.splitlines()[0] if text.strip() else ""))
    try:
        return Node(fields["NodeName"], int(fields["CPUs"]), int(fields["RealMemory"]))
    except (KeyError, ValueError):
        raise SlurmError("slurmd -C", f"unexpected output: {text.strip()[:200]!r}") from None


def slurm_conf(root: Path, node: Node, *, cluster: str, ctld_port: int, slurmd_port: int,
               munge_socket: Path, oversubscribe: int = 4) -> str:
    """slurm.conf for one node on 127.0.0.1, every path under `root` (pure).

    CR_Core with OverSubscribe=FORCE:N lets N single-core jobs share each
    core, so an array of more tasks than cores runs at once (the tasks of a
    bt-get array must overlap to trade pieces). No cgroups: proctrack by
    process tree, no task plugin, no memory enforcement.
    """
    memory = max(1, node.memory_mb - 512)  # under what slurmd reports, or it drains the node
    return "\n".join([
        f"ClusterName={cluster}",
        f"SlurmctldHost={node.name}(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket}",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'run' / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'run' / 'slurmd.pid'}",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={root / 'log' / 'jobcomp.txt'}",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "MpiDefault=none",
        "MailProg=/bin/true",
        "ReturnToService=2",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        "MinJobAge=600",  # the controller remembers finished jobs this long (scontrol show job)
        f"NodeName={node.name} NodeAddr=127.0.0.1 CPUs={node.cpus} RealMemory={memory} State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes={node.name} Default=YES MaxTime=INFINITE State=UP "
        f"OverSubscribe=FORCE:{oversubscribe}",
        "",
    ])


def parse_show_job(text: str) -> dict[int, dict[str, str]]:
    """`scontrol show job -o` lines → {JobId: {field: value}} (pure)."""
    out = {}
    for line in text.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if "JobId" in fields:
            out[int(fields["JobId"])] = fields
    return out


def parse_sacct(text: str) -> dict[int, tuple[str, str]]:
    """`sacct -n -P -o JobID,State,ExitCode` → {job ID: (state, exit code)} (pure; steps skipped)."""
    out = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 3 and parts[0].isdigit():
            out[int(parts[0])] = (parts[1].split()[0] if parts[1] else "", parts[2])
    return out


def missing_commands() -> list[str]:
    return [c for c in DAEMONS + CLIENTS + ("munge",) if shutil.which(c) is None
            and not os.path.exists(f"/usr/sbin/{c}")]


def _which(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


@dataclass
class Cluster:
    """A running SLURM of our own; `env` (SLURM_CONF) points every client command at it."""
    root: Path
    node: Node
    conf: Path
    socket_dir: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *args: str, timeout: float = COMMAND_TIMEOUT, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run(list(args), env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise SlurmError(args[0], f"exit {proc.returncode}: {proc.stderr.strip()[-1500:]}")
        return proc

    def sbatch(self, script: Path, *args: str) -> int:
        """Submit `script`; its job ID (for an array: the array's ID)."""
        out = self.run("sbatch", "--parsable", *args, str(script)).stdout.strip()
        return int(out.split(";")[0])

    def jobs(self, job_id: int) -> dict[int, dict[str, str]]:
        """The controller's record of a job (every task of an array), by job ID."""
        return parse_show_job(self.run("scontrol", "show", "job", "-o", str(job_id)).stdout)

    def tasks(self, array_id: int) -> dict[int, dict[str, str]]:
        """Array task ID → its record (JobId, JobState, ExitCode, ...)."""
        return {int(f["ArrayTaskId"]): f for f in self.jobs(array_id).values()
                if f.get("ArrayTaskId", "").isdigit()}

    def wait(self, job_id: int, timeout: float) -> dict[int, dict[str, str]]:
        """Wait until no task of the job is pending or running; its records."""
        active = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED"}

        def finished() -> dict[int, dict[str, str]] | None:
            jobs = self.jobs(job_id)
            return jobs if jobs and not any(f.get("JobState") in active for f in jobs.values()) else None
        return wait_for(finished, timeout, f"SLURM job {job_id} to finish", interval=0.5)

    def accounting(self, job_ids: list[int]) -> dict[int, tuple[str, str]]:
        """What `sacct` records for these job IDs: (state, exit code), from the job-completion log."""
        out = self.run("sacct", "--completion", "-n", "-P", "-o", "JobID,State,ExitCode",
                       "-j", ",".join(map(str, job_ids))).stdout
        return parse_sacct(out)

    def idle(self) -> bool:
        proc = self.run("sinfo", "-h", "-N", "-o", "%N %t", check=False, timeout=10)
        return proc.returncode == 0 and f"{self.node.name} idle" in proc.stdout

    def log_tail(self, chars: int = 2000) -> str:
        parts = []
        for path in sorted((self.root / "log").glob("*")):
            with contextlib.suppress(OSError):
                parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-chars:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        """Cancel what still runs, then stop slurmd, slurmctld and munged by PID (in that order)."""
        if self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
            with contextlib.suppress(Exception):
                self.run("scancel", "--full", "--partition", PARTITION, check=False, timeout=10)
                wait_for(lambda: not self.run("squeue", "-h", check=False, timeout=10).stdout.strip(), 20,
                         "cancelled jobs to end", interval=0.5)
        for name in reversed(DAEMONS):
            proc = self.procs.get(name)
            if proc is not None:
                stop(proc, timeout=15)
        shutil.rmtree(self.socket_dir, ignore_errors=True)


def start(root: Path, timeout: float = 60.0, cluster: str | None = None) -> Cluster:
    """Write the configuration under `root`, start munged, slurmctld and slurmd; return when the node is idle."""
    missing = missing_commands()
    if missing:
        raise SlurmError("slurm", f"not installed: {', '.join(missing)} (scripts/install-system-deps.sh "
                                  "installs slurm-wlm and munge)")
    root = root.resolve()
    for sub, mode in (("munge", 0o700), ("state", 0o755), ("spool", 0o755), ("log", 0o755), ("run", 0o755)):
        (root / sub).mkdir(parents=True, exist_ok=True)
        (root / sub).chmod(mode)
    key = root / "munge" / "munge.key"
    if not key.exists():
        key.write_bytes(os.urandom(1024))
    key.chmod(0o400)  # munged refuses a key others can read
    # munged refuses a socket in a directory that not everyone can reach (a
    # pytest temp dir is 0700), and a socket path has at most 107 bytes: a
    # short directory of its own under /tmp, removed by stop().
    socket_dir = Path(tempfile.mkdtemp(prefix="btswarm-munge-", dir="/tmp"))
    socket_dir.chmod(0o755)
    socket = socket_dir / "munge.socket"
    detected = subprocess.run([_which("slurmd"), "-C"], capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    node = parse_slurmd_c(detected.stdout)
    conf = root / "slurm.conf"
    conf.write_text(slurm_conf(root, node, cluster=cluster or f"bt{os.getpid()}", ctld_port=free_port(),
                               slurmd_port=free_port(), munge_socket=socket))
    c = Cluster(root, node, conf, socket_dir)
    try:
        c.procs["munged"] = _daemon(root, "munged", [
            "--foreground", f"--key-file={key}", f"--socket={socket}", f"--pid-file={root / 'run' / 'munged.pid'}",
            f"--log-file={root / 'log' / 'munged.log'}", f"--seed-file={root / 'munge' / 'munged.seed'}"])
        _wait_alive(c, "munged", lambda: socket.exists(), timeout)
        c.procs["slurmctld"] = _daemon(root, "slurmctld", ["-D", "-f", str(conf)])
        _wait_alive(c, "slurmctld", lambda: c.run("scontrol", "ping", check=False, timeout=10).stdout.count("UP") > 0,
                    timeout)
        c.procs["slurmd"] = _daemon(root, "slurmd", ["-D", "-N", node.name, "-f", str(conf)])
        _wait_alive(c, "slurmd", c.idle, timeout)
    except BaseException:
        c.stop()
        raise
    return c


def _daemon(root: Path, name: str, args: list[str]) -> subprocess.Popen:
    with open(root / "log" / f"{name}.out", "ab") as out:
        return subprocess.Popen([_which(name), *args], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "SLURM_CONF": str(root / "slurm.conf")})


def _wait_alive(c: Cluster, name: str, ready, timeout: float) -> None:
    proc = c.procs[name]
    try:
        wait_for(lambda: proc.poll() is not None or ready(), timeout, f"{name} to be ready", interval=0.2)
    except BtswarmError as exc:
        raise SlurmError(name, f"not ready after {timeout:g} s:\n{c.log_tail()}") from exc
    if proc.poll() is not None:
        raise SlurmError(name, f"exited {proc.returncode}:\n{c.log_tail()}")


@contextlib.contextmanager
def running(root: Path, timeout: float = 60.0) -> Iterator[Cluster]:
    c = start(root, timeout)
    try:
        yield c
    finally:
        c.stop()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m btswarm.testbed.localslurm DIR   (a SLURM of its own under DIR until Ctrl-C)",
              file=sys.stderr)
        return 2
    try:
        with running(Path(args[0])) as c:
            print(f"export SLURM_CONF={c.conf}   # node {c.node.name}, partition {PARTITION}; Ctrl-C stops it",
                  flush=True)
            signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
            while all(p.poll() is None for p in c.procs.values()):
                time.sleep(1)
            print("localslurm: a daemon exited:\n" + c.log_tail(), file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        return 0
    except BtswarmError as exc:
        print(f"localslurm: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
