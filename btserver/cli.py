"""bt-server: the storage-site daemon and its tools.

    bt-server run            serve: scan, farms, torrents, publish, seed on demand
    bt-server scan           prepare the datasets once and list them (no daemon)
    bt-server publish [NAME] prepare, then PUT to the repository
    bt-server make-torrent PATH   a .torrent for a directory or manifest
    bt-server status         ask a running daemon
    bt-server share DIR/NAME a T3: share a dataset fetched whole (bt-get --share runs it)
    bt-server stop           stop the daemon `share` started

Results on stdout (`--json` for scripts), logs on stderr. Errors become
one line `bt-server: error: subject: problem` and an exit status in
torrents.cli.run_main, as for every btswarm command.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import tempfile
from pathlib import Path
from typing import Any

import click

from torrents import access
from torrents import log as btlog
from torrents.cli import command_settings, run_main
from torrents.dataset import Dataset, read_manifest, scan_directory
from torrents.errors import BtswarmError, ConfigError, DatasetError, NotFound, Unreachable
from torrents.exitstatus import ExitStatus
from torrents.servicekit import service
from torrents.statedir import check_writable
from torrents.units import human_rate, human_size, parse_duration, parse_size

from btserver import checksums, farm, layout
from btserver import config as server_config
from btserver.config import ServerConfig
from btserver.builder import BuildParams, make

PROG = "bt-server"
log = logging.getLogger("btswarm.server")
SECRET_HOW = ("set [server] secret (or $BTSWARM_SERVER_SECRET) to this site's own secret, the one the tracker's and "
              "the repository's site_secrets hold for it")


def verbosity(f):
    return click.option("-v", "--verbose", count=True, help="More logging on stderr (-vv: debug).")(f)


def config_option(f):
    return click.option("--config", "config_path", type=click.Path(dir_okay=False),
                        help="TOML config file (else $BTSWARM_CONFIG, ~/.config/btswarm/config.toml).")(f)


def server_options(f):
    for opt in reversed([
        click.option("--site", help="This site's name."),
        click.option("--listen", help="Control API HOST:PORT."),
        click.option("--peer-listen", help="libtorrent HOST:PORT (port 0: any free port)."),
        click.option("--state", type=click.Path(file_okay=False), help="State directory (farms, torrents)."),
        click.option("--root", "roots", multiple=True, type=click.Path(file_okay=False),
                     help="A directory whose subdirectories are datasets (repeatable)."),
        click.option("--manifest", "manifests", multiple=True, type=click.Path(dir_okay=False),
                     help="A JSON/TSV/Rucio manifest (repeatable)."),
        click.option("--tracker", help="Tracker base URL."),
        click.option("--repo", help="Repository base URL."),
        click.option("--idle-ttl", help="Stop a seed after this long without a peer (e.g. 600, 10m)."),
        click.option("--max-seeds", type=int, help="Seeds active at once."),
    ]):
        f = opt(f)
    return service.tls_options("an https tracker and repository")(f)


def load_server(config_path: str | None, **flags: Any) -> ServerConfig:
    overrides: dict[str, Any] = {}
    for key in ("site", "listen", "peer_listen", "state", "tracker", "repo", "max_seeds", "tls_cert", "tls_key",
                "ca_file"):
        overrides[key] = flags.get(key)
    for key in ("roots", "manifests"):
        overrides[key] = [str(Path(p).resolve()) for p in flags[key]] if flags.get(key) else None
    if flags.get("idle_ttl") is not None:
        overrides["idle_ttl"] = parse_duration(flags["idle_ttl"])
    return server_config.load(config_path, overrides=overrides)


def inventory_with_rucio(cfg: ServerConfig) -> Any:
    """The site's Inventory; with [server.rucio], after one refresh from Rucio (whose failure is an error here)."""
    from btserver.inventory import Inventory

    inv = Inventory(cfg)
    if cfg.rucio.server:
        import asyncio

        from btserver import rucio_sync

        inv.set_external(asyncio.run(rucio_sync.fetch_once(cfg.rucio)))
    return inv


@click.group(context_settings=command_settings)
@click.version_option(package_name="btswarm", prog_name=PROG)
def cli() -> None:
    """bt-server: a storage site's datasets, as torrents, seeded on demand."""


def main(argv: list[str] | None = None) -> int:
    """Console entry point (the shared contract: torrents.cli)."""
    return run_main(cli, PROG, argv)


