"""`btswarm up`: tracker, repository and N sites on one host, each site on its own loopback address."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import json
import logging
import os
import secrets
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from urllib.parse import quote

import aiohttp

from btswarm import hosts as hostplan
from btswarm import netns, peerpki, redisserver, ruciofed, shaping, statelock, topology, tundelay
from btswarm.supervisor import StartError, Supervisor
from btswarm import membertoken
from btswarm.testbed import issuer
from torrents import access, sample
from torrents import urls
from torrents.errors import BtswarmError, ConfigError
from torrents.servicekit.httpclient import client_session
from torrents.procs import PortPicker

log = logging.getLogger("btswarm.up")


@dataclass(frozen=True)
class UpOptions:
    state: Path
    data: Path | None = None
    site_data: tuple[Path, ...] = ()  # one directory per site instead of `data` (separate replicas)
    sites: int = 2
    base_port: int = 0  # 0: free ports
    sample_files: int = 29
    sample_size: int = 300 * 2**20
    idle_ttl: float = 600.0
    heartbeat_interval: float = 5.0
    ready_file: Path | None = None
    timeout: float = 300.0
    links: shaping.LinkOptions = shaping.LinkOptions()  # shaped: the federation runs in a namespace of its own
    redis: bool = False  # the trackers keep their state in a Redis: our own, or redis_url
    redis_url: str = ""
    trackers: int = 1  # tracker processes on their own ports, sharing the Redis
    redis_replicas: int = 0  # replicas of our Redis, and three sentinels to fail over to one
    # --rucio: the sites read their datasets from a local Rucio (btswarm/ruciofed.py)
    rucio: bool = False
    rucio_dir: Path | None = None  # default STATE/rucio; one already running there is used
    rucio_scope: str = "demo"
    rucio_refresh: float = 30.0
    web_seed_urls: tuple[str, ...] = ()  # --web-seed-url [SITE=]TEMPLATE: the sites' own doors
    hosts: bool = False  # --hosts: each part on a host (network namespace) of its own (btswarm/hosts.py)
    t3_hosts: int = 2
    # --restricted: members-only datasets (the scopes of --restrict, else of the datasets' DIDs), a token issuer,
    # the tracker and the repository on https, the sites' peer wire of those datasets on SSL (docs/deploy-site.md)
    restricted: bool = False
    restrict: tuple[str, ...] = ()

    def host_plan(self, prefix: str) -> hostplan.HostPlan:
        """The hosts of --hosts, namespaces named PREFIX-HOST; BtswarmError for what --hosts cannot do."""
        unsupported = [("--base-port", bool(self.base_port)), ("--redis", self.redis), ("--trackers", self.trackers > 1),
                       ("--rucio", self.rucio), ("--link-mtu", self.links.mtu != shaping.LO_MTU)]
        for option, given in unsupported:
            if given:
                raise BtswarmError(option, "not with --hosts (each host has its own ports and an Ethernet MTU "
                                           f"of {hostplan.MTU}; a Redis, more trackers and Rucio are not placed "
                                           "on hosts yet)")
        return hostplan.plan(prefix, [topology.site_name(i) for i in range(self.sites)], self.t3_hosts, self.links)

    def link_plan(self) -> tuple[shaping.Link, ...]:
        sites = [(topology.site_name(i), topology.site_ip(i)) for i in range(self.sites)]
        clients = [topology.client_ip(k) for k in range(self.links.client_addresses)]
        return shaping.plan(self.links, sites, clients, topology.BASELINE_IP)


def default_state_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "btswarm" / "up"


def layout(opts: UpOptions, data: Path, site_data: tuple[Path, ...] = (),
           hosts: hostplan.HostPlan | None = None) -> topology.Layout:
    """Addresses and ports: from --base-port (tracker P, repo P+1, site i P+10+2i / P+11+2i, its web seed
    P+520+i) or free; with `hosts`, each part on its host's address and its usual ports."""
    if not 1 <= opts.sites <= 250:
        raise BtswarmError("--sites", f"{opts.sites} is out of range (1-250)")
    if hosts is not None:
        return hosts_layout(opts, data, site_data, hosts)
    port = PortPicker()  # the kernel may pick one free port twice
    sites = []
    for i in range(opts.sites):
        ip = topology.site_ip(i)
        if opts.base_port:
            cport, pport, wport = opts.base_port + 10 + 2 * i, opts.base_port + 11 + 2 * i, opts.base_port + 520 + i
        else:
            cport, pport, wport = port(ip), port(ip), port(ip)
        sites.append(topology.Site(topology.site_name(i), ip, cport, pport, secrets.token_hex(16), wport))
    if not 1 <= opts.trackers <= 8:
        raise BtswarmError("--trackers", f"{opts.trackers} is out of range (1-8)")
    if opts.trackers > 1 and not (opts.redis or opts.redis_url):
        raise BtswarmError("--trackers", "several trackers share their state in Redis: add --redis (or --redis-url)")
    tport = opts.base_port or port("127.0.0.1")
    rport = opts.base_port + 1 if opts.base_port else port("127.0.0.1")
    # With --base-port: more trackers on P+2..P+8, our Redis on P+9.
    more = tuple(opts.base_port + 1 + k if opts.base_port else port("127.0.0.1") for k in range(1, opts.trackers))
    own_redis = opts.redis and not opts.redis_url
    redis_port = (opts.base_port + 9 if opts.base_port else port("127.0.0.1")) if own_redis else 0
    if not 0 <= opts.redis_replicas <= 4:
        raise BtswarmError("--redis-replicas", f"{opts.redis_replicas} is out of range (0-4)")
    if opts.redis_replicas and not own_redis:
        raise BtswarmError("--redis-replicas", "replicates a Redis of our own: give --redis, not --redis-url")
    # With --base-port: replicas on P+780.., sentinels on P+790.. (past every site's and web seed's port).
    replica_ports = tuple(opts.base_port + 780 + k if opts.base_port else port("127.0.0.1")
                          for k in range(opts.redis_replicas))
    sentinel_ports = tuple(opts.base_port + 790 + k if opts.base_port else port("127.0.0.1")
                           for k in range(redisserver.SENTINELS if opts.redis_replicas else 0))
    # A T3 whose secret the tracker and repository hold, for `bt-get --share --config STATE/config/t3.toml`.
    t3_ports = ((opts.base_port + 10 + 2 * opts.sites, opts.base_port + 11 + 2 * opts.sites) if opts.base_port
                else (port(topology.T3_IP), port(topology.T3_IP)))
    t3 = topology.Site(topology.T3_NAME, topology.T3_IP, *t3_ports, secrets.token_hex(16))
    # With --base-port the issuer on P+770 (past every site's web seed port, before the replicas').
    issuer_port = (opts.base_port + 770 if opts.base_port else port("127.0.0.1")) if opts.restricted else 0
    return topology.Layout(state=opts.state, data=data, tracker_port=tport, repo_port=rport, sites=tuple(sites),
                           issuer_port=issuer_port,
                           idle_ttl=opts.idle_ttl, heartbeat_interval=opts.heartbeat_interval, site_data=site_data,
                           more_tracker_ports=more, redis_port=redis_port, redis_url=opts.redis_url, t3=t3,
                           web_seed_urls=topology.web_seed_urls(opts.web_seed_urls, [s.name for s in sites]),
                           redis_replica_ports=replica_ports, sentinel_ports=sentinel_ports)


