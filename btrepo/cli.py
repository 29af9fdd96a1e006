"""`bt-repo`: run the federation's torrent repository."""

from __future__ import annotations

import logging
import sys

import click

from torrents import log as tlog
from torrents.servicekit import web as tweb
from torrents.hostport import parse_hostport

from btrepo import config as repo_config
from torrents.errors import BtswarmError

log = logging.getLogger("btswarm.repo")


@click.group()
@click.version_option(package_name="btswarm", prog_name="bt-repo")
def main() -> None:
    """The btswarm torrent repository: web pages, search, JSON API, .torrent downloads."""


@main.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="TOML config file.")
@click.option("--listen", metavar="HOST:PORT", help="Address to serve on (config [repo] listen).")
@click.option("--state", metavar="DIR", help="Directory for the SQLite catalog (config [repo] state).")
@click.option("-v", "--verbose", count=True, help="-v for info, -vv for debug logs on stderr.")
def run(config_path: str | None, listen: str | None, state: str | None, verbose: int) -> None:
    """Serve until SIGTERM or SIGINT, then exit 0."""
    tlog.setup(verbose, name="bt-repo")
    # Imported here so `bt-repo --help` stays quick and the app's import errors surface as errors.
    from btrepo.app import create_app

    try:
        config = repo_config.load(config_path, overrides={"listen": listen, "state": state})
        host, port = parse_hostport(config.listen, subject="[repo] listen")
        app = create_app(config)
    except BtswarmError as exc:
        click.echo(f"bt-repo: error: {exc}", err=True)
        sys.exit(2)
    log.info("catalog in %s, tracker %s", config.state, config.tracker or "(none)")
    try:
        tweb.run(app, host, port, name="bt-repo")
    except OSError as exc:  # port taken, state directory not writable
        click.echo(f"bt-repo: error: {config.listen}: {exc.strerror or exc}", err=True)
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
