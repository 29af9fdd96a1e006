"""bt-get: fetch a dataset with BitTorrent from every site and peer that holds it.

`main` is the one place where errors become exit statuses and one-line
messages (`bt-get: error: subject: problem`; a traceback with -vv).
Results go to stdout (a summary, or one JSON document with --json);
progress and logs go to stderr.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import json
import logging
import os
import sys
import time
import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import click

from torrents import did as dids
from torrents import log as btlog
from torrents.cli import command_settings, fail, run_main
from torrents import access, measuring, metainfo, proxyenv
from torrents.errors import BtswarmError, ConfigError, MetainfoError, NotFound, UsageError
from torrents.exitstatus import ExitStatus, status_for
from torrents.hostport import parse_hostport
from torrents.infohash import parse_info_hash
from torrents.servicekit import tls
from torrents.servicekit.httpclient import client_session
from torrents.units import parse_duration

from btget import config as get_config
from btget.config import GetConfig
from btget.display import readout, result
from btget.display.progress import make_display
from btget.errors import RepoError
from btget.resolve import bearer, peercert, plan, reach, targets
from btget.resolve.client import Client, Resolved
from btget.resolve.target import Target, classify, not_a_torrent, placement
from btget.transfer import download, sitechoice, timeline, webseeds

log = logging.getLogger("btget")
SERVE_DEFAULT = "127.0.0.1:8765"


@click.command(name="bt-get", context_settings=command_settings)
@click.version_option(package_name="btswarm", prog_name="bt-get")
@click.argument("targets", nargs=-1, metavar="[TARGET]...")
@click.option("-i", "--input-file", "lists", multiple=True, metavar="LIST",
              help="Also every TARGET in LIST, one a line ('#' comments; '-': standard input).")
@click.option("-o", "--output", metavar="DIR", help="Download into DIR/NAME/ (default: config [get] output, or .).")
@click.option("--scope-subdir", is_flag=True,
              help="A Rucio DID scope:name goes to DIR/scope/name/ (default DIR/name/), as rucio download does.")
@click.option("--repo", metavar="URL", help="Torrent repository URL (default: $BTSWARM_GET_REPO, then config).")
@click.option("--config", "config_path", metavar="FILE", help="Configuration file (TOML).")
@click.option("--ca-file", metavar="PEM", help="CAs trusted besides the system's for https repository and trackers "
              "(default: $BTSWARM_GET_CA_FILE, then config [get] ca_file).")
@click.option("--token-file", metavar="FILE", help="The bearer token for members-only datasets (default: config "
              "[get] token_file, then $BEARER_TOKEN, $BEARER_TOKEN_FILE, $XDG_RUNTIME_DIR/bt_u$UID, /tmp/bt_u$UID).")
@click.option("--peer-cert", metavar="PEM", help="Your peer certificate for restricted datasets (default: "
              "config [get] peer_cert); with --peer-key and --peer-ca.")
@click.option("--peer-key", metavar="PEM", help="The private key of --peer-cert (made on this host, never sent).")
@click.option("--peer-ca", metavar="PEM", help="The federation's peer CA, root of restricted datasets' swarms.")
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
@click.option("--max-rate", metavar="RATE", help="Cap this run's download rate, all workers together "
              "(50MB/s, 400mbit; 0: none; default config [get] max_rate).")
@click.option("--max-upload-rate", metavar="RATE", help="Cap this run's upload rate, all workers together "
              "(while fetching and seeding on).")
@click.option("--check", is_flag=True, help="Ignore saved resume state; re-hash what is already on disk.")
@click.option("--web-seed", "web_seeds", multiple=True, metavar="URL", help="Extra HTTP source (BEP 19).")
@click.option("--no-web-seeds", is_flag=True, help="Never fetch from the sites' web seeds (HTTP), only from peers.")
@click.option("--web-seeds-always", is_flag=True,
              help="Fetch from the sites' web seeds from the start, beside peers (default: only when no peer "
                   "sends anything, e.g. behind a firewall that blocks peer ports).")
@click.option("--no-proxy", is_flag=True, help="Ignore http_proxy, https_proxy and no_proxy: every connection "
              "direct (default: config [get] proxy, env).")
@click.option("--closed", is_flag=True, help="This host accepts no inbound connection (NAT, a closed firewall): "
              "the tracker is told, and never hands it out to other peers (default: config [get] closed).")
@click.option("--prefer-site", "prefer_sites", multiple=True, metavar="NAME",
              help="Fetch from this site first, the others only while it sends nothing (repeatable; default: "
                   "config [get] prefer_sites).")
@click.option("--exclude-site", "exclude_sites", multiple=True, metavar="NAME",
              help="Never connect to this site nor use its web seeds (repeatable; default: config [get] "
                   "exclude_sites).")
@click.option("--peer", "peers", multiple=True, metavar="IP:PORT", help="Extra peer to connect to (repeatable).")
@click.option("--listen", metavar="IP", help="Listen on this address only and make every connection from it (a "
                                             "multi-homed host); default: every address, IPv4 and IPv6.")
@click.option("--json", "json_output", is_flag=True, help="Print one JSON document on stdout.")
@click.option("--serve", metavar="[IP:PORT]", is_flag=False, flag_value=SERVE_DEFAULT, default=None,
              help=f"Do not download first: serve the files over HTTP on a loopback address (default "
                   f"{SERVE_DEFAULT}), fetching the pieces each read needs.")
@click.option("--no-prefetch", is_flag=True, help="With --serve: fetch only what is read (and read ahead).")
@click.option("--piece-timeout", metavar="DURATION", help="With --serve: answer 503 when a piece has not "
              "arrived in this time (default 60s).")
@click.option("--parent-pid", type=int, hidden=True, help="With --serve: stop when this process is gone.")
@click.option("--search", metavar="QUERY", help="List the datasets whose names hold every word of QUERY (any part "
              "of a name, any case; '' lists all): size, files, live seeds, T2 and T3 sites holding each. No "
              "download.")
@click.option("--list-files", "list_files", is_flag=True, help="List TARGET's files (size, bytes, adler32, LFN), or "
              "those --files/--nrandom/--shard would pick. No download.")
@click.option("--share", is_flag=True, help="After a verified download of the whole dataset, share it for the long "
              "run: this T3's bt-server ([server] in the config, kind = \"T3\") registers it with the federation "
              "and seeds it on demand after bt-get ends (docs/bt-get.md, Sharing).")
@click.option("-q", "--quiet", is_flag=True, help="No progress display and no summary.")
@click.option("-v", "--verbose", count=True, help="-v: log to stderr; -vv: debug, tracebacks.")
def command(**opts: Any) -> int:
    """Download TARGET: a dataset NAME, a Rucio DID (scope:dataset, scope:container, scope:file), a
    FILE.torrent, an http(s) URL of one, or a magnet link; several TARGETs one after the other.

    Or look before downloading: `bt-get --search QUERY`, `bt-get TARGET --list-files`."""
    btlog.setup(opts["verbose"], "bt-get")
    return get(Options.from_click(opts))


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point (the shared contract: torrents.cli)."""
    timeline.mark("imported")
    return run_main(command, "bt-get", argv)


