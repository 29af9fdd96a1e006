"""The layout of a one-host federation: addresses, ports, configs. Pure."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from btswarm.ready import MembersInfo, Ready, RseInfo, RucioInfo, SiteInfo, T3Info
from btswarm import redisserver
from btswarm.hosts import Host
from btswarm.shaping import Link
from torrents.errors import BtswarmError


@dataclass(frozen=True)
class Site:
    name: str
    ip: str
    control_port: int
    peer_port: int
    secret: str
    web_port: int = 0  # the site's web seed (BEP 19) listener; 0: none

    @property
    def control_url(self) -> str:
        return f"http://{self.ip}:{self.control_port}"

    @property
    def web_url(self) -> str:
        return f"http://{self.ip}:{self.web_port}" if self.web_port else ""

    @property
    def peer(self) -> str:
        return f"{self.ip}:{self.peer_port}"


@dataclass(frozen=True)
class Service:
    """One process of the federation: its label, its command line and its health URL."""
    label: str
    argv: tuple[str, ...]
    health_url: str
    config_path: Path
    netns: str | None = None  # the host it runs on (btswarm up --hosts); None: where btswarm up runs


@dataclass(frozen=True)
class RucioPlan:
    """`btswarm up --rucio`: the local Rucio the sites read their datasets from, one RSE per site."""
    url: str
    root: Path  # the local Rucio's directory (btswarm.localrucio)
    password_file: Path
    scope: str
    rses: tuple[tuple[str, str, Path], ...]  # (site, RSE, prefix directory) per site
    refresh: float = 30.0
    account: str = "root"
    username: str = "btswarm"

    def rse_of(self, site: str) -> tuple[str, Path]:
        for name, rse, prefix in self.rses:
            if name == site:
                return rse, prefix
        raise KeyError(site)


@dataclass(frozen=True)
class Members:
    """`btswarm up --restricted`: the scopes only members read, the token issuer that speaks for them (the test
    bed's, btswarm/testbed/issuer.py), and the https every member's credential travels on. The peer CA
    (STATE/pki/peer-ca.pem) signs the sites' peer certificates, T3s' through the repository, and the https
    certificates of the tracker, the repository and the issuer: one CA file for every client."""
    scopes: tuple[str, ...]
    audience: str
    ca: Path
    ca_key: Path
    tls: dict[str, tuple[Path, Path]]  # "tracker", "repo", "issuer" → (certificate, key)

    def access(self, issuer_url: str) -> dict[str, object]:
        """The [access] section every service and the members' bt-get read (docs/deploy-site.md)."""
        return {"restricted": list(self.scopes), "issuers": {issuer_url: self.audience}, "ca_file": str(self.ca)}

    def tls_of(self, label: str) -> dict[str, object]:
        cert, key = self.tls[label]
        return {"tls_cert": str(cert), "tls_key": str(key), "ca_file": str(self.ca)}


@dataclass(frozen=True)
class Layout:
    """Where each part of a one-host federation listens, and where it keeps its state."""

    state: Path
    data: Path
    tracker_port: int
    repo_port: int
    sites: tuple[Site, ...]
    idle_ttl: float = 600.0
    heartbeat_interval: float = 5.0
    host: str = "127.0.0.1"
    extra_tracker: dict = field(default_factory=dict)
    # One data directory per site (same dataset names, separate copies), else every site serves `data`.
    site_data: tuple[Path, ...] = ()
    # Trackers beyond the first (they share one Redis), and the Redis: ours on
    # redis_port (its own directory under the state), or redis_url to join one.
    more_tracker_ports: tuple[int, ...] = ()
    redis_port: int = 0
    redis_url: str = ""
    # --redis-replicas N: our Redis's replicas, and the sentinels that fail over to one of them.
    redis_replica_ports: tuple[int, ...] = ()
    sentinel_ports: tuple[int, ...] = ()
    rucio: RucioPlan | None = None  # the sites read their datasets from this Rucio, not from `data`
    # A T3 for `bt-get --share` (config/t3.toml; its bt-server is started by the first share, not by up).
    t3: Site | None = None
    web_seed_urls: dict[str, tuple[str, ...]] = field(default_factory=dict)  # site → its doors (--web-seed-url)
    netns_of: dict[str, str] = field(default_factory=dict)  # service label → its host's namespace (--hosts)
    # site → (peer CA, certificate, key) files (btswarm/peerpki.py): restricted datasets' peer wire
    peer_files: dict[str, tuple[Path, Path, Path]] = field(default_factory=dict)
    members: Members | None = None  # --restricted: members-only scopes, a token issuer, https services
    # Where --restricted's token issuer listens (on the services' host with --hosts).
    issuer_host: str = "127.0.0.1"
    issuer_port: int = 0

    def data_of(self, index: int) -> Path:
        return self.site_data[index] if self.site_data else self.data

    @property
    def scheme(self) -> str:
        """https for the tracker and the repository of a restricted federation: a member's peer certificate is
        presented to the tracker on https only, and the token travels to the repository on it."""
        return "https" if self.members is not None else "http"

    @property
    def tracker_url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.tracker_port}"

    @property
    def announce_url(self) -> str:
        return f"{self.tracker_url}/announce"

    @property
    def repo_url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.repo_port}"

    @property
    def tracker_ports(self) -> tuple[int, ...]:
        return (self.tracker_port, *self.more_tracker_ports)

    @property
    def tracker_urls(self) -> tuple[str, ...]:
        return tuple(f"{self.scheme}://{self.host}:{p}" for p in self.tracker_ports)

    @property
    def issuer_url(self) -> str:
        return f"https://{self.issuer_host}:{self.issuer_port}" if self.members else ""

    @property
    def ca_file(self) -> str:
        """The CA every client of this federation's https trusts ('' when it has none)."""
        return str(self.members.ca) if self.members else ""

    @property
    def store_url(self) -> str:
        """The trackers' shared Redis; empty when the tracker keeps its state in memory."""
        return self.redis_url or (f"redis://{self.host}:{self.redis_port}/0" if self.redis_port else "")

    @property
    def sentinels(self) -> tuple[str, ...]:
        return tuple(f"{self.host}:{p}" for p in self.sentinel_ports)

    def sentinel_config(self, k: int) -> Path:
        return self.state / f"redis-sentinel{k + 1}" / "sentinel.conf"