def hosts_layout(opts: UpOptions, data: Path, site_data: tuple[Path, ...],
                 hosts: hostplan.HostPlan) -> topology.Layout:
    """--hosts: tracker and repository on the services host, each site on its own, the T3 of
    `bt-get --share` on the first T3 host; every service on its host's address, as docs/deploy-site.md
    configures a real site."""
    services = hosts.host(hostplan.SERVICES)
    sites = tuple(topology.Site(h.name, h.address, hostplan.SITE_CONTROL_PORT, hostplan.SITE_PEER_PORT,
                                secrets.token_hex(16), hostplan.SITE_WEB_PORT) for h in hosts.of_role("site"))
    t3_host = hosts.of_role("t3")[0]
    t3 = topology.Site(topology.T3_NAME, t3_host.address, hostplan.SITE_CONTROL_PORT, hostplan.T3_PEER_PORT,
                       secrets.token_hex(16))
    netns_of = {"tracker": services.netns, "repo": services.netns, topology.T3_NAME: t3_host.netns,
                **{h.name: h.netns for h in hosts.of_role("site")}}
    return topology.Layout(state=opts.state, data=data, tracker_port=hostplan.TRACKER_PORT,
                           repo_port=hostplan.REPO_PORT, sites=sites, idle_ttl=opts.idle_ttl,
                           heartbeat_interval=opts.heartbeat_interval, host=services.address, site_data=site_data,
                           t3=t3, web_seed_urls=topology.web_seed_urls(opts.web_seed_urls, [s.name for s in sites]),
                           netns_of=netns_of, issuer_host=services.address, issuer_port=hostplan.ISSUER_PORT)


