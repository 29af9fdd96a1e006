"""bt-get: fetch a dataset with BitTorrent from every site and peer that holds it.

`main` is the one place where errors become exit statuses and one-line
messages (`bt-get: error: subject: problem`; a traceback with -vv).
Results go to stdout (a summary, or one JSON document with --json);
progress and logs go to stderr.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import click

from torrents import log as tlog
from torrents.cli import command_settings, run_main
from torrents import metainfo
from torrents.errors import BtswarmError, ConfigError, MetainfoError, UsageError
from torrents.exitstatus import ExitStatus, status_for
from torrents.hostport import parse_hostport
from torrents.infohash import parse_info_hash
from torrents.servicekit import tls
from torrents.servicekit.web import client_session
from torrents.units import parse_duration

from btget import config as get_config
from btget import download, plan, report
from btget.client import Client, Resolved
from btget.config import GetConfig
from btget.errors import RepoError
from btget.progress import make_display
from btget.target import Target, classify, not_a_torrent

log = logging.getLogger("btget")
SERVE_DEFAULT = "127.0.0.1:8765"


@click.command(name="bt-get", context_settings=command_settings)
@click.version_option(package_name="btswarm", prog_name="bt-get")
@click.argument("target")
@click.option("-o", "--output", metavar="DIR", help="Download into DIR/NAME/ (default: config [get] output, or .).")
@click.option("--repo", metavar="URL", help="Torrent repository URL (default: $BTSWARM_REPO, then config).")
@click.option("--config", "config_path", metavar="FILE", help="Configuration file (TOML).")
@click.option("--ca-file", metavar="PEM", help="CAs trusted besides the system's for https repository and trackers "
              "(default: $BTSWARM_CA_FILE, then config [get] ca_file).")
@click.option("--workers", metavar="N|auto", help="Local libtorrent sessions, each in its own process.")
@click.option("--shard", metavar="K/N", help="Fetch only share K of N (batch arrays: one share per host).")
@click.option("--files", "globs", multiple=True, metavar="GLOB", help="Only files whose LFN matches (repeatable).")
@click.option("--info-hash", "info_hash", metavar="HEX",
              help="This version of the dataset (when its sites' replicas disagree, or an older one).")
@click.option("--nrandom", type=int, metavar="N", help="Only N files picked at random.")
@click.option("--seed", "sample_seed", metavar="S", help="Random seed for --nrandom (same seed, same files).")
@click.option("--seed-time", metavar="DURATION", help="Keep seeding this long after completion (e.g. 10m).")
@click.option("--seed-ratio", type=float, metavar="R", help="Keep seeding until uploaded/size reaches R.")
@click.option("--timeout", metavar="DURATION", help="Give up (exit 4, resumable) if not complete by then.")
@click.option("--stall-timeout", metavar="DURATION", help="Give up (exit 4) after this long without progress (0: never; default 300 s).")
@click.option("--check", is_flag=True, help="Ignore saved resume state; re-hash what is already on disk.")
@click.option("--web-seed", "web_seeds", multiple=True, metavar="URL", help="Extra HTTP source (BEP 19).")
@click.option("--peer", "peers", multiple=True, metavar="IP:PORT", help="Extra peer to connect to (repeatable).")
@click.option("--listen", metavar="IP", help="Address of the libtorrent sessions (ports are chosen free).")
@click.option("--json", "json_output", is_flag=True, help="Print one JSON document on stdout.")
@click.option("--serve", metavar="[IP:PORT]", is_flag=False, flag_value=SERVE_DEFAULT, default=None,
              help=f"Do not download first: serve the files over HTTP on a loopback address (default "
                   f"{SERVE_DEFAULT}), fetching the pieces each read needs.")
@click.option("--no-prefetch", is_flag=True, help="With --serve: fetch only what is read (and read ahead).")
@click.option("--piece-timeout", metavar="DURATION", help="With --serve: answer 503 when a piece has not "
              "arrived in this time (default 60s).")
@click.option("--parent-pid", type=int, hidden=True, help="With --serve: stop when this process is gone.")
@click.option("-q", "--quiet", is_flag=True, help="No progress display and no summary.")
@click.option("-v", "--verbose", count=True, help="-v: log to stderr; -vv: debug, tracebacks.")
def command(**opts: Any) -> int:
    """Download TARGET: a dataset NAME, a FILE.torrent, an http(s) URL of one, or a magnet link."""
    tlog.setup(opts["verbose"], "bt-get")
    return get(Options.from_click(opts))


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point (the shared contract: torrents.cli)."""
    return run_main(command, "bt-get", argv)


