"""The `btswarm` command: `up`, `demo`, `bench`, `plot`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click

from btswarm import benches
from btswarm import demo as demo_mod
from btswarm import run as run_mod
from btswarm import shaping
from btswarm import up as up_mod
from torrents import log as btlog
from torrents.cli import command_settings, run_main
from torrents.errors import BtswarmError
from torrents.exitstatus import ExitStatus
from torrents.units import parse_duration, parse_size


def _say(message: str) -> None:
    click.echo(message, err=True)


@click.group(context_settings=command_settings)
@click.version_option(package_name="btswarm", prog_name="btswarm")
def cli() -> None:
    """btswarm: BitTorrent for Tier-3 sites. `btswarm up` runs a whole federation on this host,
    `btswarm run -- CMD` runs a client of it."""


def main(argv: list[str] | None = None) -> int:
    """Console entry point (the shared contract: torrents.cli)."""
    return run_main(cli, "btswarm", argv)


@cli.command()
@click.option("--state", type=click.Path(path_type=Path), default=None,
              help="State directory (configs, logs, farms, catalog). Default: ~/.cache/btswarm/up")
@click.option("--data", type=click.Path(path_type=Path, file_okay=False), multiple=True,
              help="Serve every subdirectory of DIR as a dataset from every site; given once per site, "
                   "site i serves the i-th DIR (separate replicas). Default: a generated sample.")
@click.option("--sites", type=click.IntRange(1, 250), default=2, show_default=True, help="Number of storage sites.")
@click.option("--base-port", type=click.IntRange(0, 65000), default=0,
              help="Tracker on PORT, repository PORT+1, site i on PORT+10+2i (control), PORT+11+2i (peers) "
                   "and PORT+520+i (web seed). Default: free ports.")
@click.option("--sample-files", type=click.IntRange(1, 100_000), default=29, show_default=True)
@click.option("--sample-size", default="300M", show_default=True, help="Total size of the sample dataset.")
@click.option("--idle-ttl", default="10m", show_default=True, help="Stop a site's seed after this long without peers.")
@click.option("--heartbeat", "heartbeat", default="5s", show_default=True, help="Site heartbeat interval.")
@click.option("--ready-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write endpoints and dataset names as JSON here once everything is up and published.")
@click.option("--timeout", default="5m", show_default=True, help="Give up if not up and published by then.")
@click.option("--site-link", multiple=True, metavar="[SITE=]RATE[/RTT]",
              help="Shape each site's uplink to RATE (100mbit, 1gbit), adding RTT to its round trips (100mbit/40ms); "
                   "SITE=... for one site (site3=10mbit/100ms). Runs the federation in a private network namespace "
                   "(root). Repeatable.")
@click.option("--client-link", metavar="RATE[/RTT]", default=None,
              help="Shape the uplink of each client address (127.0.0.101 and up; `btswarm run` hands them out), "
                   "adding RTT to its round trips.")
@click.option("--client-addresses", type=click.IntRange(1, 150), default=32, show_default=True,
              help="How many client addresses --client-link shapes.")
@click.option("--link-mtu", type=int, default=shaping.LO_MTU, show_default=True, metavar="BYTES",
              help=f"MTU of the shaped namespace's loopback: {shaping.JUMBO_MTU} for jumbo frames as on research "
                   "networks. With lo's 64 KiB packets a link slower than ~100 Mbit/s queues only a few, and one "
                   "of several flows can stall for seconds; a smaller MTU costs the delay line more CPU.")
@click.option("--redis", "redis", is_flag=True,
              help="Keep the tracker's state in a redis-server of its own (loopback, under --state).")
@click.option("--redis-url", default="", help="Keep the tracker's state in this Redis instead (redis://HOST:PORT/DB).")
@click.option("--redis-replicas", type=click.IntRange(0, 4), default=0, show_default=True,
              help="With --redis: replicas of it and three sentinels, which fail over to a replica when the "
                   "master stops answering; the trackers follow the master.")
@click.option("--trackers", type=click.IntRange(1, 8), default=1, show_default=True,
              help="Tracker processes on their own ports, sharing the Redis; the .torrents list every one.")
@click.option("--rucio", is_flag=True,
              help="Register the data in a local Rucio server (one RSE per site); the sites read it from there.")
@click.option("--rucio-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="The local Rucio's directory (default STATE/rucio); one already running there is used.")
@click.option("--rucio-scope", default="demo", show_default=True, help="Scope of the datasets' DIDs.")
@click.option("--rucio-refresh", default="30s", show_default=True, help="How often the sites ask Rucio.")
@click.option("--web-seed-url", "web_seed_url", multiple=True, metavar="[SITE=]TEMPLATE",
              help="A door of the sites (site1=TEMPLATE: of one), as [server] web_seed_urls: "
                   "http://HOST:PORT/PATH/{dataset}/{lfn}. Repeatable.")
@click.option("--hosts", "hosts", is_flag=True,
              help="Each part on a host of its own: network namespaces on a bridge, addresses 127.20.x.y, the "
                   "tracker and repository on one host, each site on one, and --t3-hosts T3 hosts that "
                   "`btswarm run --host` enters; --site-link/--client-link shape each host's own interface (root).")
@click.option("--t3-hosts", type=click.IntRange(1, 250), default=2, show_default=True,
              help="With --hosts: how many T3 hosts (t3-1, t3-2, ...).")
@click.option("--restricted", "restricted", is_flag=True,
              help="Members only: the sample (named by its DID, data08_cos:...) or the --restrict scopes readable "
                   "with a token of a local issuer (`btswarm token`), the tracker and the repository on https, "
                   "the sites' peer wire of those datasets on SSL with certificates of STATE/pki/peer-ca.pem.")
@click.option("--restrict", "restrict", multiple=True, metavar="SCOPE",
              help="With --restricted: a Rucio scope or DID pattern (cms:Run2018*) whose datasets only members "
                   "read (default: the scopes of the datasets named SCOPE:NAME). Repeatable; implies --restricted.")
@click.option("-v", "--verbose", count=True)
def up(**params):
    """Run tracker, repository and SITES storage sites on loopback until Ctrl-C."""
    btlog.setup(params["verbose"], "btswarm")
    try:
        return up_mod.run(_up_options(params), report=_say)
    except up_mod.Interrupted:
        _say("btswarm: interrupted; federation stopped")
        return int(ExitStatus.INTERRUPTED)


def _up_options(p: dict) -> up_mod.UpOptions:
    """The command line of `btswarm up` as UpOptions (a new option: one decorator above, one line here)."""
    data = p["data"]
    return up_mod.UpOptions(
        state=(p["state"] or up_mod.default_state_dir()).resolve(),
        data=data[0] if len(data) == 1 else None, site_data=tuple(data) if len(data) > 1 else (),
        sites=p["sites"], base_port=p["base_port"],
        sample_files=p["sample_files"], sample_size=parse_size(p["sample_size"]),
        idle_ttl=parse_duration(p["idle_ttl"]), heartbeat_interval=parse_duration(p["heartbeat"]),
        ready_file=p["ready_file"].resolve() if p["ready_file"] else None, timeout=parse_duration(p["timeout"]),
        links=shaping.LinkOptions.parse(p["site_link"], p["client_link"], p["client_addresses"], p["link_mtu"]),
        redis=p["redis"] or bool(p["redis_url"]), redis_url=p["redis_url"], trackers=p["trackers"],
        redis_replicas=p["redis_replicas"],
        rucio=p["rucio"] or p["rucio_dir"] is not None, rucio_dir=p["rucio_dir"].resolve() if p["rucio_dir"] else None,
        rucio_scope=p["rucio_scope"], rucio_refresh=parse_duration(p["rucio_refresh"]),
        web_seed_urls=p["web_seed_url"], hosts=p["hosts"], t3_hosts=p["t3_hosts"],
        restricted=p["restricted"] or bool(p["restrict"]), restrict=p["restrict"])


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--state", type=click.Path(path_type=Path), default=None,
              help="The state directory of the `btswarm up` to use. Default: ~/.cache/btswarm/up")
@click.option("--address", metavar="IP", default=None,
              help="Client address to use (default: the next shaped client address in turn).")
@click.option("--host", "host", metavar="NAME", default=None,
              help="With `btswarm up --hosts`: the T3 host to run on (t3-1, ...; default: the next in turn).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(state, address, host, command):
    """Run COMMAND as a client of the running federation: inside its network namespace (shaped links),
    with BTSWARM_GET_REPO and BTSWARM_GET_LISTEN set; on a T3 host (--hosts) with BTSWARM_GET_REPO only,
    as a physicist would. Example: btswarm run -- bt-get NAME -o /tmp/x"""
    run_mod.exec_client((state or up_mod.default_state_dir()).resolve(), command, address, host)


@cli.command()
@click.option("--state", type=click.Path(path_type=Path), default=None,
              help="The state directory of the `btswarm up --restricted` to ask. Default: ~/.cache/btswarm/up")
@click.option("--scope", "scopes", multiple=True, metavar="SCOPE",
              help="Read this scope's datasets (atlas; repeatable). Default: every restricted scope of the federation.")
@click.option("--lifetime", default="1h", show_default=True, help="How long the token is valid.")
@click.option("--print", "to_stdout", is_flag=True, help="Print the token instead of writing it (BEARER_TOKEN=$(...)).")
def token(state, scopes, lifetime, to_stdout):
    """A member's token from the running restricted federation's issuer, written where bt-get finds it
    ($XDG_RUNTIME_DIR/bt_u$UID, else /tmp/bt_u$UID; WLCG Bearer Token Discovery)."""
    from btswarm import membertoken

    found = membertoken.fetch((state or up_mod.default_state_dir()).resolve(), scopes, parse_duration(lifetime))
    if to_stdout:
        click.echo(found)
        return
    path = membertoken.write(membertoken.discovery_path(os.environ, os.getuid()), found)
    _say(f"btswarm: a token reading {', '.join(scopes) or 'every restricted scope'} for {lifetime}, in {path}")


@cli.command()
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
    return demo_mod.run_demo(state, (output or state / "downloads").resolve(), sites=sites, keep=keep,
                             report=_say, sample_size=parse_size(sample_size), workers=workers)


BENCHES = benches.find()
BENCH_NAMES = list(BENCHES)


@cli.command()
@click.option("--quick", is_flag=True, help="Smaller datasets and fewer runs.")
@click.option("--only", multiple=True, type=click.Choice(BENCH_NAMES + sorted(benches.groups(BENCH_NAMES))),
              help="Run only these benchmarks; a group (wan) runs each of its own (wan_*).")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=Path("bench-results"),
              show_default=True)
@click.option("--list", "listing", is_flag=True, help="List the benchmarks with what each measures, and stop.")
def bench(quick, only, out, listing):
    """Run the benchmarks (scripts/bench_NAME.py, each found there) against their baselines; JSON and plots
    in OUT."""
    if not BENCHES:
        raise BtswarmError("bench", "runs from a source checkout (scripts/ not found)")
    if listing:
        width = max(map(len, BENCHES))
        for name, script in BENCHES.items():
            click.echo(f"{name:{width}s}  {benches.summary(script)}")
        return
    failed = []
    for name in benches.expand(list(only), BENCH_NAMES):
        args = [sys.executable, str(BENCHES[name]), "--out", str(out)] + (["--quick"] if quick else [])
        _say("$ " + " ".join(args[1:]))
        if subprocess.call(args) != 0:
            failed.append(name)
    plot = benches.SCRIPTS / "plot_bench.py"
    if plot.exists():
        subprocess.call([sys.executable, str(plot), "--out", str(out)])
    if failed:
        raise BtswarmError("bench", f"failed: {', '.join(failed)}")


@cli.command()
@click.argument("result", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Where the SVG goes (default: RESULT with .svg for .json).")
def plot(result: Path, output: Path | None) -> None:
    """Draw a `bt-get --json` RESULT: bytes received from each source over time, as SVG."""
    from btswarm import plot as plot_mod

    try:
        doc = json.loads(result.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BtswarmError(result, f"not JSON ({exc})") from None
    svg = plot_mod.render(doc, str(result))
    output = output or result.with_suffix(".svg")
    output.write_text(svg, encoding="utf-8")
    click.echo(str(output))
