"""The `btswarm` command: `up`, `demo`, `bench`."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import click

from btswarm import demo as demo_mod
from btswarm import up as up_mod
from torrents import log as logsetup
from torrents.errors import BtswarmError
from torrents.units import parse_duration, parse_size


def _say(message: str) -> None:
    click.echo(message, err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="btswarm")
def main() -> None:
    """btswarm: BitTorrent for Tier-3 sites. `btswarm up` runs a whole federation on this host."""


@main.command()
@click.option("--state", type=click.Path(path_type=Path), default=None,
              help="State directory (configs, logs, farms, catalog). Default: ~/.cache/btswarm/up")
@click.option("--data", type=click.Path(path_type=Path, file_okay=False), multiple=True,
              help="Serve every subdirectory of DIR as a dataset from every site; given once per site, "
                   "site i serves the i-th DIR (separate replicas). Default: a generated sample.")
@click.option("--sites", type=click.IntRange(1, 250), default=2, show_default=True, help="Number of storage sites.")
@click.option("--base-port", type=click.IntRange(0, 65000), default=0,
              help="Tracker on PORT, repository PORT+1, site i on PORT+10+2i (control) and PORT+11+2i (peers). "
                   "Default: free ports.")
@click.option("--sample-files", type=click.IntRange(1, 100_000), default=29, show_default=True)
@click.option("--sample-size", default="300M", show_default=True, help="Total size of the sample dataset.")
@click.option("--idle-ttl", default="10m", show_default=True, help="Stop a site's seed after this long without peers.")
@click.option("--heartbeat", "heartbeat", default="5s", show_default=True, help="Site heartbeat interval.")
@click.option("--ready-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write endpoints and dataset names as JSON here once everything is up and published.")
@click.option("--timeout", default="5m", show_default=True, help="Give up if not up and published by then.")
@click.option("--redis", "redis", is_flag=True,
              help="Keep the tracker's state in a redis-server of its own (loopback, under --state).")
@click.option("--redis-url", default="", help="Keep the tracker's state in this Redis instead (redis://HOST:PORT/DB).")
@click.option("--trackers", type=click.IntRange(1, 8), default=1, show_default=True,
              help="Tracker processes on their own ports, sharing the Redis; the .torrents list every one.")
@click.option("-v", "--verbose", count=True)
def up(state, data, sites, base_port, sample_files, sample_size, idle_ttl, heartbeat, ready_file, timeout, redis,
       redis_url, trackers, verbose):
    """Run tracker, repository and SITES storage sites on loopback until Ctrl-C."""
    logsetup.setup(verbose, "btswarm")
    try:
        opts = up_mod.UpOptions(
            state=(state or up_mod.default_state_dir()).resolve(), data=data[0] if len(data) == 1 else None,
            site_data=tuple(data) if len(data) > 1 else (), sites=sites, base_port=base_port,
            sample_files=sample_files, sample_size=parse_size(sample_size), idle_ttl=parse_duration(idle_ttl),
            heartbeat_interval=parse_duration(heartbeat), ready_file=ready_file.resolve() if ready_file else None,
            timeout=parse_duration(timeout), redis=redis or bool(redis_url), redis_url=redis_url, trackers=trackers)
        code = asyncio.run(up_mod.run_up(opts, report=_say))
    except up_mod.Interrupted:
        _say("btswarm: interrupted; federation stopped")
        code = 130
    except BtswarmError as exc:
        _say(f"btswarm: error: {exc}")
        code = 1
    sys.exit(code)


@main.command()
@click.option("--state", type=click.Path(path_type=Path), default=None, help="Default: ~/.cache/btswarm/demo")
@click.option("-o", "--output", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Where bt-get writes the dataset. Default: STATE/downloads")
@click.option("--sites", type=click.IntRange(1, 250), default=2, show_default=True)
@click.option("--sample-size", default="300M", show_default=True)
@click.option("--workers", type=click.IntRange(1, 64), default=2, show_default=True)
@click.option("--keep", is_flag=True, help="Leave the federation running afterwards.")
def demo(state, output, sites, sample_size, workers, keep):
    """A federation, a real bt-get of the sample dataset with progress, verified against the source."""
    state = (state or up_mod.default_state_dir().with_name("demo")).resolve()
    try:
        code = demo_mod.run_demo(state, (output or state / "downloads").resolve(), sites=sites, keep=keep,
                                 report=_say, sample_size=parse_size(sample_size), workers=workers)
    except BtswarmError as exc:
        _say(f"btswarm: error: {exc}")
        code = 1
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


BENCHES = ["build", "tracker", "get", "egress", "coldstart", "smallfiles", "seed_start", "scale"]


@main.command()
@click.option("--quick", is_flag=True, help="Smaller datasets and fewer runs: the whole suite in under 10 minutes.")
@click.option("--only", multiple=True, type=click.Choice(BENCHES), help="Run only these benchmarks.")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=Path("bench-results"),
              show_default=True)
def bench(quick, only, out):
    """Run the benchmarks (scripts/bench_*.py) against their baselines; JSON and plots in OUT."""
    scripts = Path(__file__).resolve().parent.parent / "scripts"
    if not scripts.is_dir():
        _say("btswarm: error: bench: runs from a source checkout (scripts/ not found)")
        sys.exit(1)
    failed = []
    for name in only or BENCHES:
        script = scripts / f"bench_{name}.py"
        if not script.exists():
            _say(f"btswarm: bench {name}: {script} not found")
            failed.append(name)
            continue
        args = [sys.executable, str(script), "--out", str(out)] + (["--quick"] if quick else [])
        _say("$ " + " ".join(args[1:]))
        if subprocess.call(args) != 0:
            failed.append(name)
    plot = scripts / "plot_bench.py"
    if plot.exists():
        subprocess.call([sys.executable, str(plot), "--out", str(out)])
    if failed:
        _say(f"btswarm: bench: failed: {', '.join(failed)}")
        sys.exit(1)
