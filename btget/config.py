"""bt-get's section of the configuration file: [get]."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from urllib.parse import urlsplit
from typing import Any, Mapping

from torrents.config import Rate, Seconds, load_section
from torrents.errors import ConfigError


@dataclass(frozen=True)
class GetConfig:
    repo: str = "http://127.0.0.1:8080"
    output: str = "."
    workers: int | str = 1  # a number, or "auto" (one per core, capped)
    # Address of the libtorrent sessions: "" listens on every address of both families and lets the
    # kernel choose where each connection leaves from, as any host on a real network needs; one address
    # (a multi-homed host, or several clients on one host's loopback) binds listening and connections to
    # it. Ports are chosen free.
    listen: str = ""
    seed_time: Seconds = Seconds(0.0)
    # With no seed_time or seed_ratio, a complete run goes on serving the T3s connected to it that are still
    # downloading, while they take pieces, for at most this long (0: leave at completion). Leaving at once
    # took the first T3's uplink from a busy swarm: the others finished from the sites alone.
    linger: Seconds = Seconds(30.0)
    seed_ratio: float = 0.0
    timeout: Seconds = Seconds(0.0)  # 0: no limit
    stall_timeout: Seconds = Seconds(300.0)  # 0: no limit
    blocked_after: Seconds = Seconds(30.0)  # seeds connected, no byte arriving: name the stuck files (0: never)
    max_connections: int = 200
    # The whole run's rates, all workers together, bytes/s ("50MB/s", "400mbit"; 0: none): a
    # campus link shared with everyone else. Trading between this run's own workers is not counted.
    max_rate: Rate = Rate(0)
    max_upload_rate: Rate = Rate(0)
    # The sites' web seeds (btget/transfer/webseeds.py): "auto" when BitTorrent peers send nothing for
    # web_seed_after (or are blocked outright), "always" from the start, "off" never.
    web_seeds: str = "auto"
    web_seed_after: Seconds = Seconds(5.0)
    ca_file: str = ""  # a PEM bundle trusted besides the system's CAs for https://
    # "env": every HTTP request (repository, announces, web seeds) goes through the proxy that http_proxy,
    # https_proxy and no_proxy name for it (torrents/proxyenv.py); "off": none, whatever they say.
    proxy: str = "env"
    # This host accepts no inbound connection (NAT, a closed firewall): the announces say so (inbound=0)
    # and the tracker never hands it out to other peers, who could not reach it (docs/bt-get.md).
    closed: bool = False
    # The user's bearer token for members-only datasets (btget/resolve/bearer.py); "": WLCG Bearer Token Discovery
    # ($BEARER_TOKEN, $BEARER_TOKEN_FILE, $XDG_RUNTIME_DIR/bt_u$UID, /tmp/bt_u$UID).
    token_file: str = ""
    # Sites by name (btget/transfer/sitechoice.py): preferred ones first, the others only while none of those sends;
    # sites left out never connected, their web seeds never used.
    prefer_sites: tuple[str, ...] = ()
    exclude_sites: tuple[str, ...] = ()
    # Restricted datasets (members only; docs/bt-get.md): the federation's peer CA, this T3's peer certificate
    # from it (naming the datasets it may fetch) and the key it made; read again when due for renewal.
    peer_ca: str = ""
    peer_cert: str = ""
    peer_key: str = ""


    def __post_init__(self) -> None:
        parts = urlsplit(self.repo)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            hint = f" (write http://{self.repo})" if "://" not in self.repo else ""
            raise ConfigError("repo", f"{self.repo!r} is not an http(s) URL{hint}")
        workers = self.workers
        if isinstance(workers, str) and workers.strip().isdigit():
            workers = int(workers)
        if isinstance(workers, bool) or not (workers == "auto" or (isinstance(workers, int) and workers >= 1)):
            raise ConfigError("workers", f"expected a whole number of at least 1, or 'auto', got {self.workers!r}")
        object.__setattr__(self, "workers", workers)
        if self.seed_ratio < 0:
            raise ConfigError("seed_ratio", f"must not be negative, got {self.seed_ratio!r}")
        if self.proxy not in ("env", "off"):
            raise ConfigError("proxy", f"expected env or off, got {self.proxy!r}")
        if self.web_seeds not in ("auto", "off", "always"):
            raise ConfigError("web_seeds", f"expected auto, off or always, got {self.web_seeds!r}")
        if self.listen:
            try:
                ipaddress.ip_address(self.listen)
            except ValueError:
                raise ConfigError("listen", f"{self.listen!r} is not an IP address (\"\" listens on every address)") from None
        if self.max_connections < 1:
            raise ConfigError("max_connections", f"must be at least 1, got {self.max_connections!r}")


def load(explicit: str | os.PathLike | None = None, *, overrides: Mapping[str, Any] | None = None,
         environ: Mapping[str, str] | None = None) -> GetConfig:
    return load_section("get", GetConfig, explicit, overrides=overrides, environ=environ)