@cli.command()
@config_option
@server_options
@verbosity
def run(config_path: str | None, verbose: int, **flags: Any) -> None:
    """Run the daemon until SIGTERM/SIGINT."""
    from torrents.servicekit import tls
    from torrents.servicekit.web import run as run_app

    from btserver.app import create_app

    btlog.setup(verbose, PROG)
    cfg = load_server(config_path, **flags)
    cfg.check_control_url()
    service.check_secrets(log, "[server] secret", {cfg.site: cfg.secret},
                          [("listen", cfg.listen), ("control_url", cfg.control_url),
                           *(("tracker", t) for t in cfg.tracker_urls()), ("repo", cfg.repo)], SECRET_HOW)
    check_writable("[server] state", cfg.state)
    ssl_context = tls.server_context(cfg.tls_cert, cfg.tls_key, "server")
    tls.trust_in_libtorrent(tls.ca_file(cfg.ca_file))  # the seeds' https announces
    if not cfg.roots_may_appear:
        for root in cfg.roots:
            if not Path(root).is_dir():
                raise ConfigError(root, "no such directory: a root must exist when bt-server starts (set "
                                        "[server] roots_may_appear = true for one mounted later)")
    for manifest in cfg.manifests:
        if not Path(manifest).is_file():
            raise ConfigError(manifest, "no such manifest file")
    rules = access.load(config_path)
    service.serve(lambda host, port, _index, _reuse: run_app(create_app(cfg, access_config=rules), host, port,
                                                             name=f"{PROG} {cfg.site}", ssl_context=ssl_context),
                  cfg.listen, name=PROG)


@cli.command()
@config_option
@server_options
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@verbosity
def scan(config_path: str | None, verbose: int, as_json: bool, **flags: Any) -> int:
    """Prepare every dataset (farms, torrents; hash only what changed) and list them."""
    btlog.setup(verbose, PROG)
    inv = inventory_with_rucio(load_server(config_path, **flags))
    report = inv.prepare()
    rows = [{"name": p.name, "info_hash": p.info_hash, "files": p.file_count,
             "total_size": p.total_size, "built": p.built, "torrent": str(p.torrent_path),
             "excluded": [{"lfn": lfn, "why": why} for lfn, why in report.excluded.get(p.name, ())]}
            for p in report.prepared]
    problems = [str(p) for p in report.problems]
    serious = [p for p in report.problems if p.serious]
    if as_json:
        click.echo(json.dumps({"datasets": rows, "problems": problems}, indent=1))
    else:
        for r in rows:
            left_out = f"  ({len(r['excluded'])} excluded)" if r["excluded"] else ""
            click.echo(f"{r['info_hash']}  {r['files']:>6} files  {human_size(r['total_size']):>10}  "
                       f"{'built ' if r['built'] else 'cached'}  {r['name']}{left_out}")
        for r in rows:
            for x in r["excluded"]:
                click.echo(f"{PROG}: excluded: {r['name']}/{x['lfn']}: {x['why']}", err=True)
        for p in problems:
            click.echo(f"{PROG}: refused: {p}", err=True)
    return int(ExitStatus.PROBLEMS if serious else ExitStatus.OK)


@cli.command()
@click.argument("name", required=False)
@config_option
@server_options
@click.option("--attempts", type=int, default=5, show_default=True, help="Tries per dataset.")
@click.option("--new-version", is_flag=True,
              help="Declare this site's replica the dataset's new version (the dataset changed on purpose).")
@verbosity
def publish(name: str | None, config_path: str | None, verbose: int, attempts: int, new_version: bool,
            **flags: Any) -> int:
    """Prepare the datasets, then publish NAME (default: all) to the repository."""
    from torrents.servicekit import tls
    from torrents.servicekit.web import client_session

    from btserver import publisher

    btlog.setup(max(verbose, 1), PROG)
    cfg = load_server(config_path, **flags)
    inv = inventory_with_rucio(cfg)
    inv.prepare()
    chosen = inv.all() if name is None else [inv.by_name(name)]
    if chosen == [None]:
        raise NotFound(name, "no such dataset at this site")
    if new_version and name is None:
        raise BtswarmError("--new-version", "name the dataset that changed on purpose")

    async def go() -> list[publisher.Answer]:
        async with client_session(tls.ca_file(cfg.ca_file)) as http:
            retry = publisher.Retry(attempts=max(1, attempts))
            return [await publisher.publish(http, cfg.repo, cfg.site, cfg.secret, p.torrent_path.read_bytes(),
                                            {**p.record(), **({"new_version": True} if new_version else {})},
                                            retry=retry, kind=cfg.kind) for p in chosen if p is not None]

    import asyncio  # here, not at the top: 60 ms of every make-torrent's start

    results = asyncio.run(go())
    for p, answer in zip(chosen, results):
        if answer.ok:
            state = "" if answer.state in ("", "current") else f" ({answer.state}: {answer.problem})"
            click.echo(f"{p.info_hash}  {answer.result or 'published'}{state}  {p.name}")
        else:
            # A refusal for this site's role (btrepo/rights.py) is no outage: said as such.
            click.echo(f"{p.info_hash}  {'REFUSED' if answer.forbidden else 'FAILED'}  {p.name}: {answer.problem}")
    return int(ExitStatus.OK if all(a.ok for a in results) else ExitStatus.ERROR)