@dataclass(frozen=True)
class Options:
    """The command line, parsed and checked (durations in seconds, peers as tuples)."""
    target: str | None  # the one TARGET (None with several: `targets`)
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
    max_rate: str | None
    max_upload_rate: str | None
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
    scope_subdir: bool = False
    search: str | None = None
    list_files: bool = False
    share: bool = False
    web_mode: str | None = None  # --no-web-seeds: off, --web-seeds-always: always (else the config's)
    ca_file: str | None = None
    targets: tuple[str, ...] = ()  # every TARGET, the command line's then the lists' (btget/resolve/targets.py)
    proxy: str | None = None  # --no-proxy: off (else the config's)
    closed: bool | None = None  # --closed: True (else the config's)
    token_file: str | None = None
    peer_cert: str | None = None
    peer_key: str | None = None
    peer_ca: str | None = None
    prefer_sites: tuple[str, ...] = ()
    exclude_sites: tuple[str, ...] = ()


    @classmethod
    def from_click(cls, o: dict[str, Any]) -> "Options":
        everything = targets.gather(o.get("targets") or (), [_read_list(p) for p in o.get("lists") or ()])
        o = {**o, "target": everything[0] if len(everything) == 1 else None, "many": len(everything) > 1,
             "targets": tuple(everything), "lists": o.get("lists") or ()}
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
        if o.get("no_web_seeds") and o.get("web_seeds_always"):
            raise UsageError("--no-web-seeds", "contradicts --web-seeds-always")
        if o.get("no_web_seeds") and o["web_seeds"]:
            raise UsageError("--no-web-seeds", "contradicts --web-seed")
        web_mode = "off" if o.get("no_web_seeds") else "always" if o.get("web_seeds_always") else None
        _check_modes(o)
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
            max_rate=o.get("max_rate"), max_upload_rate=o.get("max_upload_rate"),
            check=o["check"], web_seeds=tuple(o["web_seeds"]), peers=tuple(peers), listen=o["listen"],
            json_output=o["json_output"], quiet=o["quiet"], verbose=o["verbose"],
            scope_subdir=o.get("scope_subdir", False), web_mode=web_mode, ca_file=o.get("ca_file"),
            search=o.get("search"), list_files=bool(o.get("list_files")), share=bool(o.get("share")),
            targets=o["targets"], proxy="off" if o.get("no_proxy") else None,
            closed=True if o.get("closed") else None, token_file=o.get("token_file"),
            peer_cert=o.get("peer_cert"), peer_key=o.get("peer_key"), peer_ca=o.get("peer_ca"),
            prefer_sites=tuple(o.get("prefer_sites") or ()), exclude_sites=tuple(o.get("exclude_sites") or ()))


