"""bt-server's section of the configuration file: [server], and its sub-table [server.rucio]."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import urlsplit

from torrents.config import Rate, Seconds, default_state_dir, load_section
from torrents.devsecret import DEV_SECRET
from torrents.did import parse_pattern
from torrents.errors import BtswarmError, ConfigError
from torrents.hostport import check_hostport, is_wildcard, parse_hostport
from torrents.sitekinds import SITE_KINDS

from btserver import weburls


@dataclass(frozen=True)
class RucioConfig:
    """[server.rucio]: the datasets this site's RSE holds, as Rucio knows them (docs/deploy-rucio.md)."""

    server: str = ""  # Rucio's REST URL; empty: Rucio is not used
    auth_server: str = ""  # default: server
    account: str = ""
    username: str = ""  # a userpass identity of the account
    password: str = ""
    password_file: str = ""  # instead of password: a file holding it (mode 0600)
    token_file: str = ""  # instead of userpass: a file holding an X-Rucio-Auth-Token, read at each refresh
    vo: str = ""  # multi-VO Rucio only
    rse: str = ""  # this site's storage element
    datasets: tuple[str, ...] = ()  # DIDs and DID patterns (scope:name, scope:prefix.*)
    # PFN prefix → local path prefix, e.g. "root://door:1094//pnfs/x/" = "/pnfs/x/". A PFN
    # no prefix matches is a problem for its file; the local prefixes may be served from.
    pfn_map: Mapping[str, str] = field(default_factory=dict)
    schemes: tuple[str, ...] = ("file", "root")
    refresh: Seconds = Seconds(300.0)  # from one refresh's start to the next's
    timeout: Seconds = Seconds(60.0)  # to connect, and between two pieces of an answer
    retry_min: Seconds = Seconds(5.0)  # first retry after a failed refresh; doubles up to `refresh`

    def __post_init__(self) -> None:
        if self.server:  # unset, nothing else is read
            _check_rucio(self)


def _check_rucio(cfg: RucioConfig) -> None:
    for key in ("server", "auth_server"):
        url = urlsplit(getattr(cfg, key))
        if getattr(cfg, key) and (url.scheme not in ("http", "https") or not url.hostname):
            raise ConfigError(key, f"{getattr(cfg, key)!r} is not an http(s) URL")
    if not cfg.rse:
        raise ConfigError("rse", "the site's RSE is needed to list its replicas")
    if not cfg.datasets:
        raise ConfigError("datasets", "no DIDs or DID patterns to offer")
    for text in cfg.datasets:
        try:
            parse_pattern(text)
        except BtswarmError as exc:
            raise ConfigError("datasets", f"{exc.subject}: {exc.problem}") from None
    if cfg.token_file:
        if cfg.username or cfg.password or cfg.password_file:
            raise ConfigError("token_file", "give a token file or userpass credentials, not both")
    elif not cfg.account or not cfg.username or not (cfg.password or cfg.password_file):
        raise ConfigError("username", "credentials: account, username and password (or password_file), "
                                      "or token_file")
    if cfg.password and cfg.password_file:
        raise ConfigError("password_file", "give password or password_file, not both")
    if not cfg.pfn_map:
        raise ConfigError("pfn_map", "no PFN prefix → local path map: no replica could be read")
    for prefix, local in cfg.pfn_map.items():
        if not prefix:
            raise ConfigError("pfn_map", "an empty PFN prefix would match every PFN")
        if not local.startswith("/") or ".." in local.split("/"):
            raise ConfigError(f"pfn_map {prefix!r}", f"local prefix {local!r} is not an absolute path without '..'")
    if not cfg.schemes:
        raise ConfigError("schemes", "no PFN schemes to ask for (e.g. file, root)")
    for key in ("refresh", "timeout", "retry_min"):
        if getattr(cfg, key) <= 0:
            raise ConfigError(key, f"must be more than 0, got {getattr(cfg, key)!r}")


