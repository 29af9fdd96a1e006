"""`bt-tracker run`: the federation's tracker."""

from __future__ import annotations

import logging

import click

from torrents import log as btlog
from torrents.cli import command_settings, run_main
from torrents.errors import ConfigError
from torrents.servicekit import service, tls
from tracker import config as tracker_config
from tracker import fastpath
from tracker.app import create_app

log = logging.getLogger("btswarm.tracker")
SECRETS_HOW = ("give each site a secret of its own (e.g. openssl rand -hex 32) in [tracker] site_secrets, "
               "the same as that site's [server] secret")


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
@click.option("--store", type=click.Choice(["memory", "redis"]), help="Where swarms, starts and sites are kept.")
@click.option("--redis-url", help="The shared store with --store redis (redis://HOST:PORT/DB, unix:///PATH).")
@click.option("--processes", type=int, help="Serve from N processes on one port (SO_REUSEPORT); needs --store redis.")
@service.tls_options("https sites and repository")
@click.option("-v", "--verbose", count=True, help="-v info, -vv debug.")
def run(config_path: str | None, listen: str | None, open_: bool | None, interval: int | None, store: str | None,
        redis_url: str | None, processes: int | None, tls_cert: str | None, tls_key: str | None,
        ca_file: str | None, verbose: int) -> None:
    """Serve announces, scrapes, heartbeats and the read API until SIGTERM/SIGINT."""
    btlog.setup(verbose, "bt-tracker")
    overrides = {"listen": listen, "open": open_, "interval": interval, "store": store, "redis_url": redis_url,
                 "processes": processes, "tls_cert": tls_cert, "tls_key": tls_key, "ca_file": ca_file}
    if interval is not None:
        overrides["min_interval"] = max(1, interval // 2)
    config = tracker_config.load(config_path, overrides=overrides)
    if config.processes > 1 and config.store != "redis":  # a rule across two keys: checked once they are all read
        raise ConfigError("processes", f"{config.processes} processes need store = \"redis\" "
                                       "(each process would keep swarms of its own)")
    config.check_roles()
    service.check_secrets(log, "[tracker] site_secrets", config.site_secrets,
                          [("listen", config.listen), ("repo", config.repo)], SECRETS_HOW)
    ssl_context = tls.server_context(config.tls_cert, config.tls_key, "tracker", client_ca=config.peer_ca)
    log.info("open: %s, interval %d s, %d site secrets, store %s%s", config.open, config.interval,
             len(config.site_secrets), config.store, f" ({_store_label(config)})" if config.store == "redis" else "")
    app = create_app(config)  # a bad configuration fails here, once, not in every child

    def start(host: str, port: int, index: int, reuse_port: bool) -> None:
        fastpath.run(create_app(config) if reuse_port else app, host, port,
                     name=f"bt-tracker[{index}]" if reuse_port else "bt-tracker", reuse_port=reuse_port,
                     ssl_context=ssl_context)

    service.serve(start, config.listen, processes=config.processes, name="bt-tracker")


def _store_label(config) -> str:
    """Where the Redis store is, for the log: never its password."""
    from tracker.resp import parse_url

    if config.redis_sentinels:
        return f"master {config.redis_master!r} of sentinels {', '.join(config.redis_sentinels)}"
    ep = parse_url(config.redis_url)
    return ("rediss " if ep.tls else "") + ep.label + (f" as {ep.username}" if ep.username else "")