def _read_list(path: str) -> tuple[str, str]:
    """-i LIST: (its name for errors, its text)."""
    if path == "-":
        return "<stdin>", click.get_text_stream("stdin").read()
    try:
        return path, Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(path, f"cannot read the target list ({getattr(exc, 'strerror', None) or exc})") from None



def _check_modes(o: dict[str, Any]) -> None:
    """--search (no TARGET), --list-files and --share (a TARGET): which go together."""
    if o.get("search") is not None:
        if o.get("targets"):
            raise UsageError("--search", f"takes one QUERY and no TARGET (quote several words: --search "
                                         f"'{o['search']} {' '.join(o['targets'])}')")
        for key in ("list_files", "share", "serve"):
            if o.get(key):
                raise UsageError("--search", f"not with --{key.replace('_', '-')}")
        return
    if not o.get("targets"):
        if o.get("lists"):
            raise UsageError(o["lists"][0], "names no TARGET (only comments or blank lines)")
        raise UsageError("TARGET", "missing: a dataset NAME, a FILE.torrent, a URL or a magnet (or --search QUERY "
                                   "to find one)")
    if o.get("many"):
        # Each of these acts on one dataset; --files, --nrandom and --shard apply to each dataset in turn.
        for key, flag in (("list_files", "--list-files"), ("share", "--share"), ("serve", "--serve"),
                          ("info_hash", "--info-hash")):
            if o.get(key):
                raise UsageError(flag, f"takes one TARGET ({len(o['targets'])} given): run bt-get once for each")
    if o.get("list_files"):
        for key in ("share", "serve"):
            if o.get(key) is not None and o.get(key) is not False:
                raise UsageError("--list-files", f"not with --{key} (--list-files downloads nothing)")
    if o.get("share"):
        # A T3 shares a dataset only whole: a part would be another info-hash, another swarm.
        for key, flag in (("globs", "--files"), ("nrandom", "--nrandom"), ("shard", "--shard"), ("serve", "--serve")):
            if o.get(key):
                raise UsageError("--share", f"not with {flag}: only a whole dataset can be shared (the same "
                                            "info-hash as its sites')")


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
    """Config file < environment ($BTSWARM_GET_*) < flags."""
    overrides = {"repo": opts.repo, "output": opts.output, "listen": opts.listen, "seed_time": opts.seed_time,
                 "seed_ratio": opts.seed_ratio, "timeout": opts.timeout, "stall_timeout": opts.stall_timeout,
                 "web_seeds": opts.web_mode, "ca_file": opts.ca_file, "token_file": opts.token_file,
                 "peer_cert": opts.peer_cert, "peer_key": opts.peer_key, "peer_ca": opts.peer_ca,
                 "max_rate": opts.max_rate, "max_upload_rate": opts.max_upload_rate, "proxy": opts.proxy,
                 "closed": opts.closed, "prefer_sites": opts.prefer_sites or None,
                 "exclude_sites": opts.exclude_sites or None}

    return get_config.load(opts.config_path, overrides=overrides)


def get(opts: Options) -> int:
    cfg = configure(opts)
    timeline.mark("configured")
    token = token_of(cfg)  # a token file named but unreadable: said now, before anything is fetched
    if opts.search is not None:
        from btget.display import browse

        return browse.search(cfg.repo, opts.search, json_output=opts.json_output, hint=repo_hint(cfg), token=token,
                             ca=cfg.ca_file, proxies=proxies_of(cfg))

    tls.trust_in_libtorrent(cfg.ca_file)  # the workers' https announces (they inherit the environment)
    if opts.target is None:
        return get_many(opts, cfg, opts.targets)
    target = classify(opts.target, os.path.isfile)
    if opts.info_hash is not None and target.kind != "name":
        raise UsageError("--info-hash", "only with a dataset NAME (a .torrent or magnet names its own version)")
    found = asyncio.run(resolve_target(target, cfg, opts, site_names=not opts.list_files))
    if isinstance(found, Container):
        for key, flag in (("serve", "--serve"), ("list_files", "--list-files"), ("share", "--share")):
            if getattr(opts, key):
                raise UsageError(flag, f"{found.did} is a Rucio container of {len(found.datasets)} datasets: "
                                       f"{flag} takes one dataset (bt-get DATASET {flag})")
        return get_many(opts, cfg, opts.targets, {found.did: found})
    if opts.serve is not None:
        if found.only is not None:
            raise UsageError("--serve", f"{opts.target} is one file of {found.meta.name}: --serve serves a whole "
                                        f"dataset (bt-get {found.meta.name} --serve)")
        return serve(opts, cfg, target, found)

    if opts.list_files:
        from btget.display import browse

        return browse.list_files(found.meta, found.resolved.record, choose_files(found.meta, opts, found.only),
                                 json_output=opts.json_output)
    if opts.share and found.only is not None:
        raise UsageError("--share", f"{opts.target} is one file of {found.meta.name}: only a whole dataset can be "
                                    "shared")
    display = make_display(opts.quiet, opts.json_output)
    fetched = fetch(opts, cfg, target, found, display)
    doc, error, shared = fetched.doc, fetched.error, fetched.shared
    assert doc is not None  # one target: an empty share is an error (choose_files)
    doc["timeline"] = timeline.marks()
    if opts.json_output:
        click.echo(json_text(doc))
    elif not opts.quiet:
        click.echo(result.human(doc))
        if isinstance(shared, dict):
            from btget.transfer import handover

            click.echo(handover.human(shared))
    if error is not None:
        raise error
    if isinstance(shared, BtswarmError):
        raise shared
    return int(doc["exit_code"])