def prepare(opts: UpOptions, report: Callable[[str], None],
            rucio: "ruciofed.Opened | None" = None,
            hosts: hostplan.HostPlan | None = None) -> tuple[topology.Layout, list[str]]:
    """Create the state directory, the data (sample unless --data) and every config file;
    with `rucio`, register the data there and name the datasets by their DIDs."""
    opts.state.mkdir(parents=True, exist_ok=True)
    data, site_data = _data(opts, report)
    names = sorted(p.name for p in data.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not names:
        raise BtswarmError(data, "no dataset directories in --data")
    for d in site_data[1:]:
        other = sorted(p.name for p in d.iterdir() if p.is_dir() and not p.name.startswith("."))
        if other != names:
            raise BtswarmError(d, f"holds other datasets than {data} (per-site --data must be copies)")
    fed = layout(opts, data, site_data, hosts)
    if rucio is not None:
        rplan = ruciofed.register(rucio.server, opts.rucio_scope, names,
                                  [(s.name, fed.data_of(i)) for i, s in enumerate(fed.sites)], opts.state,
                                  opts.rucio_refresh, report)
        fed = dataclasses.replace(fed, rucio=rplan)
        names = [f"{opts.rucio_scope}:{n}" for n in names]
    if fed.redis_port and not fed.redis_url:
        _redis_state(opts, fed)
    fed = _certificates(opts, fed, names)
    conf_dir = opts.state / "config"
    conf_dir.mkdir(parents=True, exist_ok=True)
    for label, sections in topology.configs(fed).items():
        path = conf_dir / f"{label}.toml"
        # Secrets inside: readable by the owner only.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(topology.toml(sections))
    return fed, names


def _data(opts: UpOptions, report: Callable[[str], None]) -> tuple[Path, tuple[Path, ...]]:
    """The sites' data: --data (once for all, or once per site, then also returned per site), or the sample,
    made now."""
    site_data: tuple[Path, ...] = ()
    if opts.site_data:
        if len(opts.site_data) != opts.sites:
            raise BtswarmError("--data", f"given {len(opts.site_data)} times for {opts.sites} sites "
                                         "(once for all sites, or once per site)")
        site_data = tuple(d.resolve() for d in opts.site_data)
        for d in site_data:
            if not d.is_dir():
                raise BtswarmError(d, "--data is not a directory")
        return site_data[0], site_data
    if opts.data is not None:
        data = opts.data.resolve()
        if not data.is_dir():
            raise BtswarmError(data, "--data is not a directory")
        return data, site_data
    # --restricted: the sample named by its DID (its scope restricted), beside no plain-named one.
    did = opts.restricted and not opts.rucio
    data = opts.state / ("data-restricted" if did else "data")
    report(f"sample dataset: {opts.sample_files} files, {opts.sample_size / 2**20:.0f} MiB in {data}")
    sample.generate(data, name=f"{SAMPLE_SCOPE}:{sample.SAMPLE_NAME}" if did else sample.SAMPLE_NAME,
                    files=opts.sample_files, total_size=opts.sample_size)
    return data, site_data


def _redis_state(opts: UpOptions, fed: topology.Layout) -> None:
    """The directories of our own Redis and its replicas, and each sentinel's config."""
    redisserver.binary()  # a clear error now rather than a supervisor failure later
    (opts.state / "redis").mkdir(exist_ok=True)
    for k in range(len(fed.redis_replica_ports)):
        (opts.state / f"redis-replica{k + 1}").mkdir(exist_ok=True)
    for k, port in enumerate(fed.sentinel_ports):
        # Fresh at each start (the sentinel rewrites it as it learns): this run's master and ports.
        path = fed.sentinel_config(k)
        path.parent.mkdir(exist_ok=True)
        path.write_text(redisserver.sentinel_config(fed.host, port, (fed.host, fed.redis_port)))


def _certificates(opts: UpOptions, fed: topology.Layout, names: list[str]) -> topology.Layout:
    """`fed` with the federation's peer CA and each site's certificate from it (restricted datasets:
    docs/deploy-site.md); with --restricted, the services' https certificates and the members' scopes too."""
    now = dt.datetime.now(dt.timezone.utc)
    pki = peerpki.ensure(opts.state / "pki", [s.name for s in fed.sites], now)
    fed = dataclasses.replace(fed, peer_files={name: tuple(files) for name, files in pki.items()})
    if opts.restricted:
        pki_dir = opts.state / "pki"
        tls = {label: peerpki.ensure_service(pki_dir, label, [host], now)
               for label, host in (("tracker", fed.host), ("repo", fed.host), ("issuer", fed.issuer_host))}
        fed = dataclasses.replace(fed, members=topology.Members(
            restricted_scopes(opts.restrict, names), issuer.AUDIENCE, pki_dir / peerpki.CA_CERT,
            pki_dir / peerpki.CA_KEY, tls))
    return fed


SAMPLE_SCOPE = sample.SAMPLE_NAME.split(".", 1)[0]  # the sample's DID scope, as ATLAS names it (data08_cos)


def restricted_scopes(restrict: tuple[str, ...], names: list[str]) -> tuple[str, ...]:
    """--restrict's entries (scopes or DID patterns), else the scopes of the datasets named `scope:name`; a
    BtswarmError when they restrict none of the datasets: a restricted federation with nothing to show."""
    scopes = tuple(restrict) or tuple(dict.fromkeys(n.partition(":")[0] for n in names if ":" in n))
    if not scopes:
        raise BtswarmError("--restricted", "no dataset is named SCOPE:NAME, and only those can be restricted "
                                           "(name the directories in --data so, or give --rucio)")
    try:
        rules = access.AccessConfig(restricted=scopes)
    except ConfigError as exc:
        raise BtswarmError("--restrict", str(exc)) from None
    if not any(rules.is_restricted(n) for n in names):
        raise BtswarmError("--restrict", f"{', '.join(scopes)} restricts none of the datasets "
                                         f"({', '.join(names)}): a restricted dataset is named SCOPE:NAME")
    return scopes


@dataclass(frozen=True)
class Readiness:
    """What keeps a federation from being ready: what to wait for, what waiting will not cure
    (a dataset no site can serve, replicas nothing decides between), and what to say but not wait for."""

    waiting: tuple[str, ...] = ()
    failures: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def ready(self) -> bool:
        return not self.waiting and not self.failures


def readiness(names: list[str], site_status: dict[str, dict], records: dict[str, dict],
              tracker_sites: dict, announce_url: str) -> Readiness:
    """Ready when every site's current version of every dataset is the one the repository serves,
    announcing to this run's tracker, and every site has a heartbeat at the tracker. Pure.

    The repository may hold records from an earlier run on the same state
    directory (other data, another tracker port): "listed" is not enough.
    Waiting does not cure a site that refused a dataset (bytes that
    contradict the catalog, unreadable files) nor a replica the repository
    judged (partial, conflicting): those are said, not waited for, and a
    dataset no site can serve is a failure.
    """
    waiting, failures, warnings = [], [], []
    up = {s.get("name") for s in tracker_sites.get("sites", []) if s.get("up")}
    refused: dict[str, list[str]] = {}
    for site, status in sorted(site_status.items()):
        if not status.get("ready"):
            waiting.append(f"{site}: still preparing datasets")
            continue
        if status.get("error"):
            failures.append(f"{site}: {status['error']}")
            continue
        if site not in up:
            waiting.append(f"{site}: no heartbeat at the tracker yet")
        hashes = {d.get("name"): d.get("info_hash") for d in status.get("datasets", [])}
        for name in names:
            record = records.get(name) or {}
            judged = {v.get("site"): v for v in record.get("replica_sites", []) if isinstance(v, dict)}
            mine = judged.get(site)
            if hashes.get(name) is None:
                why = [p for p in status.get("problems", []) if name in p]
                if why:  # the site refused it: waiting will not change that
                    refused.setdefault(name, []).append(f"{site} cannot serve {name}: {'; '.join(why[:5])}")
                else:
                    waiting.append(f"{site}: does not serve {name}")
            elif mine is not None and mine.get("info_hash") == hashes[name] and mine.get("state") != "current":
                # Published, and judged: this replica is not the dataset.
                problem = record.get("problem") or f"{name}: {site} holds a {mine.get('state')} replica"
                if not record.get("servable", True):
                    problem += f" (bt-get {name} refuses until this is settled: docs/repository.md)"
                warnings.append(problem)
            elif record.get("info_hash") != hashes[name] or site not in record.get("sites", []):
                waiting.append(f"{name}: not yet published by {site}")
            elif quote(announce_url, safe="") not in record.get("magnet", ""):
                waiting.append(f"{name}: the repository's .torrent announces to another tracker")
    for name, why in refused.items():
        serving = [site for site, status in site_status.items()
                   if any(d.get("name") == name for d in status.get("datasets", []))]
        (warnings if serving else failures).extend(why)
    return Readiness(tuple(waiting), tuple(dict.fromkeys(failures)), tuple(dict.fromkeys(warnings)))


async def wait_published(fed: topology.Layout, names: list[str], timeout: float,
                         report: Callable[[str], None] = lambda _: None) -> None:
    """Until readiness() is ready; StartError at once on a failure, or after `timeout` s. A restricted
    federation's repository is asked over https with a token that reads everything (its issuer's)."""
    deadline = time.monotonic() + timeout
    state = Readiness(waiting=("nothing asked yet",))
    said: set[str] = set()

    headers = {}
    if fed.members is not None:
        token = await membertoken.request(fed.issuer_url, fed.ca_file, f"{access.READ}:/", timeout + 60)
        headers = {"Authorization": f"Bearer {token}"}

    async def get(http: aiohttp.ClientSession, url: str) -> dict:
        async with http.get(url) as resp:
            return await resp.json() if resp.status == 200 else {}

    async with client_session(fed.ca_file, timeout=aiohttp.ClientTimeout(total=5), headers=headers) as http:
        while True:
            try:
                status = {s.name: await get(http, f"{s.control_url}/api/status") for s in fed.sites}
                records = {n: await get(http, f"{fed.repo_url}{urls.dataset_api(n)}") for n in names}
                state = readiness(names, status, records, await get(http, f"{fed.tracker_url}/api/sites"),
                                  fed.announce_url)
                for warning in state.warnings:
                    if warning not in said:
                        said.add(warning)
                        report(f"warning: {warning}")
                if state.failures:
                    raise StartError("btswarm up", "; ".join(state.failures[:5]))
                if state.ready:
                    return
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise StartError("btswarm up", f"not ready after {timeout:.0f} s: {'; '.join(state.waiting[:5])}")
            await asyncio.sleep(0.2)


NETNS_FILE = "netns.json"  # STATE/netns.json: the namespace of a shaped run and the PID that owns it


def run(opts: UpOptions, *, report: Callable[[str], None]) -> int:
    """`btswarm up`: run_up, inside a private, shaped network namespace when links are asked for.

    The namespace is made and entered before the event loop starts, so
    that every thread and every process started afterwards is inside;
    it is deleted when the federation has stopped, whatever the reason.
    """
    if opts.hosts:
        opts.host_plan("check")  # a bad combination says so before anything is made
        netns.require("--hosts", "network namespaces, a bridge, veths and tc shaping", "run as root")
    elif opts.links.shaped:
        netns.require("--site-link")
    with statelock.held(opts.state):
        statelock.stop_leftovers(opts.state, report)
        return _run_locked(opts, report)


def _run_locked(opts: UpOptions, report: Callable[[str], None]) -> int:
    if opts.hosts:
        return _run_hosts(opts, report)
    if not opts.links.shaped:
        return asyncio.run(run_up(opts, report=report))
    links = opts.link_plan()
    opts.state.mkdir(parents=True, exist_ok=True)
    _remove_stale_netns(opts.state / NETNS_FILE, report)
    name = netns.unique_name()
    netns.create(name, shaping.mtu_commands(opts.links.mtu) + shaping.tc_commands(links)
                 + shaping.delay_commands(links),
                 shaping.delay_sysctls() if shaping.delayed(links) else ())
    record = opts.state / NETNS_FILE
    try:
        record.write_text(json.dumps({"names": [name], "pid": os.getpid()}))
        netns.enter(name)
        report(f"network namespace {name}: " + ", ".join(f"{link.label} {link.spec}" for link in _summary(links)))
        with tundelay.running(links, opts.state / "logs" / "delayline.log"):
            return asyncio.run(run_up(opts, report=report, netns_name=name, links=links))
    finally:
        netns.delete(name)
        record.unlink(missing_ok=True)


def _run_hosts(opts: UpOptions, report: Callable[[str], None]) -> int:
    """--hosts: the hosts and their bridge made (btswarm/hosts.py), each host's delay line running when a
    link has an RTT, the federation run on them, every namespace deleted when it stops. `btswarm up` itself
    watches from the bridge's namespace: the hosts' addresses exist only there and on the hosts."""
    opts.state.mkdir(parents=True, exist_ok=True)
    record = opts.state / NETNS_FILE
    _remove_stale_netns(record, report)
    plan = opts.host_plan(netns.unique_name("bth"))
    steps = hostplan.lan_steps(plan) + [step for h in plan.hosts for step in hostplan.host_steps(plan, h)]
    record.write_text(json.dumps({"names": list(plan.namespaces), "pid": os.getpid()}))
    try:
        netns.build(plan.namespaces, steps, hostplan.sysctls())
        netns.enter(plan.lan)
        report(f"{len(plan.hosts)} hosts on bridge {hostplan.BRIDGE} in network namespace {plan.lan}: "
               + ", ".join(f"{h.name} {h.address}" + (f" {h.link}" if h.link else "") for h in plan.hosts))
        with contextlib.ExitStack() as delay_lines:
            for h in plan.hosts:
                if hostplan.delay_steps(plan, h):
                    delay_lines.enter_context(tundelay.running(
                        plan.links(), opts.state / "logs" / f"delayline-{h.name}.log", hostplan.DELAY_DEV,
                        dev=hostplan.DEV, mark=hostplan.DELAY_MARK, netns_name=h.netns))
            return asyncio.run(run_up(opts, report=report, netns_name=plan.lan, links=plan.links(), hosts=plan))
    finally:
        for name in plan.namespaces:
            netns.delete(name)
        record.unlink(missing_ok=True)


def _summary(links: tuple[shaping.Link, ...]) -> list[shaping.Link]:
    """The links to name at start-up: the sites and the baseline one by one, the clients once."""
    clients = [link for link in links if link.label.startswith("client ")]
    out = [link for link in links if not link.label.startswith("client ")]
    if clients:
        out.append(shaping.Link(clients[0].address, clients[0].rate,
                                f"clients {clients[0].address}-{clients[-1].address.rsplit('.', 1)[1]}", clients[0].rtt))
    return out


def _remove_stale_netns(record: Path, report: Callable[[str], None]) -> None:
    """A namespace left by a killed `btswarm up` on this state directory (its PID gone) is deleted."""
    try:
        old = json.loads(record.read_text())
    except (OSError, ValueError):
        return
    try:
        os.kill(int(old["pid"]), 0)
        raise BtswarmError(record.parent, f"a shaped btswarm up (PID {old['pid']}) is running on this state "
                                          "directory")
    except ProcessLookupError:
        pass
    left = [name for name in old.get("names") or [old["name"]] if netns.exists(name)]
    if left:
        report(f"deleting network namespace{'s' if len(left) > 1 else ''} {', '.join(left)} left by a btswarm up "
               "that was killed")
    for name in left:
        netns.delete(name)
    record.unlink(missing_ok=True)


async def run_up(opts: UpOptions, *, report: Callable[[str], None], bin_dir: Path | None = None,
                 stop: asyncio.Event | None = None, netns_name: str | None = None,
                 links: tuple[shaping.Link, ...] = (), hosts: hostplan.HostPlan | None = None) -> int:
    """Start everything, print how to use it, run until SIGINT/SIGTERM (or `stop`), then stop all."""
    bin_dir = bin_dir or Path(sys.executable).parent
    loop = asyncio.get_running_loop()
    stop = stop or asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # HUP: the terminal went away
        loop.add_signal_handler(sig, stop.set)
    rucio = None
    if opts.rucio:
        opts.state.mkdir(parents=True, exist_ok=True)
        # Not abandoned half-way on a stop (it would leave a server nobody stops): bounded by its own timeout.
        rucio = await loop.run_in_executor(None, ruciofed.open_rucio, opts.rucio_dir or opts.state / "rucio", report)
    try:
        if stop.is_set():
            raise Interrupted()
        return await _run_up(opts, report, bin_dir, stop, rucio, netns_name, links, hosts)
    finally:
        if rucio is not None:
            await loop.run_in_executor(None, rucio.stop)


async def _run_up(opts: UpOptions, report: Callable[[str], None], bin_dir: Path, stop: asyncio.Event,
                  rucio: "ruciofed.Opened | None", netns_name: str | None, links: tuple[shaping.Link, ...],
                  hosts: hostplan.HostPlan | None = None) -> int:
    loop = asyncio.get_running_loop()
    fed, names = await loop.run_in_executor(None, prepare, opts, report, rucio, hosts)
    async with Supervisor(opts.state / "logs", report=report, state=opts.state, ca_file=fed.ca_file) as sup:
        for service in topology.services(fed, bin_dir):
            await _or_stop(sup.start(service), stop)
            report(f"started {service.label}: {service.health_url.rsplit('/', 1)[0]}")
        await _or_stop(wait_published(fed, names, opts.timeout, report), stop)
        doc = topology.ready_document(fed, names, netns=netns_name, links=links,
                                      hosts=hosts.hosts if hosts is not None else ())
        ready_files = [opts.state / topology.READY_COPY] + ([opts.ready_file] if opts.ready_file else [])
        for path in ready_files:
            doc.write(path)
        report(banner(fed, names, netns_name, links, hosts))
        try:
            await sup.watch(stop.wait())
        finally:
            for path in ready_files:
                path.unlink(missing_ok=True)
        report("stopping the federation")
    return 0


class Interrupted(Exception):
    pass


async def _or_stop(work, stop: asyncio.Event):
    """Run `work` unless a stop is asked for first."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        stopper.cancel()
        return task.result()
    task.cancel()
    raise Interrupted()


def banner(fed: topology.Layout, names: list[str], netns_name: str | None = None,
           links: tuple[shaping.Link, ...] = (), hosts: hostplan.HostPlan | None = None) -> str:
    lines = [
        "btswarm federation is up:",
        f"  repository  {fed.repo_url}/",
        *(f"  tracker     {u}/announce" for u in fed.tracker_urls),
        *([f"  redis       {fed.store_url}"] if fed.store_url else []),
        *([f"  sentinels   {', '.join(fed.sentinels)} (master {redisserver.MASTER!r}, "
           f"{len(fed.redis_replica_ports)} replica{'s' if len(fed.redis_replica_ports) > 1 else ''})"]
          if fed.sentinel_ports else []),
    ]
    lines += [f"  {s.name:<10}  control {s.control_url}  peers {s.peer}  web seed {s.web_url}/data/"
              for s in fed.sites]
    if fed.rucio is not None:
        lines.append(f"  rucio       {fed.rucio.url}/  (RUCIO_CONFIG={fed.rucio.root / 'etc' / 'rucio.cfg'}; "
                     f"RSEs {', '.join(rse for _, rse, _ in fed.rucio.rses)})")
    lines += ["datasets:"] + [f"  {n}" for n in names]
    if fed.t3 is not None:
        lines += [f"a T3 to share what it fetches (bt-get --share): --config {fed.state / 'config' / 't3.toml'}"]
    if fed.members is not None:
        lines += [f"members only: {', '.join(fed.members.scopes)} (token issuer {fed.issuer_url}, "
                  f"CA {fed.members.ca})"]
    state = "" if fed.state == default_state_dir() else f" --state {fed.state}"
    member = _member_lines(fed, names, state, with_repo=netns_name is None and hosts is None)
    if hosts is not None:
        lines += [f"hosts (network namespaces on a bridge in {hosts.lan}):"]
        lines += [f"  {h.name:<10}  {h.address:<13}  {h.netns}  uplink {h.link or 'unshaped'}" for h in hosts.hosts]
        t3 = hosts.of_role("t3")[0].name
        lines += ["try (`btswarm run --host` runs a command on a T3 host, with BTSWARM_GET_REPO set):",
                  *member[:-1], f"  btswarm run{state} --host {t3} -- {member[-1].strip()}"]
    elif netns_name is None:
        lines += ["try:", *member]
    else:
        lines += [f"links (uplinks, in network namespace {netns_name}):"]
        lines += [f"  {link.label:<22}  {link.address:<15}  {link.spec}" for link in _summary(links)]
        lines += ["try (each `btswarm run` is a client on the next shaped client address):",
                  *member[:-1], f"  btswarm run{state} -- {member[-1].strip()}"]
    lines.append("Ctrl-C stops it.")
    return "\n".join(lines)


def _member_lines(fed: topology.Layout, names: list[str], state: str, with_repo: bool) -> list[str]:
    """How to fetch: the bt-get command last (`btswarm run` sets the repository in a namespace); for a
    restricted federation, the token a member gets first."""
    if fed.members is None:
        return [f"  bt-get {names[0]}{f' --repo {fed.repo_url}' if with_repo else ''} -o /tmp/btswarm-get"]
    rules = access.AccessConfig(restricted=fed.members.scopes)
    name = next(n for n in names if rules.is_restricted(n))
    return [f"  btswarm token{state}    # a member's token, where bt-get looks for it ($XDG_RUNTIME_DIR/bt_u$UID, "
            "else /tmp/bt_u$UID)",
            f"  bt-get {name} --config {fed.state / 'config' / 'get.toml'} -o /tmp/btswarm-get"]
