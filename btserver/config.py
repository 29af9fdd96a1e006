"""bt-server's section of the configuration file: [server]."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from torrents.config import Bytes, Seconds, default_state_dir, load_section
from torrents.devsecret import DEV_SECRET
from torrents.errors import ConfigError
from torrents.hostport import check_hostport, parse_hostport


@dataclass(frozen=True)
class ServerConfig:
    site: str = "site1"
    secret: str = DEV_SECRET  # allowed on loopback only (torrents/devsecret.py)
    listen: str = "127.0.0.1:8700"  # control API
    peer_listen: str = "127.0.0.1:6881"  # libtorrent
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
    upload_rate_limit: Bytes = Bytes(0)  # bytes/s, 0: unlimited
    # Peers each seed uploads to at once (libtorrent's per-torrent unchoke
    # slots), 0: no limit. 1 spares the site: other T3s take the pieces from
    # the one being served (docs/benchmarks.md has the measured figures).
    upload_slots: int = 1
    private: bool = True
    hybrid: bool = False
    hash_threads: int = 0  # 0: one per core
    # TLS (docs/deploy-site.md): a PEM certificate (with its chain) and key make the control API listen on
    # https; ca_file, a PEM bundle, is trusted besides the system's CAs when it calls the tracker and the repository
    # (else $BTSWARM_CA_FILE).
    tls_cert: str = ""
    tls_key: str = ""
    ca_file: str = ""

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
        if _unspecified(parse_hostport(self.listen)[0]) and not self.control_url:
            raise ConfigError("[server] control_url", f"needed with listen = {self.listen!r}: the tracker is told "
                                                      "where the control API is (e.g. http://HOST:8700)")

    def __post_init__(self) -> None:
        for key in ("listen", "peer_listen"):
            check_hostport(self, key)
        # Told to others (heartbeats): a wildcard address would send peers to themselves.
        peer_host = parse_hostport(self.peer_listen)[0]
        if _unspecified(peer_host):
            raise ConfigError("peer_listen", f"{self.peer_listen!r}: the tracker hands this address to peers; give "
                                             f"this host's own address, the one they reach, not {peer_host}")
        for key in ("max_seeds",):
            if getattr(self, key) < 1:
                raise ConfigError(key, f"must be at least 1, got {getattr(self, key)!r}")
        for key in ("upload_slots", "hash_threads"):
            if getattr(self, key) < 0:
                raise ConfigError(key, f"must not be negative, got {getattr(self, key)!r}")
        if self.heartbeat_interval <= 0:
            raise ConfigError("heartbeat_interval", f"must be more than 0, got {self.heartbeat_interval!r}")


def _unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def load(explicit: str | os.PathLike | None = None, *, overrides: Mapping[str, Any] | None = None,
         environ: Mapping[str, str] | None = None) -> ServerConfig:
    return load_section("server", ServerConfig, explicit, overrides=overrides, environ=environ)