def json_text(doc: dict[str, Any]) -> str:
    # Indented for a person at a terminal; compact for a pipe, where the C
    # encoder writes a 10,000-file document in milliseconds, not seconds.
    return json.dumps(doc, indent=2 if sys.stdout.isatty() else None)


@dataclass(frozen=True)
class Found:
    """A target resolved to one dataset: its .torrent and record, parsed, and the sites' names."""
    resolved: Resolved
    meta: metainfo.Metainfo
    sites: dict[str, str]
    only: str | None = None  # a file DID: the one LFN it names


@dataclass(frozen=True)
class Container:
    """A Rucio container DID: the datasets it holds, as the repository lists them."""
    did: str
    datasets: tuple[str, ...]


@dataclass(frozen=True)
class Fetched:
    doc: dict[str, Any] | None  # the --json document; None: nothing of this dataset was selected (--shard)
    error: BtswarmError | None = None
    shared: dict[str, Any] | BtswarmError | None = None


# What each kind of TARGET is called in the summary and --json (a DID's kind is the repository's word).
KINDS = {"name": "dataset", "file": "torrent", "url": "url", "magnet": "magnet"}


async def resolve_target(target: Target, cfg: GetConfig, opts: Options, *, site_names: bool = True
                         ) -> Found | Container:
    """TARGET → one dataset (`resolve`), or, for a Rucio DID that names no dataset, what the repository's
    GET /api/dids says it is: a container (its datasets, fetched one by one) or a file (its dataset,
    that file only). A name that is none of these keeps the dataset's NotFound and its suggestions."""
    try:
        found = Found(*await resolve(target, cfg, opts.peers, opts.info_hash, site_names=site_names))
        if target.info_hash and found.meta.info_hash != target.info_hash:
            raise RepoError(target.value, f"the repository's torrent has info-hash {found.meta.info_hash}, "
                            f"not the magnet's {target.info_hash}")
        return found
    except NotFound:
        if target.kind != "name" or dids.as_did(target.value) is None:
            raise
        async with client_session(cfg.ca_file, proxies=proxies_of(cfg)) as session:
            doc = await Client(cfg.repo, session, hint=repo_hint(cfg), token=token_of(cfg)).did(target.value)
        if doc is None or doc.get("type") not in ("container", "file") or not doc["datasets"]:
            raise
    kind = doc["type"]
    if opts.info_hash is not None:
        raise UsageError("--info-hash", f"{target.value} is a Rucio {kind}: --info-hash names a version of one "
                                        "dataset")
    if kind == "container":
        return Container(target.value, tuple(str(d) for d in doc["datasets"]))
    holder = str(doc["datasets"][0])  # a file in several datasets is the same bytes in each: the first by name
    log.info("%s: a file of %s", target.value, ", ".join(map(str, doc["datasets"])))
    return Found(*await resolve(Target("name", holder), cfg, opts.peers, None, site_names=site_names),
                 only=str(doc["file"]))


def reached(cfg: GetConfig, found: Found) -> tuple[Found, reach.Reach, proxyenv.Proxies]:
    """What a proxy or a closed host means for this dataset's download (btget/resolve/reach.py), and its .torrent as
    libtorrent is given it: on a closed host, its announce URLs say so (the info-hash stays)."""
    proxies = proxies_of(cfg)
    way = reach.plan(proxies, found.meta.trackers(), cfg.closed)
    if way.closed:
        torrent = metainfo.with_trackers(found.resolved.torrent, lambda url: reach.announce_url(url, True))
        found = dataclasses.replace(found, resolved=Resolved(torrent, found.resolved.record))
    return found, way, proxies


