"""bt-server's section of the configuration file: [server]."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from torrents.config import Bytes, Seconds, default_state_dir, load_section
from torrents.errors import ConfigError
from torrents.hostport import check_hostport

from btserver import weburls


@dataclass(frozen=True)
class ServerConfig:
    site: str = "site1"
    secret: str = "btswarm-dev-secret"
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
    # The site as a BEP 19 web seed (docs/webseeds.md): its own HTTP listener serving the
    # symlink farm under /data/<dataset>/<LFN> ("" : none), as clients reach it (default
    # http://<web_listen>; a TLS front's https:// URL), and its existing doors as URL templates
    # with {dataset} and {lfn}. The listener's requests are capped so that they never starve
    # the peer wire: bytes/s over all of them (0: none), at once (more wait up to
    # web_queue_timeout, then get 503).
    web_listen: str = ""
    web_url: str = ""
    web_seed_urls: tuple[str, ...] = ()
    web_rate_limit: Bytes = Bytes(0)
    web_max_requests: int = 16
    web_queue_timeout: Seconds = Seconds(5.0)
    private: bool = True
    hybrid: bool = False
    hash_threads: int = 0  # 0: one per core

    def tracker_urls(self) -> tuple[str, ...]:
        """The trackers' base URLs: `trackers`, else `tracker` (none when both are empty)."""
        return tuple(self.trackers) or ((self.tracker,) if self.tracker else ())

    def __post_init__(self) -> None:
        for key in ("listen", "peer_listen"):
            check_hostport(self, key)
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
        if self.heartbeat_interval <= 0:
            raise ConfigError("heartbeat_interval", f"must be more than 0, got {self.heartbeat_interval!r}")


def load(explicit: str | os.PathLike | None = None, *, overrides: Mapping[str, Any] | None = None,
         environ: Mapping[str, str] | None = None) -> ServerConfig:
    return load_section("server", ServerConfig, explicit, overrides=overrides, environ=environ)
