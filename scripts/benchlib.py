"""What every benchmark script shares: arguments, timing, medians, machine info, JSON, processes.

The scripts (scripts/bench_*.py) are thin: each builds its data, runs its
contenders through the helpers here and prints a table. Helpers:

- `parser(doc)` / `workdir(name, keep)`: `--out DIR`, `--quick`, `--keep`, `--runs`;
  data under /tmp, deleted afterwards unless --keep.
- `median`, `timed`, `machine`, `write_json`, `table`; `cpu_seconds` of a PID (torrents.procs: /proc).
- `Procs`: every process a benchmark starts, stopped by PID (SIGTERM, then
  SIGKILL after a bounded wait), also on errors.
- `federation(...)`: btswarm.federation.launch / stop as a context manager.
- `nginx(...)`: an nginx of our own (`daemon off;`, own -c and -p) on loopback.
- `wrk(url, script, ...)`: one wrk run, its summary as a dict (WRK_DONE, appended to a Lua script).
- `bt_get_cmd`, `client_ip`: bt-get clients on distinct 127.0.0.x.
- `settled_uploaded_total`, `start_seeds`, `wait_no_seeds`: the sites' control API; the rest
  (`Federation.site_status`, `seeding`, `uploaded_total`, `site_pids`) is in btswarm.federation,
  shared with the tests.

Only loopback addresses; every wait has a deadline.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from btswarm import federation as fedlib
from btswarm import topology
from btswarm.federation import Federation
from torrents import procs as proclib
from torrents.procs import children, cpu_times, free_port  # noqa: F401  (for the scripts)

get_json = fedlib.get_json  # for the scripts
ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


# --- arguments and places ------------------------------------------------------------------
def _exit_on_sigterm(signum: int, _frame: object) -> None:
    # SIGTERM (btswarm bench stopped, a timeout) unwinds like an error: every
    # `finally` runs, so the federation, nginx and clients are stopped by PID.
    raise SystemExit(128 + signum)


def parser(doc: str | None) -> argparse.ArgumentParser:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    ap = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0] if doc else None,
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=doc)
    ap.add_argument("--out", type=Path, default=Path("bench-results"), help="where NAME.json goes")
    ap.add_argument("--quick", action="store_true", help="small sizes, 3 runs")
    ap.add_argument("--keep", action="store_true", help="keep the data and logs under /tmp")
    ap.add_argument("--runs", type=int, default=None, help="runs per contender (default 3)")
    return ap


@contextlib.contextmanager
def workdir(name: str, keep: bool) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=f"btswarm-bench-{name}-", dir="/tmp"))
    try:
        yield path
    finally:
        if keep:
            print(f"kept {path}", file=sys.stderr)
        else:
            shutil.rmtree(path, ignore_errors=True)


def fresh_dir(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


# --- figures -------------------------------------------------------------------------------
def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


@dataclass
class Timed:
    seconds: float
    cpu: float  # user + system CPU seconds of the command and every child it waited for
    stdout: str
    returncode: int


def timed(args: Sequence[str], timeout: float, *, check: bool = True) -> Timed:
    """Run a command to its end (bounded); wall time and CPU time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    proc = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, text=True)
    seconds = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if check and proc.returncode != 0:
        raise SystemExit(f"{args[0]}: exit {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timed(seconds, cpu, proc.stdout, proc.returncode)


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"nproc": os.cpu_count(), "cpu_model": model, "kernel": platform.release(),
            "python": platform.python_version(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "load_before": os.getloadavg()[0]}


def write_json(out: Path, name: str, doc: dict[str, Any]) -> Path:
    """DIR/NAME.json with the machine and the command line beside the figures."""
    out.mkdir(parents=True, exist_ok=True)
    full = {"benchmark": name, "command": " ".join(["scripts/" + Path(sys.argv[0]).name, *sys.argv[1:]]),
            "machine": machine(), **doc}
    path = out / f"{name}.json"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(full, indent=2) + "\n")
    os.replace(tmp, path)
    print(f"wrote {path}", file=sys.stderr)
    return path


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[_cell(c) for c in row] for row in [header, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def runs_table(runs: dict[str, list[dict[str, float]]], base: str, files: int) -> str:
    """Every run of each contender in order (seconds, CPU-ms per file, its run's ratio to `base`): a cost
    that grows from one fetch to the next shows here, where a median would hide it."""
    rows = []
    for label, rs in runs.items():
        if label == base:
            continue
        for k, r in enumerate(rs):
            rows.append([label, k + 1, r["seconds"], 1000 * r["cpu_s"] / files, runs[base][k]["seconds"] / r["seconds"]])
    return table(["contender", "run", "seconds", "CPU-ms/file", f"x {base}"], rows)


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.2f}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


def require(*tools: str) -> None:
    """End the benchmark with one line when a program it runs is not installed."""
    for tool in tools:
        if not shutil.which(tool):
            raise SystemExit(f"bench: {tool}: not installed (bash scripts/install-system-deps.sh)")