def fetch(opts: Options, cfg: GetConfig, target: Target, found: Found, display: download.Display) -> Fetched:
    """Download one resolved dataset (the files chosen); errors after the first byte are in the result."""
    found, way, proxies = reached(cfg, found)
    resolved, meta, sites = found.resolved, found.meta, found.sites
    selected = choose_files(meta, opts, found.only, empty_ok=opts.target is None)
    if not selected:
        return Fetched(None)
    cert_files, from_repo = peer_wire(opts, cfg, found)
    choice = sitechoice.SiteChoice(cfg.prefer_sites, cfg.exclude_sites)
    prefer_ips, exclude_ips = sitechoice.addresses(choice, sites)
    workers, capped = plan.worker_count(opts.workers if opts.workers is not None else cfg.workers,
                                        os.cpu_count() or 1, len(selected))
    shares = tuple(tuple(s) for s in plan.split(selected, workers) if s)
    subdirs, folder = placement(meta.name, resolved.record, opts.scope_subdir)
    directory = Path(cfg.output, *subdirs).resolve()
    peers = opts.peers + tuple(parse_hostport(p, "magnet x.pe") for p in target.peers)
    job = download.Job(
        meta=meta, torrent=resolved.torrent, directory=directory, shares=shares, selected=tuple(selected),
        peers=peers, web=web_rule(cfg, meta, resolved.record, opts.web_seeds, bool(peers), way.unreachable, choice),
        prefer_ips=prefer_ips, exclude_ips=exclude_ips, excluded=choice.exclude,
        proxies=proxies, tracker_proxy=way.tracker_proxy, closed=way.closed,
        listen_ip=cfg.listen, recheck=opts.check, max_connections=cfg.max_connections,
        seed_time=cfg.seed_time, seed_ratio=cfg.seed_ratio, linger=cfg.linger, timeout=cfg.timeout,
        stall_timeout=cfg.stall_timeout, blocked_after=cfg.blocked_after, max_rate=cfg.max_rate, max_upload_rate=cfg.max_upload_rate,
        checksums=checksums(resolved.record), folder=folder,
        token=web_seed_token(cfg, resolved.record), peer_cert=cert_files, peer_cert_repo=from_repo,
        site_peers=holding(sites, resolved.record) if measuring.site_share() else ())
    log.info("%s %s: %d files, %d bytes, %d workers, into %s", meta.name, meta.info_hash, len(selected),
             sum(f.size for f in selected), len(shares), job.root)
    display.note(readout.heading(meta.name, len(selected), sum(f.size for f in selected), str(job.root)))
    if way.note:
        display.note(way.note)
    if choice:
        display.note(sitechoice.said(choice))
    if capped:
        display.note(capped, warning=True)
    outcome = download.run(job, display)
    error = outcome.error
    status = status_for(error) if error is not None else ExitStatus.OK
    raw_sources = outcome.source_samples[-1][1] if outcome.source_samples else {}
    web_sites = {w.endpoint: w.site for w in job.web.sources if w.site}
    failures, banned = result.bad_sources(outcome.workers, sites, outcome.endpoints, web_sites)
    doc = result.document(meta, str(job.root), {f.index for f in selected}, outcome.files,
                          outcome.verify_results, outcome.workers,
                          result.name_sources(raw_sources, sites, outcome.endpoints, web_sites),
                          outcome.seconds, status, hash_failures_by_source=failures, banned=banned,
                          web_switches=outcome.web_switches)
    doc["sources_over_time"] = result.sources_over_time(outcome.source_samples, sites, outcome.endpoints, web_sites)
    if choice:
        doc["sites_chosen"] = {"preferred": list(choice.prefer), "excluded": list(choice.exclude)}
    shared = share(opts, directory / meta.name, meta.info_hash, doc) if opts.share and error is None else None
    return Fetched(doc, error, shared)


def get_many(opts: Options, cfg: GetConfig, texts: Sequence[str], known: dict[str, Container] | None = None) -> int:
    """Every TARGET in turn, each as a lone one is resolved and fetched (a container: each of its
    datasets); one display, one summary or --json document, and the worst status (btget/resolve/targets.py).
    A target that fails is said and the next one tried; Ctrl-C ends the run."""
    display = make_display(opts.quiet, opts.json_output)
    started = time.monotonic()
    entries: list[tuple[targets.Outcome, list[dict[str, Any]]]] = []
    for text in texts:
        outcome, docs = fetch_target(opts, cfg, text, display, (known or {}).get(text))
        entries.append((outcome, docs))
        if outcome.status is ExitStatus.INTERRUPTED:
            break
    outcomes = [o for o, _ in entries]
    status = targets.worst(o.status for o in outcomes)
    if opts.json_output:
        click.echo(json_text({"targets": [{**o.to_json(), "datasets": docs} for o, docs in entries],
                              "totals": targets.totals(outcomes, time.monotonic() - started),
                              "exit_status": status.name, "exit_code": int(status), "timeline": timeline.marks()}))
    elif not opts.quiet:
        click.echo("\n".join(targets.summary_lines(outcomes, status)))
    return int(status)


