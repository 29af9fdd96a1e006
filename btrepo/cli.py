"""`bt-repo`: run the federation's torrent repository; settle which version a dataset is."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path

import click

from torrents import log as btlog
from torrents.cli import command_settings, run_main
from torrents.errors import NotFound, UsageError
from torrents.statedir import check_writable
from torrents.infohash import is_info_hash
from torrents.servicekit import service, tls
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
@service.tls_options("an https tracker")
@click.option("--processes", type=int, help="Serve from N processes on one port (SO_REUSEPORT; config [repo] "
              "processes).")
@click.option("-v", "--verbose", count=True, help="-v for info, -vv for debug logs on stderr.")
def run(config_path: str | None, listen: str | None, state: str | None, tls_cert: str | None, tls_key: str | None,
        ca_file: str | None, processes: int | None, verbose: int) -> None:
    """Serve until SIGTERM or SIGINT, then exit 0."""
    btlog.setup(verbose, name="bt-repo")
    # Imported here so `bt-repo --help` stays quick and the app's import errors surface as errors.
    from btrepo.app import create_app
    from torrents import access

    config = repo_config.load(config_path, overrides={"listen": listen, "state": state, "tls_cert": tls_cert,
                                                      "tls_key": tls_key, "ca_file": ca_file,
                                                      "processes": processes})
    config.check_roles()
    members = access.use(access.load(config_path))
    if members.unreadable():
        log.warning("%s", members.unreadable())
    if members.restricted:
        log.info("members only: %s (issuers: %s)", ", ".join(members.restricted), ", ".join(members.issuers))
    service.check_secrets(log, "[repo] site_secrets", config.site_secrets,
                          [("listen", config.listen), ("public_url", config.public_url), ("tracker", config.tracker)],
                          SECRETS_HOW)
    from btrepo.app import DB_FILE

    check_writable("[repo] state", config.state, [DB_FILE, f"{DB_FILE}-wal", f"{DB_FILE}-shm"])
    ssl_context = tls.server_context(config.tls_cert, config.tls_key, "repo")
    log.info("catalog in %s, tracker %s", config.state, config.tracker or "(none)")
    if config.processes > 1:
        from btrepo.app import open_catalog

        # The schema is migrated here, once, before the fork: children migrating at once would race.
        open_catalog(config).close()

    def start(host: str, port: int, index: int, reuse_port: bool) -> None:
        # One process samples the tracker's swarms for the pages; all read them.
        own = config if index == 0 else dataclasses.replace(config, swarm_sample_interval=0)
        tweb.run(create_app(own, access=members), host, port, name=f"bt-repo[{index}]" if reuse_port else "bt-repo",
                 ssl_context=ssl_context, reuse_port=reuse_port)

    service.serve(start, config.listen, processes=config.processes, name="bt-repo")


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

