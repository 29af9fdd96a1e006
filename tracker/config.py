"""bt-tracker's section of the configuration file: [tracker]."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from torrents.config import Seconds, load_section
from torrents.devsecret import DEV_SECRET
from torrents.errors import ConfigError
from torrents.hostport import check_hostport, parse_hostport
from torrents.sitekinds import check_kinds, check_sites, kind_of


@dataclass(frozen=True)
class TrackerConfig:
    listen: str = "127.0.0.1:6969"
    interval: int = 60  # seconds, as the announce answer carries it
    min_interval: int = 30
    open: bool = False
    repo: str = ""  # also accept info-hashes the repository published
    # site → its secret, the same as that site's [server] secret; DEV_SECRET is allowed on loopback only
    site_secrets: Mapping[str, str] = field(default_factory=lambda: {"site1": DEV_SECRET})
    # site → "T2" (the default) or "T3": the kind its heartbeats must claim; the repository's [repo] site_kinds
    site_kinds: Mapping[str, str] = field(default_factory=dict)
    site_networks: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    start_wait: Seconds = Seconds(2.0)
    # Seeds wanted in every active swarm, before counting leechers (at most max_seeds_per_swarm, and
    # at most the sites that hold it): a lone T3 gets every holder's uplink, as the sites send one
    # copy between them however many seed it. At 1 a lone T3 on a cold federation had one site.
    min_seeds: int = 3
    leechers_per_seed: int = 4
    max_seeds_per_swarm: int = 3
    site_backoff: Seconds = Seconds(30.0)
    trust_ip: bool = False
    default_numwant: int = 50
    failure_reason: str = "unknown info_hash: not published in this federation"
    heartbeat_interval: Seconds = Seconds(10.0)  # asked of sites in the heartbeat answer; down after 3 missed
    repo_poll: Seconds = Seconds(30.0)  # between reads of the repository's published info-hashes
    start_timeout: Seconds = Seconds(10.0)  # a site's answer to a seed start; its claim lives 2 s longer
    # Where swarms, starts and sites are kept: "memory" (this process) or
    # "redis" (shared by every tracker process and host that uses the same
    # redis_url and redis_prefix; see docs/contracts.md for the key layout).
    store: str = "memory"
    # redis://[USER:PASSWORD@]HOST:PORT/DB, rediss://... (TLS, verified against the system's CAs and
    # redis_ca_file), or unix:///path/redis.sock[?db=N]
    redis_url: str = "redis://127.0.0.1:6379/0"
    # Redis Sentinel (docs/reliability.md): the sentinels to ask where the master named redis_master is;
    # redis_url then gives only the scheme, the credentials and the database.
    redis_sentinels: tuple[str, ...] = ()
    redis_master: str = ""
    redis_ca_file: str = ""
    redis_prefix: str = "bt:"
    redis_timeout: Seconds = Seconds(1.0)  # an announce waits no longer for Redis: then a failure reason
    processes: int = 1  # bt-tracker run --processes: several processes on one port (SO_REUSEPORT); needs redis
    # TLS (docs/deploy-site.md): a PEM certificate (with its chain) and key make announces and the API listen on
    # https; ca_file, a PEM bundle, is trusted besides the system's CAs when it calls sites (seed starts) and
    # the repository.
    tls_cert: str = ""
    tls_key: str = ""
    ca_file: str = ""
    # The federation's peer CA (PEM; docs/deploy-site.md): with it the https listener asks each client for a
    # peer certificate, and an announce in a restricted dataset's swarm is answered only for one that names
    # it (tracker/membership.py). The tracker's own tls_cert must then be issued by this CA too: libtorrent
    # checks an SSL torrent's https tracker against the torrent's root certificate.
    peer_ca: str = ""

    def __post_init__(self) -> None:
        check_hostport(self, "listen")
        check_kinds("site_kinds", self.site_kinds)
        for key in ("interval", "leechers_per_seed", "max_seeds_per_swarm", "default_numwant"):
            if getattr(self, key) < 1:
                raise ConfigError(key, f"must be at least 1, got {getattr(self, key)!r}")
        for key in ("min_interval", "min_seeds"):
            if getattr(self, key) < 0:
                raise ConfigError(key, f"must not be negative, got {getattr(self, key)!r}")
        if self.store not in ("memory", "redis"):
            raise ConfigError("store", f"must be \"memory\" or \"redis\", got {self.store!r}")
        if not 1 <= self.processes <= 64:
            raise ConfigError("processes", f"must be 1-64, got {self.processes!r}")
        for entry in self.redis_sentinels:
            parse_hostport(entry, "redis_sentinels")
        if self.redis_sentinels and not self.redis_master:
            raise ConfigError("redis_master", "needed with redis_sentinels: the name the sentinels monitor")
        if self.redis_timeout <= 0 or self.start_timeout <= 0:
            raise ConfigError("redis_timeout" if self.redis_timeout <= 0 else "start_timeout", "must be more than 0")

    def kind_of(self, site: str) -> str:
        return kind_of(site, self.site_kinds)

    def check_roles(self) -> None:
        """Every site of site_kinds has a secret (a rule across two keys, checked once both are read)."""
        check_sites("[tracker] site_kinds", self.site_kinds, self.site_secrets)


def load(explicit: str | os.PathLike | None = None, *, overrides: Mapping[str, Any] | None = None,
         environ: Mapping[str, str] | None = None) -> TrackerConfig:
    return load_section("tracker", TrackerConfig, explicit, overrides=overrides, environ=environ)