def fetch_target(opts: Options, cfg: GetConfig, text: str, display: download.Display,
                 container: Container | None = None) -> tuple[targets.Outcome, list[dict[str, Any]]]:
    """One TARGET of many: how it ended, and the --json document of each of its datasets."""
    kind = "container" if container else "dataset"
    try:
        target = classify(text, os.path.isfile)
        kind = KINDS[target.kind]
        found = container or asyncio.run(resolve_target(target, cfg, opts))
    except KeyboardInterrupt:
        return targets.Outcome(text, kind, ExitStatus.INTERRUPTED, "interrupted"), []
    except BtswarmError as exc:
        return targets.Outcome(text, kind, ExitStatus(fail("bt-get", exc, opts.verbose)), str(exc)), []
    if isinstance(found, Container):
        docs = []
        for name in found.datasets:
            docs.append(fetch_dataset(opts, cfg, Target("name", name), display))
            if docs[-1]["exit_code"] == ExitStatus.INTERRUPTED:
                break
        return outcome_of(text, "container", docs), docs
    doc = fetch_dataset(opts, cfg, target, display, found)
    return outcome_of(text, "file" if found.only else kind, [doc]), [doc]


def fetch_dataset(opts: Options, cfg: GetConfig, target: Target, display: download.Display,
                  found: Found | None = None) -> dict[str, Any]:
    """One dataset of a run of many: its --json document, or (it failed before the download began)
    `{"dataset", "exit_status", "exit_code", "error"}`; every error said on stderr as it happens."""
    try:
        if found is None:
            found = Found(*asyncio.run(resolve(target, cfg, opts.peers)))
        fetched = fetch(opts, cfg, target, found, display)
    except KeyboardInterrupt:
        return {"dataset": target.value, "exit_status": ExitStatus.INTERRUPTED.name,
                "exit_code": int(ExitStatus.INTERRUPTED), "error": "interrupted"}
    except BtswarmError as exc:
        status = ExitStatus(fail("bt-get", exc, opts.verbose))
        return {"dataset": target.value, "exit_status": status.name, "exit_code": int(status), "error": str(exc)}
    if fetched.doc is None:
        note = f"{found.meta.name}: no file in share {opts.shard[0]}/{opts.shard[1]}" if opts.shard else \
            f"{found.meta.name}: no file selected"
        display.note(note)
        return {"dataset": found.meta.name, "exit_status": ExitStatus.OK.name, "exit_code": 0, "error": None,
                "bytes_total": 0, "bytes_done": 0, "bytes_downloaded": 0, "note": note}
    doc = fetched.doc
    if fetched.error is not None:
        fail("bt-get", fetched.error, opts.verbose)
        doc["error"] = str(fetched.error)
    if not opts.json_output and not opts.quiet:
        click.echo(result.human(doc))
    return doc


def outcome_of(text: str, kind: str, docs: Sequence[dict[str, Any]]) -> targets.Outcome:
    """A target's outcome from its datasets' documents: the worst status, the first error, the bytes summed."""
    status = targets.worst(d["exit_code"] for d in docs)
    failed = [d for d in docs if d.get("error")]
    error = None
    if failed:
        error = failed[0]["error"] if len(docs) == 1 else \
            f"{len(failed)} of {len(docs)} datasets failed; first: {failed[0]['error']}"
    return targets.Outcome(text, kind, status, error, tuple(d["dataset"] for d in docs),
                           sum(d.get("bytes_total", 0) for d in docs), sum(d.get("bytes_done", 0) for d in docs),
                           sum(d.get("bytes_downloaded", 0) for d in docs))


def share(opts: Options, directory: Path, info_hash: str, doc: dict[str, Any]) -> dict[str, Any] | BtswarmError:
    """--share: hand the verified dataset to this T3's bt-server (btget/transfer/handover.py); said in `doc` either way."""
    from btget.transfer import handover

    try:
        shared = handover.share(directory, info_hash, opts.config_path)
    except handover.ShareError as exc:
        doc["share"] = {"error": str(exc)}
        doc["exit_status"], doc["exit_code"] = exc.exit_status.name, int(exc.exit_status)
        return exc
    doc["share"] = shared
    return shared


def token_of(cfg: GetConfig) -> bearer.TokenSource | None:
    """The user's bearer token (btget/resolve/bearer.py): where every request of this run finds it (looked for once
    a run: the source is read again for each request, so a renewed token file is still used)."""
    return _discovered(cfg.token_file or None)


_discovered = functools.cache(bearer.discover)


def web_seed_token(cfg: GetConfig, record: dict[str, Any] | None) -> bearer.TokenSource | None:
    """The token a run's web seeds get: a members-only dataset's only (the repository's record says so)."""
    return token_of(cfg) if record and record.get("restricted") is True else None


