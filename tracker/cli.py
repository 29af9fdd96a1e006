"""`bt-tracker run`: the federation's tracker."""

from __future__ import annotations

import logging

import click

from torrents import log as btlog
from torrents.cli import command_settings, run_main
from torrents.errors import BtswarmError
from torrents.hostport import parse_hostport
from tracker import config as tracker_config
from tracker import fastpath
from tracker.app import create_app

log = logging.getLogger("btswarm.tracker")


@click.group(context_settings=command_settings)
@click.version_option(package_name="btswarm", prog_name="bt-tracker")
def cli() -> None:
    """BitTorrent tracker that starts seeds at sites on demand."""


def main(argv: list[str] | None = None) -> int:
    """Console entry point (the shared contract: torrents.cli)."""
    return run_main(cli, "bt-tracker", argv)


@cli.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="TOML configuration file.")
@click.option("--listen", help="HOST:PORT to serve on (default 127.0.0.1:6969).")
@click.option("--open", "open_", is_flag=True, default=None, help="Accept any info-hash, published or not.")
@click.option("--interval", type=int, help="Announce interval in seconds.")
@click.option("-v", "--verbose", count=True, help="-v info, -vv debug.")
def run(config_path: str | None, listen: str | None, open_: bool | None, interval: int | None, verbose: int) -> None:
    """Serve announces, scrapes, heartbeats and the read API until SIGTERM/SIGINT."""
    btlog.setup(verbose, "bt-tracker")
    overrides = {"listen": listen, "open": open_, "interval": interval}
    if interval is not None:
        overrides["min_interval"] = max(1, interval // 2)
    config = tracker_config.load(config_path, overrides=overrides)
    host, port = parse_hostport(config.listen)
    app = create_app(config)
    log.info("open: %s, interval %d s, %d site secrets", config.open, config.interval, len(config.site_secrets))
    try:
        fastpath.run(app, host, port, name="bt-tracker")
    except OSError as exc:
        raise BtswarmError(config.listen, f"cannot listen ({exc.strerror or exc})") from None