@cli.command()
@click.argument("path", type=click.Path(file_okay=False))
@config_option
@click.option("--info-hash", "info_hash", metavar="HEX",
              help="The info-hash it was fetched as: shared only if this site's build gives the same.")
@click.option("--wait", default="10m", show_default=True, metavar="DURATION",
              help="How long to wait for it to be prepared and published (the daemon goes on after).")
@click.option("--no-start", is_flag=True, help="Do not start a daemon when none answers at the control URL.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@verbosity
def share(path: str, config_path: str | None, info_hash: str | None, wait: str, no_start: bool, as_json: bool,
          verbose: int) -> int:
    """Share the dataset directory PATH (DIR/NAME, fetched whole) as this T3 site: published, seeded on demand.

    bt-get --share runs this after a verified download. The daemon (bt-server run) is asked to scan
    again, or started, detached, when none answers (its PID and log in the state directory)."""
    from torrents.infohash import parse_info_hash

    from btserver import sharecommand

    btlog.setup(verbose, PROG)
    cfg = server_config.load(config_path)
    hashed = parse_info_hash(info_hash, "--info-hash").lower() if info_hash else None
    try:
        seconds = parse_duration(wait)
    except BtswarmError as exc:
        raise ConfigError("--wait", exc.problem) from None
    import asyncio

    done = asyncio.run(sharecommand.share(cfg, config_path, Path(path), hashed, wait=seconds, start=not no_start))
    if as_json:
        click.echo(json.dumps(done.to_json(), indent=1))
        return int(ExitStatus.OK)
    repo = done.repository
    state = "" if repo.get("state") in (None, "", "current") else f", {repo['state']}: {repo.get('problem')}"
    daemon = f"bt-server pid {done.pid}" if done.pid else "bt-server"
    click.echo(f"{done.info_hash}  shared by {done.kind} site {done.site} ({repo.get('result') or 'published'}"
               f"{state}); {daemon} at {done.control_url} seeds it on demand  {done.name}")
    return int(ExitStatus.OK)


@cli.command()
@config_option
def stop(config_path: str | None) -> int:
    """Stop the daemon that `bt-server share` started (by the PID in the state directory)."""
    from btserver import sharecommand

    cfg = server_config.load(config_path)
    pid = sharecommand.stop(Path(cfg.state))
    if pid is None:
        raise NotFound(str(Path(cfg.state) / sharecommand.PID_FILE), "no daemon started by bt-server share runs "
                                                                 "(one under a service manager is stopped by it)")
    click.echo(f"stopped bt-server pid {pid}")
    return int(ExitStatus.OK)


@cli.command("make-torrent")
@click.argument("path", type=click.Path(exists=True))
@click.option("-o", "--output", "out", type=click.Path(), help="Output file (a directory for several datasets).")
@click.option("--piece-size", help="Piece size (e.g. 1M); default: a function of the total size.")
@click.option("--tracker", help="Tracker URL (…/announce is added when missing).")
@click.option("--no-private", is_flag=True, help="Leave out the private flag (BEP 27).")
@click.option("--hybrid", is_flag=True, help="Hybrid v1+v2 torrent (BEP 52).")
@click.option("--name", help="Dataset name (default: the directory's name).")
@config_option
@verbosity
def make_torrent(path: str, out: str | None, piece_size: str | None, tracker: str | None, no_private: bool,
                 hybrid: bool, name: str | None, config_path: str | None, verbose: int) -> None:
    """Write a .torrent for a dataset directory or every dataset of a manifest; print its info-hash."""
    btlog.setup(verbose, PROG)
    tracker = tracker or server_config.load(config_path).tracker
    announce = tracker if not tracker or tracker.rstrip("/").endswith("/announce") else \
        f"{tracker.rstrip('/')}/announce"
    plen = parse_size(piece_size) if piece_size else None
    if plen is not None and (plen < 16384 or plen & (plen - 1)):
        raise BtswarmError("--piece-size", f"{plen} is not a power of two of at least 16 KiB")
    params = BuildParams(announce=announce or None, private=not no_private, piece_length=plen, hybrid=hybrid)
    datasets = _datasets_at(Path(path), name)
    for ds in datasets:
        lay = layout.plan_dataset(ds, None, farm.probe)
        if not lay.ok:
            raise DatasetError(ds.name, "; ".join(str(p) for p in lay.problems))
        dest = _output_path(out, ds.name, several=len(datasets) > 1)
        with tempfile.TemporaryDirectory(prefix="bt-server-") as tmp:
            # A private farm: the same resolved files a running daemon would hash.
            farm_dir, _ = farm.apply(lay, tmp)
            built = make(ds.name, [(link.lfn, str(farm_dir / link.lfn)) for link in lay.links if not link.symlink],
                         dataclasses.replace(params, adler32=checksums.wants_adler32(ds)),
                         {link.lfn: link.text for link in lay.links if link.symlink})
        bad = checksums.mismatches(ds, built.sums)
        if bad:
            raise DatasetError(ds.name, "; ".join(str(p) for p in bad))
        data, meta = built.torrent, built.meta
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        click.echo(f"{meta.info_hash}  {ds.name}  {dest}")


def _datasets_at(path: Path, name: str | None) -> list[Dataset]:
    if path.is_dir():
        scan = scan_directory(path, name)
        if scan.dataset is None or scan.problems:
            raise DatasetError(path, "; ".join(str(p) for p in scan.problems))
        return [scan.dataset]
    datasets = read_manifest(path, dataset=name)
    if not datasets:
        raise DatasetError(path, "manifest lists no dataset")
    return datasets


def _output_path(out: str | None, name: str, several: bool) -> Path:
    if out is None:
        return Path.cwd() / f"{name}.torrent"
    p = Path(out)
    if several or p.is_dir():
        return p / f"{name}.torrent"
    return p


@cli.command()
@config_option
@click.option("--url", help="Control URL of the daemon (default: http://<server.listen>).")
@click.option("--json", "as_json", is_flag=True, help="The raw status document.")
def status(config_path: str | None, url: str | None, as_json: bool) -> int:
    """Show a running daemon's datasets and seeds."""
    import urllib.error
    import urllib.request

    from torrents.servicekit import tls

    cfg = server_config.load(config_path)
    url = url or cfg.public_control_url()
    context = tls.client_context(tls.ca_file(cfg.ca_file)) if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/api/status", timeout=5, context=context) as resp:
            doc = json.load(resp)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        untrusted = tls.certificate_problem(reason, tls.hint("server"))
        raise Unreachable(url, untrusted or f"no answer ({reason})") from None
    if as_json:
        click.echo(json.dumps(doc, indent=1))
        return int(ExitStatus.OK)
    click.echo(f"site {doc['site']}  peers {' '.join(doc.get('peers', []))}  "
               f"seeds {len(doc['seeds'])}/{doc['capacity']}  uploaded {human_size(doc['uploaded_total'])}  "
               f"hash failures {doc['hash_failures']}  read errors {doc.get('read_errors', 0)}")
    # The name last and whole: ATLAS names differ in their last tokens.
    click.echo(f"{'INFO-HASH':<40}  {'FILES':>6} {'SIZE':>10}  SEEDING  DATASET")
    for d in doc["datasets"]:
        click.echo(f"{d['info_hash']}  {d['files']:>6} {human_size(d['total_size']):>10}  "
                   f"{'yes' if d['seeding'] else '-':<7}  {d['name']}")
    for s in doc["seeds"]:
        click.echo(f"seed {s['info_hash']}  peers {s['peers']}  {human_rate(s['upload_rate'])}  "
                   f"uploaded {human_size(s['uploaded'])}  {s['name']}")
    rucio = doc.get("rucio")
    if rucio:
        click.echo(f"rucio {rucio['state']}  {rucio['server']}  RSE {rucio['rse']}  datasets {rucio['datasets']}  "
                   f"withheld {len(rucio['withheld'])}" + (f"  error: {rucio['error']}" if rucio["error"] else ""))
    for p in doc.get("problems", []):
        click.echo(f"problem: {p}")
    if doc.get("error"):
        click.echo(f"error: {doc['error']}")
    return int(ExitStatus.OK)