def peer_wire(opts: Options, cfg: GetConfig, found: Found) -> tuple[tuple[str, str, str], tuple[str, str]]:
    """Restricted or not (the repository's record, or this host's [access]), and with which certificate:
    said now, in one line, before a worker starts (btget/resolve/peercert.py) → (peer CA, certificate, key) or (),
    and (repository, CA file) when the repository gave the certificate (the workers ask it again when it is
    due for renewal)."""
    name, record = found.meta.name, found.resolved.record
    # The repository's word alone makes a peer certificate needed only when one is to be had (the peer CA is
    # given): without, a member's token still reads the sites' web seeds.
    restricted = _access(opts.config_path).is_restricted(name) or \
        bool(cfg.peer_ca and record and record.get("restricted") is True)
    cert, key = cfg.peer_cert, cfg.peer_key
    from_repo: tuple[str, str] = ()
    if restricted and cfg.peer_ca and not cert and not key:
        # Only the CA given: a certificate for this dataset from the repository, for a key made here, with
        # the user's token (the repository signs for the datasets it reads).
        cert, key = peercert.request_from_repo(cfg.repo, cfg.ca_file, name, token=token_of(cfg))
        from_repo = (cfg.repo, cfg.ca_file)
    files = peercert.peer_cert_for(name, restricted, cfg.peer_ca, cert, key, dt.datetime.now(dt.timezone.utc))
    return files, from_repo if files else ()


_access = functools.cache(access.load)  # [access] of this host's configuration, read once a run


def serve(opts: Options, cfg: GetConfig, target: Target, found: Found) -> int:

    """--serve: join the swarm and serve the files over HTTP until stopped (btget.swarmread.serve)."""
    from btget.swarmread import serve as serving
    from btget.worker.spec import WorkerSpec

    found, way, proxies = reached(cfg, found)
    resolved, meta = found.resolved, found.meta
    cert_files, from_repo = peer_wire(opts, cfg, found)

    files = plan_files(meta)
    directory = Path(cfg.output).resolve()
    sdir = directory / meta.name / download.STATE_DIR
    sdir.mkdir(parents=True, exist_ok=True)
    # The state of a one-worker download of every file: a `bt-get NAME` afterwards resumes from it.
    spec = WorkerSpec(index=1, torrent=resolved.torrent, save_path=str(directory), state_dir=str(sdir),
                      key=plan.share_key(files), wanted=tuple(f.index for f in files), listen_ip=cfg.listen,
                      peers=opts.peers + tuple(parse_hostport(p, "magnet x.pe") for p in target.peers),
                      # No fall-back here (btget/transfer/webseeds.py decides only downloads): the torrent's web
                      # seeds from the start with --web-seeds-always or behind a proxy, else only those given.
                      web_seeds=tuple(dict.fromkeys(opts.web_seeds + (
                          meta.url_list if cfg.web_seeds == "always" or (way.unreachable and cfg.web_seeds != "off")
                          else ()))),
                      own_names=metainfo.own_names(meta), recheck=opts.check,
                      max_connections=cfg.max_connections, proxies=proxies, tracker_proxy=way.tracker_proxy,
                      token=web_seed_token(cfg, resolved.record), peer_cert=cert_files, peer_cert_repo=from_repo)

    host, port = opts.serve
    sopts = serving.ServeOptions(host=host, port=port, prefetch=opts.prefetch,
                                 piece_timeout=opts.piece_timeout if opts.piece_timeout is not None else 60.0,
                                 parent_pid=opts.parent_pid, json_output=opts.json_output)
    log.info("%s %s: serving %d files from %s", meta.name, meta.info_hash, len(files), directory / meta.name)
    return serving.run(meta, spec, sopts, serving.announce_line(opts.json_output))


def proxies_of(cfg: GetConfig) -> proxyenv.Proxies:
    """The proxies every HTTP request of this run goes through: the environment's, or none with --no-proxy."""
    return proxyenv.from_environ(os.environ) if cfg.proxy == "env" else proxyenv.NONE


def web_rule(cfg: GetConfig, meta: metainfo.Metainfo, record: dict[str, Any] | None, given: Sequence[str],
             peers: bool, unreachable: str = "", choice: sitechoice.SiteChoice = sitechoice.SiteChoice()
             ) -> webseeds.Rule:
    """The web seeds (the torrent's url-list, named by site from the repository's record, then --web-seed;
    a site left out's dropped, a preferred one's first) and when to use them."""
    by_url: dict[str, str] = {}
    for entry in (record or {}).get("web_seeds") or ():
        if isinstance(entry, dict) and isinstance(entry.get("url"), str) and isinstance(entry.get("site"), str):
            by_url.setdefault(entry["url"], entry["site"])
    urls = list(dict.fromkeys([*meta.url_list, *given]))
    sources = sitechoice.web_sources([webseeds.Source(u, by_url.get(u)) for u in urls], choice)
    return webseeds.Rule(mode=webseeds.Mode(cfg.web_seeds), sources=sources,
                         after=cfg.web_seed_after, peer_sources=peers or bool(meta.trackers()),
                         unreachable=unreachable)