def tracker_label(index: int) -> str:
    return "tracker" if index == 0 else f"tracker{index + 1}"


def site_ip(index: int) -> str:
    """Site i (0-based) lives on 127.0.0.(i+2): 127.0.0.1 is the tracker's, the repository's and the clients'."""
    if not 0 <= index < 250:
        raise ValueError(f"site index {index} out of range")
    return f"127.0.0.{index + 2}"


def site_name(index: int) -> str:
    return f"site{index + 1}"


# The demo's T3 (bt-get --share): below the client addresses, above any site of a few dozen.
T3_NAME = "t3"
T3_IP = "127.0.0.100"


READY_COPY = "ready.json"  # STATE/ready.json: the ready document, also without --ready-file (btswarm run)

# Clients (bt-get, curl, aria2c in tests and benchmarks, `btswarm run`) each on
# their own address, so that a shaped federation can give each its own uplink.
CLIENT_BASE = 101
BASELINE_IP = "127.0.0.60"  # the benchmarks' nginx: shaped like a site when links are


def client_ip(k: int) -> str:
    """Client k (0-based) on 127.0.0.(101+k): sites use 127.0.0.2 and up, the services 127.0.0.1."""
    if not 0 <= k < 255 - CLIENT_BASE:
        raise ValueError(f"client index {k} out of range")
    return f"127.0.0.{CLIENT_BASE + k}"


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def toml(sections: dict[str, dict[str, object]]) -> str:
    lines = ["# written by btswarm up; edit the command line, not this file", ""]
    for section, values in sections.items():
        lines.append(f"[{section}]")
        lines.extend(f"{key} = {_toml_value(v)}" for key, v in values.items())
        lines.append("")
    return "\n".join(lines)