@dataclass(frozen=True)
class Options:
    """The command line, parsed and checked (durations in seconds, peers as tuples)."""
    target: str
    output: str | None
    repo: str | None
    config_path: str | None
    workers: str | None
    shard: tuple[int, int] | None
    globs: tuple[str, ...]
    info_hash: str | None
    nrandom: int | None
    sample_seed: str | None
    seed_time: float | None
    seed_ratio: float | None
    timeout: float | None
    stall_timeout: float | None
    check: bool
    web_seeds: tuple[str, ...]
    peers: tuple[tuple[str, int], ...]
    listen: str | None
    json_output: bool
    quiet: bool
    verbose: int
    serve: tuple[str, int] | None = None
    prefetch: bool = True
    piece_timeout: float | None = None
    parent_pid: int | None = None
    ca_file: str | None = None

    @classmethod
    def from_click(cls, o: dict[str, Any]) -> "Options":
        if o["sample_seed"] is not None and o["nrandom"] is None:
            raise UsageError("--seed", "only makes sense with --nrandom")
        if o["seed_ratio"] is not None and o["seed_ratio"] < 0:
            raise UsageError("--seed-ratio", "must not be negative")
        if o["listen"] is not None:
            try:
                ipaddress.ip_address(o["listen"])
            except ValueError:
                raise UsageError("--listen", f"{o['listen']!r} is not an IP address") from None
        info_hash = o["info_hash"]
        if info_hash is not None:
            try:
                info_hash = parse_info_hash(info_hash, "--info-hash")
            except BtswarmError as exc:
                raise UsageError(exc.subject, exc.problem) from None
        peers = []
        for text in o["peers"]:
            try:
                peers.append(parse_hostport(text, "--peer"))
            except ConfigError as exc:
                raise UsageError(exc.subject, exc.problem) from None
        serve = _serve_address(o) if o.get("serve") is not None else None
        if serve is None:
            for key, flag in (("no_prefetch", "--no-prefetch"), ("piece_timeout", "--piece-timeout"),
                              ("parent_pid", "--parent-pid")):
                if o.get(key):
                    raise UsageError(flag, "only with --serve")
        return cls(
            serve=serve, prefetch=not o.get("no_prefetch"), parent_pid=o.get("parent_pid"),
            piece_timeout=_duration("--piece-timeout", o.get("piece_timeout")),
            target=o["target"], output=o["output"], repo=o["repo"], config_path=o["config_path"],
            workers=o["workers"], shard=plan.parse_shard(o["shard"]) if o["shard"] else None,
            globs=tuple(o["globs"]), info_hash=info_hash, nrandom=o["nrandom"], sample_seed=o["sample_seed"],
            seed_time=_duration("--seed-time", o["seed_time"]), seed_ratio=o["seed_ratio"],
            timeout=_duration("--timeout", o["timeout"]), stall_timeout=_duration("--stall-timeout", o["stall_timeout"]),
            check=o["check"], web_seeds=tuple(o["web_seeds"]), peers=tuple(peers), listen=o["listen"],
            json_output=o["json_output"], quiet=o["quiet"], verbose=o["verbose"], ca_file=o.get("ca_file"))


# Options that choose what to download or when to stop: meaningless for a server,
# which serves every file until it is stopped.
_NOT_WITH_SERVE = ("workers", "shard", "globs", "nrandom", "seed_time", "seed_ratio", "timeout", "stall_timeout")


def _serve_address(o: dict[str, Any]) -> tuple[str, int]:
    for key in _NOT_WITH_SERVE:
        if o.get(key):
            flag = "--files" if key == "globs" else "--" + key.replace("_", "-")
            raise UsageError(flag, "not with --serve (the server serves every file until it is stopped)")
    try:
        host, port = parse_hostport(o["serve"], "--serve")
    except ConfigError as exc:
        raise UsageError(exc.subject, exc.problem) from None
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        raise UsageError("--serve", f"{host!r} is not an IP address") from None
    if not loopback:
        raise UsageError("--serve", f"{host} is not a loopback address (the server has no access control)")
    return host, port