@dataclass(frozen=True)
class ServerConfig:
    site: str = "site1"
    # The site's tier: "T2", a storage site; "T3", a Tier-3 sharing what its users fetched
    # (bt-get --share). Said in heartbeats and publications; the repository lists T3 holders apart.
    kind: str = "T2"
    secret: str = DEV_SECRET  # allowed on loopback only (torrents/devsecret.py)
    listen: str = "127.0.0.1:8700"  # control API
    peer_listen: str = "127.0.0.1:6881"  # libtorrent; a wildcard (0.0.0.0, [::]) listens on every address
    # The address the tracker hands to peers (heartbeats): peer_listen's own, or, for a wildcard,
    # this one; empty: the address this host reaches the tracker from (what a peer there would see).
    peer_address: str = ""
    control_url: str = ""  # as others reach it; default http://<listen>
    state: str = field(default_factory=lambda: default_state_dir("server"))
    roots: tuple[str, ...] = ()  # each subdirectory of a root is a dataset
    storage_roots: tuple[str, ...] = ()  # where manifest PFNs may point (roots always may)
    manifests: tuple[str, ...] = ()
    # Left out of every directory dataset (fnmatch on the LFN or any of its components). Hidden
    # files are data like any other; only bt-get's own state (a T3 sharing what it fetched) is not.
    exclude: tuple[str, ...] = (".bt-get",)
    # Serve a directory dataset only when every entry can be served (else the rest is served, and the
    # repository lists this site's replica as partial).
    require_whole: bool = False
    # A root that does not exist when bt-server starts is an error (a typo, a storage not mounted),
    # unless it may appear later (an automounted pool): then it is scanned at each rescan.
    roots_may_appear: bool = False
    tracker: str = "http://127.0.0.1:6969"
    # Every tracker of the federation (they share one store): heartbeats go
    # to each, and the .torrents list each in announce-list (BEP 12, one
    # tier) so clients fail over. Empty: `tracker` alone.
    trackers: tuple[str, ...] = ()
    repo: str = "http://127.0.0.1:8080"
    heartbeat_interval: Seconds = Seconds(10.0)
    idle_ttl: Seconds = Seconds(600.0)
    max_seeds: int = 50
    upload_rate_limit: Rate = Rate(0)  # all seeds together: "200MiB/s", "400mbit" (0: none)
    # Peers each seed uploads to at once (libtorrent's per-torrent unchoke
    # slots), 0: no limit. 1 spares the site: other T3s take the pieces from
    # the one being served (docs/benchmarks.md "egress").
    upload_slots: int = 1
    # A seed whose peers wait for blocks while nothing is uploaded for this long is stuck (its
    # storage hangs): the heartbeat says so and the tracker hands out other sites' seeds
    # instead, until uploads move again (btserver/stuck.py). 0: never stuck (detection off).
    stuck_after: Seconds = Seconds(10.0)
    # The site as a BEP 19 web seed (docs/webseeds.md): its own HTTP listener serving the
    # symlink farm under /data/<dataset>/<LFN> ("" : none), as clients reach it (default
    # http://<web_listen>; a TLS front's https:// URL), and its existing doors as URL templates
    # with {dataset} and {lfn}. The listener's requests are capped so that they never starve
    # the peer wire: bytes/s over all of them (0: none), at once (more wait up to
    # web_queue_timeout, then get 503).
    web_listen: str = ""
    web_url: str = ""
    web_seed_urls: tuple[str, ...] = ()
    web_rate_limit: Rate = Rate(0)
    web_max_requests: int = 16
    web_queue_timeout: Seconds = Seconds(5.0)
    private: bool = True
    hybrid: bool = False
    hash_threads: int = 0  # 0: one per core
    rucio: RucioConfig = field(default_factory=RucioConfig)  # the [server.rucio] table
    # TLS (docs/deploy-site.md): a PEM certificate (with its chain) and key make the control API listen on
    # https; ca_file, a PEM bundle, is trusted besides the system's CAs when it calls the tracker and the repository.
    tls_cert: str = ""
    tls_key: str = ""
    ca_file: str = ""
    # The peer wire of restricted datasets ([access] restricted; docs/deploy-site.md): the federation's peer CA
    # (PEM), this site's certificate from it (naming `*`) and its key; restricted datasets are seeded as SSL
    # torrents on peer_ssl_port (0: a free port; a fixed one for the firewall). None set: restricted datasets
    # are not seeded here (public ones are, as always).
    peer_ca: str = ""
    peer_cert: str = ""
    peer_key: str = ""
    peer_ssl_port: int = 0

    def tracker_urls(self) -> tuple[str, ...]:
        """The trackers' base URLs: `trackers`, else `tracker` (none when both are empty)."""
        return tuple(self.trackers) or ((self.tracker,) if self.tracker else ())

    def public_control_url(self) -> str:
        """The control API as others reach it: control_url, else http(s)://<listen>."""
        return self.control_url or f"{'https' if self.tls_cert else 'http'}://{self.listen}"

    def check_control_url(self) -> None:
        """A wildcard `listen` needs `control_url`: the tracker is told where the control API is.

        Checked once every key is read (the loader checks keys one by one), by `bt-server run`.
        """
        if is_wildcard(parse_hostport(self.listen)[0]) and not self.control_url:
            raise ConfigError("[server] control_url", f"needed with listen = {self.listen!r}: the tracker is told "
                                                      "where the control API is (e.g. http://HOST:8700)")

    def __post_init__(self) -> None:
        if self.kind not in SITE_KINDS:
            raise ConfigError("kind", f"must be one of {', '.join(SITE_KINDS)}, got {self.kind!r}")
        for key in ("listen", "peer_listen"):
            check_hostport(self, key)
        if self.peer_address:
            try:
                if ipaddress.ip_address(self.peer_address).is_unspecified:
                    raise ValueError
            except ValueError:
                raise ConfigError("peer_address", f"{self.peer_address!r} is not an address peers can reach "
                                                  "(this host's own IP address)") from None
        if self.web_listen:
            check_hostport(self, "web_listen")
        if self.web_url and not self.web_url.startswith(("http://", "https://")):
            raise ConfigError("web_url", f"{self.web_url!r} is not an http:// or https:// URL")
        for template in self.web_seed_urls:
            weburls.check_template("web_seed_urls", template)
        for key in ("max_seeds", "web_max_requests"):
            if getattr(self, key) < 1:
                raise ConfigError(key, f"must be at least 1, got {getattr(self, key)!r}")
        for key in ("upload_slots", "hash_threads"):
            if getattr(self, key) < 0:
                raise ConfigError(key, f"must not be negative, got {getattr(self, key)!r}")
        if self.stuck_after < 0:
            raise ConfigError("stuck_after", f"must not be negative (0 turns detection off), got {self.stuck_after!r}")
        if self.heartbeat_interval <= 0:
            raise ConfigError("heartbeat_interval", f"must be more than 0, got {self.heartbeat_interval!r}")
        given = [k for k in ("peer_ca", "peer_cert", "peer_key") if getattr(self, k)]
        if given and len(given) < 3:
            missing = [k for k in ("peer_ca", "peer_cert", "peer_key") if k not in given]
            raise ConfigError(missing[0], f"needed with {', '.join(given)} (the peer CA, this site's certificate "
                                          "from it and its key, all PEM files)")
        if not 0 <= self.peer_ssl_port <= 65535:
            raise ConfigError("peer_ssl_port", f"must be 0-65535, got {self.peer_ssl_port!r}")


def load(explicit: str | os.PathLike | None = None, *, overrides: Mapping[str, Any] | None = None,
         environ: Mapping[str, str] | None = None) -> ServerConfig:
    return load_section("server", ServerConfig, explicit, overrides=overrides, environ=environ)