def require_shaping(name: str) -> None:
    """End a shaped-links benchmark with one line when shaping cannot work here (not root, no ip/tc)."""
    from btswarm import netns

    try:
        netns.require(name)
    except netns.NetnsError as e:
        raise SystemExit(f"{name}: {e}") from None


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- waiting and ports ------------------------------------------------------------------------
def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """btswarm.federation.wait_for, ending the benchmark with a one-line message instead of a traceback."""
    try:
        return fedlib.wait_for(predicate, timeout, what, interval=interval)
    except fedlib.WaitTimeout as e:
        raise SystemExit(f"bench: {e}") from None


def port_open(ip: str, port: int) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=0.5):
            return True
    except OSError:
        return False


# --- processes ---------------------------------------------------------------------------------
class Procs:
    """Processes this benchmark started; `stop_all` (also on errors) ends each by its PID."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, args: Sequence[str], log_path: Path, **kw: Any) -> subprocess.Popen:
        with open(log_path, "ab") as logf:
            p = subprocess.Popen(list(args), stdin=subprocess.DEVNULL, stdout=kw.pop("stdout", logf),
                                 stderr=logf, start_new_session=True, **kw)
        self.procs.append(p)
        return p

    stop = staticmethod(proclib.stop)  # by PID: SIGTERM, then SIGKILL after a bounded wait

    def stop_all(self) -> None:
        for p in reversed(self.procs):
            self.stop(p)
        self.procs.clear()

    def __enter__(self) -> "Procs":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process (its own threads; /proc/PID/stat)."""
    return sum(cpu_times(pid))


def tree_cpu_seconds(pids: Sequence[int]) -> float:
    """CPU seconds of these running processes and their running children (nginx: master + workers)."""
    return sum(cpu_seconds(p) + sum(cpu_seconds(c) for c in children(p)) for p in pids)


# --- the federation ------------------------------------------------------------------------------
PACKAGES = ("btget", "btrepo", "btserver", "btswarm", "torrents", "tracker")


def compile_checkout() -> None:
    """Write the checkout's bytecode, as pip does when it installs the wheel. Where PYTHONDONTWRITEBYTECODE
    is set (some CI and sandbox images) every process started from the checkout would compile its modules
    at each start: 0.055 CPU-s of the 0.39 that `import btget.cli` costs, and 8 T3s started at once on 2
    cores reached their median first byte 0.2 s later (1.94-2.01 s against 1.69-1.81 s, 3 runs each)."""
    import compileall

    for package in PACKAGES:
        compileall.compile_dir(str(ROOT / package), quiet=1)


@contextlib.contextmanager
def federation(work: Path, data: Path | Sequence[Path], *, sites: int, idle_ttl: str = "10m", heartbeat: str = "1s",
               timeout: float = 600, args: Sequence[str] = (), env: dict[str, str] | None = None
               ) -> Iterator[Federation]:
    """`btswarm up --sites N --data DIR [ARGS]` through btswarm.federation.launch; stopped by its PID at the end.

    With shaped links (`args` holding --site-link/--client-link) the benchmark
    process is inside the federation's network namespace for the block: its
    HTTP calls and every process it starts (clients, nginx) are on the
    shaped loopback.
    """
    compile_checkout()
    work.mkdir(parents=True, exist_ok=True)
    log_path = work / "up.log"
    t = time.monotonic()
    datas = [data] if isinstance(data, Path) else list(data)
    try:
        proc, fed = fedlib.launch(work / "state", [*(a for d in datas for a in ("--data", str(d))), "--sites",
                                                   str(sites), "--idle-ttl", idle_ttl, "--heartbeat", heartbeat,
                                                   "--timeout", f"{int(timeout)}s", *args],
                                  ready_file=work / "ready.json", log_path=log_path, timeout=timeout, env=env)
    except fedlib.LaunchError as e:
        raise SystemExit(str(e)) from None
    log(f"federation up in {time.monotonic() - t:.1f} s ({sites} sites{', shaped' if fed.netns else ''})")
    try:
        with fed.inside():
            yield fed
    finally:
        if proclib.stop(proc, timeout=60) not in (0, None):
            log(f"btswarm up exited {proc.returncode}; see {log_path}")


def settled_uploaded_total(fed: Federation, timeout: float = 10.0) -> int:
    """uploaded_total once it stops moving (sites count from state updates every second or so)."""
    last = fed.uploaded_total()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(1.2)
        now = fed.uploaded_total()
        if now == last:
            return now
        last = now
    return last


def wait_no_seeds(fed: Federation, timeout: float = 60.0) -> None:
    wait_for(lambda: not any(fed.seeding().values()), timeout, "the sites to stop their seeds", interval=0.25)


def site_secret(fed: Federation, name: str) -> str:
    with open(fed.state / "config" / f"{name}.toml", "rb") as f:
        return tomllib.load(f)["server"]["secret"]