def _duration(flag: str, text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return parse_duration(text)
    except BtswarmError as exc:
        raise UsageError(flag, f"{exc.subject}: {exc.problem}") from None


def configure(opts: Options) -> GetConfig:
    """Config file < environment ($BTSWARM_GET_*, $BTSWARM_REPO, $BTSWARM_CA_FILE) < flags."""
    repo = opts.repo or os.environ.get("BTSWARM_REPO")
    overrides = {"repo": repo, "output": opts.output, "listen": opts.listen, "seed_time": opts.seed_time,
                 "seed_ratio": opts.seed_ratio, "timeout": opts.timeout, "stall_timeout": opts.stall_timeout,
                 "ca_file": opts.ca_file or os.environ.get(tls.CA_ENV)}
    return get_config.load(opts.config_path, overrides=overrides)


def get(opts: Options) -> int:
    cfg = configure(opts)
    tls.trust_in_libtorrent(cfg.ca_file)  # the workers' https announces (they inherit the environment)
    target = classify(opts.target, os.path.isfile)
    if opts.info_hash is not None and target.kind != "name":
        raise UsageError("--info-hash", "only with a dataset NAME (a .torrent or magnet names its own version)")
    resolved, meta, sites = asyncio.run(resolve(target, cfg, opts.peers, opts.info_hash))
    if target.info_hash and meta.info_hash != target.info_hash:
        raise RepoError(opts.target, f"the repository's torrent has info-hash {meta.info_hash}, "
                        f"not the magnet's {target.info_hash}")
    if opts.serve is not None:
        return serve(opts, cfg, resolved, meta, target)
    selected = choose_files(meta, opts)
    workers, capped = plan.worker_count(opts.workers if opts.workers is not None else cfg.workers,
                                        os.cpu_count() or 1, len(selected))
    shares = tuple(tuple(s) for s in plan.split(selected, workers) if s)
    directory = Path(cfg.output).resolve()
    job = download.Job(
        meta=meta, torrent=resolved.torrent, directory=directory, shares=shares, selected=tuple(selected),
        peers=opts.peers + tuple(parse_hostport(p, "magnet x.pe") for p in target.peers),
        web_seeds=opts.web_seeds, listen_ip=cfg.listen, recheck=opts.check, max_connections=cfg.max_connections,
        seed_time=cfg.seed_time, seed_ratio=cfg.seed_ratio, timeout=cfg.timeout, stall_timeout=cfg.stall_timeout,
        blocked_after=cfg.blocked_after,
        checksums=checksums(resolved.record))
    log.info("%s %s: %d files, %d bytes, %d workers, into %s", meta.name, meta.info_hash, len(selected),
             sum(f.size for f in selected), len(shares), directory / meta.name)
    display = make_display(opts.quiet, opts.json_output)
    if capped:
        display.note(capped, warning=True)
    outcome = download.run(job, display)
    error = outcome.error
    status = status_for(error) if error is not None else ExitStatus.OK
    raw_sources: dict[str, int] = {}
    for w in outcome.workers:
        for ep, n in (w.last.sources if w.last else {}).items():
            raw_sources[ep] = raw_sources.get(ep, 0) + n
    failures, banned = report.bad_sources(outcome.workers, sites, outcome.endpoints)
    doc = report.document(meta, str(directory / meta.name), {f.index for f in selected}, outcome.files,
                          outcome.verify_results, outcome.workers,
                          report.name_sources(raw_sources, sites, outcome.endpoints),
                          outcome.seconds, status, hash_failures_by_source=failures, banned=banned)
    if opts.json_output:
        # Indented for a person at a terminal; compact for a pipe, where the C
        # encoder writes a 10,000-file document in milliseconds, not seconds.
        click.echo(json.dumps(doc, indent=2 if sys.stdout.isatty() else None))
    elif not opts.quiet:
        click.echo(report.human(doc))
    if error is not None:
        raise error
    return int(status)


def serve(opts: Options, cfg: GetConfig, resolved: Resolved, meta: metainfo.Metainfo, target: Target) -> int:
    """--serve: join the swarm and serve the files over HTTP until stopped (btget.serve)."""
    from btget import serve as serving
    from btget.worker import WorkerSpec

    files = [plan.PlanFile(i, f.lfn, f.length) for i, f in enumerate(meta.files) if not f.pad]
    directory = Path(cfg.output).resolve()
    sdir = directory / meta.name / download.STATE_DIR
    sdir.mkdir(parents=True, exist_ok=True)
    # The state of a one-worker download of every file: a `bt-get NAME` afterwards resumes from it.
    spec = WorkerSpec(index=1, torrent=resolved.torrent, save_path=str(directory), state_dir=str(sdir),
                      key=plan.share_key(files), wanted=tuple(f.index for f in files), listen_ip=cfg.listen,
                      peers=opts.peers + tuple(parse_hostport(p, "magnet x.pe") for p in target.peers),
                      web_seeds=opts.web_seeds, own_names=metainfo.own_names(meta), recheck=opts.check,
                      max_connections=cfg.max_connections)
    host, port = opts.serve
    sopts = serving.ServeOptions(host=host, port=port, prefetch=opts.prefetch,
                                 piece_timeout=opts.piece_timeout if opts.piece_timeout is not None else 60.0,
                                 parent_pid=opts.parent_pid, json_output=opts.json_output)
    log.info("%s %s: serving %d files from %s", meta.name, meta.info_hash, len(files), directory / meta.name)
    return serving.run(meta, spec, sopts, serving.announce_line(opts.json_output))


def choose_files(meta: metainfo.Metainfo, opts: Options) -> list[plan.PlanFile]:
    files = [plan.PlanFile(i, f.lfn, f.length) for i, f in enumerate(meta.files) if not f.pad]
    chosen = plan.select(files, opts.globs)
    if opts.nrandom is not None:
        chosen = plan.sample(chosen, opts.nrandom, opts.sample_seed)
    if opts.shard is not None:
        chosen = plan.shard(chosen, *opts.shard)
        if not chosen:
            raise UsageError("--shard", f"{opts.shard[0]}/{opts.shard[1]}: this share is empty "
                             f"(fewer files than shards)")
    return chosen


def repo_hint(cfg: GetConfig) -> str:
    """How to name another repository, said when the default one is not there."""
    if cfg.repo != GetConfig().repo:
        return ""
    return " (no repository was named: set one with --repo URL, $BTSWARM_REPO or [get] repo in the config file)"


def checksums(record: dict[str, Any] | None) -> dict[str, str]:
    if not record:
        return {}
    return {f["lfn"]: f["adler32"] for f in record.get("files", [])
            if isinstance(f, dict) and isinstance(f.get("lfn"), str) and isinstance(f.get("adler32"), str)}


async def resolve(target: Target, cfg: GetConfig, peers: Sequence[tuple[str, int]],
                  info_hash: str | None = None) -> tuple[Resolved, metainfo.Metainfo, dict[str, str]]:
    """TARGET → the .torrent bytes (and the repository record), parsed, plus site names for the summary."""
    async with client_session(cfg.ca_file) as session:
        client = Client(cfg.repo, session, hint=repo_hint(cfg))
        if target.kind == "file":
            try:
                resolved = Resolved(Path(target.value).read_bytes(), None)
            except OSError as exc:
                raise UsageError(target.value, f"cannot read ({exc.strerror})") from None
        elif target.kind == "url":
            resolved = Resolved(await client.fetch(target.value), None)
        elif target.kind == "name":
            resolved = await client.resolve(target.value, info_hash)
        else:
            resolved = await resolve_magnet(client, target, cfg, peers)
        if target.kind == "file" and (why := not_a_torrent(resolved.torrent)):
            raise MetainfoError(target.value, why)
        meta = metainfo.parse(resolved.torrent, subject=target.value)
        sites = await client.site_names(meta.trackers())
        return resolved, meta, sites


async def resolve_magnet(client: Client, target: Target, cfg: GetConfig,
                         peers: Sequence[tuple[str, int]]) -> Resolved:
    """A magnet: the repository's .torrent for its name and info-hash, else the metadata from peers."""
    if target.display_name:
        try:
            return await client.resolve(target.display_name, target.info_hash)
        except (BtswarmError, RepoError) as exc:
            log.info("magnet: repository has no %s (%s); asking peers for the metadata", target.display_name, exc)
    from btget.metadata import fetch_metadata

    loop = asyncio.get_running_loop()
    all_peers = list(peers) + [parse_hostport(p, "magnet x.pe") for p in target.peers]
    data = await loop.run_in_executor(None, fetch_metadata, target.value, all_peers, cfg.listen,
                                      cfg.timeout or 60.0)
    return Resolved(data, None)
