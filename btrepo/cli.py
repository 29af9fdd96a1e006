"""`bt-repo`: run the federation's torrent repository; settle which version a dataset is."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path

import click

from torrents import devsecret
from torrents import log as btlog
from torrents.cli import command_settings, run_main
from torrents.errors import BtswarmError, NotFound, UsageError
from torrents.hostport import parse_hostport
from torrents.statedir import check_writable
from torrents.infohash import is_info_hash
from torrents.servicekit import prefork, tls
from torrents.servicekit import web as tweb

from btrepo import config as repo_config

log = logging.getLogger("btswarm.repo")
SECRETS_HOW = ("give each site a secret of its own (e.g. openssl rand -hex 32) in [repo] site_secrets, "
               "the same as that site's [server] secret")


@click.group(context_settings=command_settings)
@click.version_option(package_name="btswarm", prog_name="bt-repo")
def cli() -> None:
    """The btswarm torrent repository: web pages, search, JSON API, .torrent downloads."""


def main(argv: list[str] | None = None) -> int:
    """Console entry point (the shared contract: torrents.cli)."""
    return run_main(cli, "bt-repo", argv)


@cli.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="TOML config file.")
@click.option("--listen", metavar="HOST:PORT", help="Address to serve on (config [repo] listen).")
@click.option("--state", metavar="DIR", help="Directory for the SQLite catalog (config [repo] state).")
@click.option("--tls-cert", metavar="PEM", help="Serve https with this certificate (and --tls-key).")
@click.option("--tls-key", metavar="PEM", help="The private key of --tls-cert.")
@click.option("--ca-file", metavar="PEM", help="CAs trusted besides the system's, for an https tracker "
              "(default: $BTSWARM_CA_FILE).")
@click.option("--processes", type=int, help="Serve from N processes on one port (SO_REUSEPORT; config [repo] "
              "processes).")
@click.option("-v", "--verbose", count=True, help="-v for info, -vv for debug logs on stderr.")
def run(config_path: str | None, listen: str | None, state: str | None, tls_cert: str | None, tls_key: str | None,
        ca_file: str | None, processes: int | None, verbose: int) -> None:
    """Serve until SIGTERM or SIGINT, then exit 0."""
    btlog.setup(verbose, name="bt-repo")
    # Imported here so `bt-repo --help` stays quick and the app's import errors surface as errors.
    from btrepo.app import create_app

    config = repo_config.load(config_path, overrides={"listen": listen, "state": state, "tls_cert": tls_cert,
                                                      "tls_key": tls_key, "ca_file": ca_file,
                                                      "processes": processes})
    config.check_roles()
    warning = devsecret.check("[repo] site_secrets", config.site_secrets,
                              [("listen", config.listen), ("public_url", config.public_url),
                               ("tracker", config.tracker)], SECRETS_HOW)
    # On loopback only: said in the log (-v, as the units run it), not on a test's or a demo's terminal.
    if warning:
        log.info("%s", warning)
    from btrepo.app import DB_FILE

    check_writable("[repo] state", config.state, [DB_FILE, f"{DB_FILE}-wal", f"{DB_FILE}-shm"])
    ssl_context = tls.server_context(config.tls_cert, config.tls_key, "repo")
    host, port = parse_hostport(config.listen)
    log.info("catalog in %s, tracker %s", config.state, config.tracker or "(none)")
    if config.processes == 1:
        try:
            tweb.run(create_app(config), host, port, name="bt-repo", ssl_context=ssl_context)
        except OSError as exc:  # port taken, state directory not writable
            raise BtswarmError(config.listen, f"cannot listen ({exc.strerror or exc})") from None
        return
    from btrepo.app import open_catalog

    # The schema is migrated here, once, before the fork: children migrating at once would race.
    open_catalog(config).close()

    def serve(index: int) -> int:
        # One process samples the tracker's swarms for the pages; all read them.
        own = config if index == 0 else dataclasses.replace(config, swarm_sample_interval=0)
        return prefork.listening(lambda: tweb.run(create_app(own), host, port, name=f"bt-repo[{index}]",
                                                  ssl_context=ssl_context, reuse_port=True), "bt-repo", config.listen)

    if prefork.run(config.processes, serve, name="bt-repo") != 0:
        raise BtswarmError("bt-repo", f"{config.processes} processes: stopped after a failure (see above)")


@cli.command()
@click.argument("name")
@click.argument("info_hash", required=False)
@click.option("--rules", is_flag=True, help="Forget the operator's choice: the rules decide again.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="TOML config file.")
@click.option("--state", metavar="DIR", help="Directory of the SQLite catalog (config [repo] state).")
def choose(name: str, info_hash: str | None, rules: bool, config_path: str | None, state: str | None) -> None:
    """Serve INFO_HASH as dataset NAME (settles replicas that disagree), or --rules to undo.

    Works on the catalog file while the repository runs; the choice shows at once.
    """
    from btrepo.app import DB_FILE
    from btrepo.db import Database

    if (info_hash is None) == (not rules):
        raise UsageError("choose", "give an INFO_HASH or --rules")
    if info_hash is not None and not is_info_hash(info_hash):
        raise UsageError(info_hash, "not an info-hash (40 hex characters)")
    config = repo_config.load(config_path, overrides={"state": state})
    path = Path(config.state) / DB_FILE
    if not path.is_file():
        raise NotFound(path, "no catalog here (is --state the repository's state directory?)")
    db = Database(path)
    try:
        decision = asyncio.run(db.choose(name, info_hash))
    finally:
        db.close()
    click.echo(f"{name}: serving {decision.current} ({decision.decided_by.value})")
    click.echo(decision.summary(name))