def choose_files(meta: metainfo.Metainfo, opts: Options, only: str | None = None, *,
                 empty_ok: bool = False) -> list[plan.PlanFile]:
    """The files --files, --nrandom and --shard pick (or the one a file DID names). `empty_ok`: a share
    with no file of this dataset is no error (one dataset of many)."""
    files = plan_files(meta)
    if only is not None:
        for key, flag in (("globs", "--files"), ("nrandom", "--nrandom"), ("shard", "--shard")):
            if getattr(opts, key):
                raise UsageError(flag, f"not with a file DID (it names one file: {only} of {meta.name})")
        chosen = [f for f in files if f.lfn == only]
        if not chosen:
            raise RepoError(meta.name, f"the repository names it as the dataset of {only}, but its torrent has "
                                       "no such file")
        return chosen
    chosen = plan.select(files, opts.globs)
    if opts.nrandom is not None:
        chosen = plan.sample(chosen, opts.nrandom, opts.sample_seed)
    if opts.shard is not None:
        chosen = plan.shard(chosen, *opts.shard)
        if not chosen and not empty_ok:
            raise UsageError("--shard", f"{opts.shard[0]}/{opts.shard[1]}: this share is empty "
                             f"(fewer files than shards)")
    return chosen


def plan_files(meta: metainfo.Metainfo) -> list[plan.PlanFile]:
    """Every file but padding, read from the file list's columns (no FileEntry made per file)."""
    fl = meta.files
    return [plan.PlanFile(i, lfn, size) for i, (lfn, size) in enumerate(zip(fl.lfns, fl.lengths))
            if not fl.is_pad(i)]


def repo_hint(cfg: GetConfig) -> str:
    """How to name another repository, said when the default one is not there."""
    if cfg.repo != GetConfig().repo:
        return ""
    return " (no repository was named: set one with --repo URL, $BTSWARM_GET_REPO or [get] repo in the config file)"


def holding(sites: dict[str, str], record: dict[str, Any] | None) -> tuple[str, ...]:
    """The peer endpoints of the storage sites that hold the dataset (the repository record's `t2_sites`),
    sorted: the sites btget/worker/siteshare.py shares out and slices the pieces among. Without a record (a
    .torrent file, a URL) every site the tracker names."""
    t2 = record.get("t2_sites") if isinstance(record, dict) else None
    if not isinstance(t2, list):
        return tuple(sorted(sites))
    return tuple(sorted(peer for peer, name in sites.items() if name in t2))


def checksums(record: dict[str, Any] | None) -> dict[str, str]:
    if not record:
        return {}
    return {f["lfn"]: f["adler32"] for f in record.get("files", [])
            if isinstance(f, dict) and isinstance(f.get("lfn"), str) and isinstance(f.get("adler32"), str)}


async def resolve(target: Target, cfg: GetConfig, peers: Sequence[tuple[str, int]],
                  info_hash: str | None = None, *, site_names: bool = True
                  ) -> tuple[Resolved, metainfo.Metainfo, dict[str, str]]:
    """TARGET → the .torrent bytes (and the repository record), parsed, plus site names for the summary."""
    async with client_session(cfg.ca_file, proxies=proxies_of(cfg)) as session:
        client = Client(cfg.repo, session, hint=repo_hint(cfg), token=token_of(cfg))

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
        timeline.mark("resolved")
        if target.kind == "file" and (why := not_a_torrent(resolved.torrent)):
            raise MetainfoError(target.value, why)
        meta = metainfo.parse(resolved.torrent, subject=target.value)
        timeline.mark("parsed")
        sites = await client.site_names(meta.trackers()) if site_names else {}
        timeline.mark("sites_named")
        return resolved, meta, sites


async def resolve_magnet(client: Client, target: Target, cfg: GetConfig,
                         peers: Sequence[tuple[str, int]]) -> Resolved:
    """A magnet: the repository's .torrent for its name and info-hash, else the metadata from peers."""
    if target.display_name:
        try:
            return await client.resolve(target.display_name, target.info_hash)
        except (BtswarmError, RepoError) as exc:
            log.info("magnet: repository has no %s (%s); asking peers for the metadata", target.display_name, exc)
    from btget.resolve.metadata import fetch_metadata

    loop = asyncio.get_running_loop()
    all_peers = list(peers) + [parse_hostport(p, "magnet x.pe") for p in target.peers]
    data = await loop.run_in_executor(None, fetch_metadata, target.value, all_peers, cfg.listen,
                                      cfg.timeout or 60.0)
    return Resolved(data, None)