def start_seeds(fed: Federation, info_hash: str) -> None:
    """Ask every site to seed `info_hash` (signed POST /api/seeds, as the tracker would)."""
    from torrents import auth

    body = json.dumps({"info_hash": info_hash}).encode()
    for s in fed.sites:
        headers = auth.sign(site_secret(fed, s.name), s.name, "POST", "/api/seeds", body)
        headers["Content-Type"] = "application/json"
        req = urllib.request.Request(s.control_url + "/api/seeds", data=body, headers=headers, method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()


# --- clients ---------------------------------------------------------------------------------------
client_ip = topology.client_ip  # client k (0-based) on 127.0.0.(101+k)


def bt_get_cmd(fed: Federation, name: str, out: Path, ip: str, *extra: str) -> list[str]:
    return [str(BIN / "bt-get"), name, "--repo", fed.repo, "-o", str(out), "--listen", ip, "--json",
            "--timeout", "1800", *extra]


def dataset_size(path: Path) -> int:
    """Bytes of the files under `path`, leaving out dot directories (bt-get's .bt-get state)."""
    return sum(p.stat().st_size for p in path.rglob("*")
               if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts))


# --- nginx ---------------------------------------------------------------------------------------
@dataclass
class Nginx:
    ip: str
    port: int
    pid: int

    def url(self, rel: str) -> str:
        return f"http://{self.ip}:{self.port}/{rel}"


@contextlib.contextmanager
def nginx(work: Path, root: Path, ip: str = topology.BASELINE_IP, workers: int = 1) -> Iterator[Nginx]:
    """nginx serving `root`, as a child process (daemon off) with its own config and prefix; stopped by PID."""
    prefix = fresh_dir(work / "nginx")
    (prefix / "logs").mkdir()
    port = free_port(ip)
    conf = prefix / "nginx.conf"
    # As root, nginx's workers would drop to `nobody`, which cannot read the 0700 temp dirs.
    user = "user root root;\n" if os.geteuid() == 0 else ""
    conf.write_text(f"""daemon off;
{user}worker_processes {workers};
pid {prefix}/nginx.pid;
error_log {prefix}/logs/error.log;
events {{ worker_connections 256; }}
http {{
  access_log off;
  sendfile on; tcp_nopush on;
  client_body_temp_path {prefix}/tmp; proxy_temp_path {prefix}/tmp; fastcgi_temp_path {prefix}/tmp;
  uwsgi_temp_path {prefix}/tmp; scgi_temp_path {prefix}/tmp;
  server {{ listen {ip}:{port}; root {root}; }}
}}
""")
    (prefix / "tmp").mkdir()
    procs = Procs()
    proc = procs.start(["nginx", "-c", str(conf), "-p", str(prefix)], prefix / "logs" / "stderr.log")
    try:
        wait_for(lambda: port_open(ip, port) or proc.poll() is not None, 20, "nginx to listen")
        if proc.poll() is not None:
            raise SystemExit(f"nginx exited {proc.returncode}: {(prefix / 'logs' / 'stderr.log').read_text()}")
        yield Nginx(ip, port, proc.pid)
    finally:
        procs.stop_all()


def curl_cmd(srv: Nginx, rel_dir: str, lfns: Sequence[str], out: Path, parallel: int = 0) -> list[str]:
    """One curl fetching every file (one connection reused: sequential is fair for one host)."""
    cmd = ["curl", "-sS", "--fail", "--create-dirs"] + (["-Z", "--parallel-max", str(parallel)] if parallel else [])
    for lfn in lfns:
        cmd += ["-o", str(out / lfn), srv.url(f"{rel_dir}/{lfn}")]
    return cmd


def curl_config_cmd(srv: Nginx, rel_dir: str, lfns: Sequence[str], out: Path, config: Path) -> list[str]:
    """Like curl_cmd, with the URL list in a config file (10,000s of files exceed the argument limit)."""
    with open(config, "w") as f:
        for lfn in lfns:
            f.write(f'url = "{srv.url(rel_dir + "/" + lfn)}"\noutput = "{out / lfn}"\n')
    return ["curl", "-sS", "--fail", "--create-dirs", "-K", str(config)]


# --- wrk -----------------------------------------------------------------------------------------
# Appended to every wrk Lua script: the summary as one JSON line, read back by `wrk`.
WRK_DONE = r"""
done = function(summary, latency, requests)
  io.write(string.format("WRKJSON {\"requests\": %d, \"connect_errors\": %d, \"read_errors\": %d, " ..
    "\"status_errors\": %d, \"timeouts\": %d, \"duration_us\": %d, \"p50_us\": %d, \"p99_us\": %d}\n",
    summary.requests, summary.errors.connect, summary.errors.read, summary.errors.status,
    summary.errors.timeout, summary.duration, latency:percentile(50), latency:percentile(99)))
end
"""


def wrk(url: str, script: Path, duration: float, connections: int) -> dict:
    """Run wrk (one thread) against `url` with `script` (ending in WRK_DONE); its summary."""
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{duration:g}s", "-s", str(script), url],
                         capture_output=True, text=True, timeout=duration + 30)
    m = re.search(r"WRKJSON (\{.*\})", out.stdout)
    if not m:
        raise SystemExit(f"bench: wrk gave no summary:\n{out.stdout}\n{out.stderr}")
    return json.loads(m.group(1))