def web_seed_urls(values: Sequence[str], names: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """`--web-seed-url [SITE=]TEMPLATE`, repeatable → each site's door templates (without SITE=: every
    site's). bt-server checks the templates themselves when it starts (docs/webseeds.md)."""
    out: dict[str, list[str]] = {name: [] for name in names}
    for value in values:
        head, sep, template = value.partition("=")
        if not sep or "://" in head:
            head, template = "", value
        if head and head not in out:
            raise BtswarmError("--web-seed-url", f"{value!r}: no site {head!r} (the sites are "
                                                 f"{', '.join(names)})")
        if not template.startswith(("http://", "https://")):
            raise BtswarmError("--web-seed-url", f"{value!r}: not an http:// or https:// URL")
        for name in [head] if head else names:
            out[name].append(template)
    return {name: tuple(urls) for name, urls in out.items() if urls}


def configs(fed: Layout) -> dict[str, dict[str, dict[str, object]]]:
    """Config sections per service label ('tracker', 'repo', 'site1', ...)."""
    secrets = {s.name: s.secret for s in (*fed.sites, *([fed.t3] if fed.t3 else []))}
    # The operators' word on each site's role (docs/deploy-site.md): the T3's secret shares, never publishes.
    kinds = {"site_kinds": {fed.t3.name: "T3"}} if fed.t3 else {}
    m = fed.members
    # --restricted: every service's [access] the same, naming the test bed's issuer; the peer CA trusted.
    access = {"access": m.access(fed.issuer_url)} if m else {}
    trust = {"ca_file": str(m.ca)} if m else {}
    out: dict[str, dict[str, dict[str, object]]] = {
        tracker_label(k): {"tracker": _tracker_section(fed, port, secrets, kinds)}
        for k, port in enumerate(fed.tracker_ports)
    }
    out.update({
        "repo": {"repo": {
            "listen": f"{fed.host}:{fed.repo_port}",
            "state": str(fed.state / "repo"),
            "tracker": fed.tracker_url,
            "site_secrets": secrets,
            **kinds,
            # signs T3s' certificate requests for what their tokens read (btrepo/peercerts.py)
            **({**m.tls_of("repo"), "peer_ca": str(m.ca), "peer_ca_key": str(m.ca_key)} if m else {}),
        }, **access},
    })
    trackers = {"trackers": list(fed.tracker_urls)} if len(fed.tracker_ports) > 1 else {}
    for i, s in enumerate(fed.sites):
        out[s.name] = _site_sections(fed, i, s, trackers, trust, access)
    if fed.t3 is not None:
        t = fed.t3
        out[t.name] = {"server": {
            "site": t.name, "kind": "T3", "secret": t.secret, "listen": f"{t.ip}:{t.control_port}",
            "peer_listen": t.peer, "control_url": t.control_url, "state": str(fed.state / t.name),
            "tracker": fed.tracker_url, "repo": fed.repo_url, "heartbeat_interval": fed.heartbeat_interval,
            "idle_ttl": fed.idle_ttl, **trackers, **trust,
        }, "get": {"repo": fed.repo_url, "listen": t.ip, **trust}, **access}
    if m is not None:
        # A member's bt-get (STATE/config/get.toml): the repository signs a certificate for its own key
        # (peer_ca given, no peer_cert) for what the token from `btswarm token` reads.
        out["get"] = {"get": {"repo": fed.repo_url, "ca_file": str(m.ca), "peer_ca": str(m.ca)}, **access}
    return out


def _tracker_section(fed: Layout, port: int, secrets: dict[str, str], kinds: dict[str, object]
                     ) -> dict[str, object]:
    """[tracker] of the tracker on `port`: one of the federation's trackers, all in one store if several."""
    store: dict[str, object] = {"store": "redis", "redis_url": fed.store_url} if fed.store_url else {}
    if fed.sentinel_ports:
        store.update(redis_sentinels=list(fed.sentinels), redis_master=redisserver.MASTER)
    m = fed.members
    # --restricted: the tracker on https with a certificate of the peer CA, asking each client for its peer
    # certificate (tracker/membership.py).
    members_tracker = {**m.tls_of("tracker"), "peer_ca": str(m.ca)} if m else {}
    return {
        "listen": f"{fed.host}:{port}",
        "site_secrets": secrets,
        **kinds,
        "repo": fed.repo_url,
        "interval": 60,
        **store,
        **members_tracker,
        **fed.extra_tracker,
    }


def _site_sections(fed: Layout, i: int, s: Site, trackers: dict[str, object], trust: dict[str, object],
                   access: dict[str, object]) -> dict[str, dict[str, object]]:
    """[server] of the i-th site, its [access], and [server.rucio] when its datasets come from the federation's
    Rucio."""
    site: dict[str, dict[str, object]] = {"server": {
        "site": s.name,
        "secret": s.secret,
        "listen": f"{s.ip}:{s.control_port}",
        "peer_listen": s.peer,
        "control_url": s.control_url,
        "state": str(fed.state / "sites" / s.name),
        "roots": [str(fed.data_of(i))],
        "tracker": fed.tracker_url,
        "repo": fed.repo_url,
        "heartbeat_interval": fed.heartbeat_interval,
        "idle_ttl": fed.idle_ttl,
        **({"web_listen": f"{s.ip}:{s.web_port}"} if s.web_port else {}),
        **({"web_seed_urls": list(fed.web_seed_urls[s.name])} if fed.web_seed_urls.get(s.name) else {}),
        **trackers,
        **({"peer_ca": str(fed.peer_files[s.name][0]), "peer_cert": str(fed.peer_files[s.name][1]),
            "peer_key": str(fed.peer_files[s.name][2])} if s.name in fed.peer_files else {}),
        **trust,
    }, **access}
    if fed.rucio is not None:
        rse, prefix = fed.rucio.rse_of(s.name)
        site["server"]["roots"] = []
        site["server.rucio"] = {
            "server": fed.rucio.url,
            "account": fed.rucio.account,
            "username": fed.rucio.username,
            "password_file": str(fed.rucio.password_file),
            "rse": rse,
            "datasets": [f"{fed.rucio.scope}:*"],
            # the local Rucio's POSIX protocol gives file://localhost/<prefix>/<scope>/<h1>/<h2>/<LFN>
            "pfn_map": {f"file://localhost{prefix}/": f"{prefix}/"},
            "refresh": fed.rucio.refresh,
        }
    return site


def services(fed: Layout, bin_dir: Path) -> list[Service]:
    """The processes to start, in start order (tracker and repository before the sites)."""
    conf = fed.state / "config"
    out = []
    if fed.redis_port and not fed.redis_url:
        # No config file of ours: redis-server takes its settings on the command line. With replicas,
        # the master refuses writes while fewer than half of them are in sync (docs/reliability.md).
        replicas = len(fed.redis_replica_ports)

        def node(directory: Path, port: int, replica_of: tuple[str, int] | None = None) -> tuple[str, ...]:
            argv = redisserver.argv(directory, fed.host, port, replica_of=replica_of, min_replicas=replicas // 2)
            if not fed.sentinel_ports:
                return tuple(argv)
            # Started again (empty), it asks the sentinels its role first (btswarm/redisnode.py).
            return (str(bin_dir / "python"), "-m", "btswarm.redisnode", *(f"--sentinel={a}" for a in fed.sentinels),
                    f"--master={redisserver.MASTER}", f"--me={fed.host}:{port}", "--", *argv)

        out.append(Service("redis", node(fed.state / "redis", fed.redis_port), fed.store_url, fed.state / "redis"))
        for k, port in enumerate(fed.redis_replica_ports):
            directory = fed.state / f"redis-replica{k + 1}"
            out.append(Service(f"redis-replica{k + 1}", node(directory, port, (fed.host, fed.redis_port)),
                               f"redis://{fed.host}:{port}/0", directory))
        for k, port in enumerate(fed.sentinel_ports):
            out.append(Service(f"sentinel{k + 1}", tuple(redisserver.sentinel_argv(fed.sentinel_config(k))),
                               f"redis://{fed.host}:{port}/0", fed.sentinel_config(k)))
    if fed.members is not None:
        cert, key = fed.members.tls["issuer"]
        out.append(Service("issuer", (str(bin_dir / "python"), "-m", "btswarm.testbed.issuer",
                                      f"{fed.issuer_host}:{fed.issuer_port}", str(cert), str(key)),
                           f"{fed.issuer_url}/jwks", cert, fed.netns_of.get("repo")))
    for k, url in enumerate(fed.tracker_urls):
        label = tracker_label(k)
        out.append(Service(label, (str(bin_dir / "bt-tracker"), "run", "--config", str(conf / f"{label}.toml")),
                           f"{url}/healthz", conf / f"{label}.toml", fed.netns_of.get(label)))
    out.append(Service("repo", (str(bin_dir / "bt-repo"), "run", "--config", str(conf / "repo.toml")),
                       f"{fed.repo_url}/healthz", conf / "repo.toml", fed.netns_of.get("repo")))
    for s in fed.sites:
        path = conf / f"{s.name}.toml"
        out.append(Service(s.name, (str(bin_dir / "bt-server"), "run", "--config", str(path)),
                           f"{s.control_url}/healthz", path, fed.netns_of.get(s.name)))
    return out


def ready_document(fed: Layout, datasets: list[str], *, netns: str | None = None,
                   links: tuple[Link, ...] = (), hosts: tuple[Host, ...] = ()) -> Ready:
    """What `btswarm up` writes once ready; `netns` and `links` when links are shaped, `hosts` with --hosts
    (`netns` is then the bridge's, from where every host is reached)."""
    return Ready(
        tracker=fed.announce_url, tracker_url=fed.tracker_url,
        trackers=tuple(f"{u}/announce" for u in fed.tracker_urls), tracker_urls=fed.tracker_urls,
        redis=fed.store_url, repo=fed.repo_url,
        sites=tuple(SiteInfo(s.name, s.peer, s.control_url, s.web_url) for s in fed.sites),
        t3=T3Info(fed.t3.name, fed.t3.peer, fed.t3.control_url, fed.state / "config" / f"{fed.t3.name}.toml")
        if fed.t3 else None,
        datasets=tuple(datasets), state=fed.state, data=fed.data, netns=netns, links=tuple(links), hosts=tuple(hosts),
        rucio=RucioInfo(fed.rucio.url, fed.rucio.root, fed.rucio.scope,
                        {site: RseInfo(rse, prefix) for site, rse, prefix in fed.rucio.rses})
        if fed.rucio is not None else None,
        members=MembersInfo(fed.issuer_url, fed.members.ca, fed.state / "config" / "get.toml", fed.members.scopes)
        if fed.members is not None else None,
    )
