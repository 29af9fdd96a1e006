"""bt-repo's section of the configuration file: [repo]."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from torrents.config import Seconds, default_state_dir, load_section
from torrents.devsecret import DEV_SECRET
from torrents.errors import ConfigError
from torrents.hostport import check_hostport
from torrents.sitekinds import T2, check_kinds, check_sites, kind_of


@dataclass(frozen=True)
class RepoConfig:
    listen: str = "127.0.0.1:8080"
    state: str = field(default_factory=lambda: default_state_dir("repo"))
    tracker: str = "http://127.0.0.1:6969"  # for live swarm state
    public_url: str = ""  # as users reach it; default http(s)://<listen>
    # bt-repo run --processes: several processes on one port (SO_REUSEPORT), all reading the one catalog
    processes: int = 1
    # How often the tracker's swarms are sampled for the dataset page's last day (btrepo/swarmlog.py); 0: never.
    swarm_sample_interval: Seconds = Seconds(300.0)
    # site → its secret, the same as that site's [server] secret; DEV_SECRET is allowed on loopback only
    site_secrets: Mapping[str, str] = field(default_factory=lambda: {"site1": DEV_SECRET})
    # site → "T2" (a storage site, the default) or "T3" (a Tier-3 sharing what it fetched): what it may publish
    # (docs/deploy-site.md, "What each role may do"); the same table as the tracker's [tracker] site_kinds.
    site_kinds: Mapping[str, str] = field(default_factory=dict)
    # T2 sites that may publish a new version of any dataset, also one they never held (where datasets are
    # made); every other T2 only of a dataset whose served version it holds or has held.
    curators: tuple[str, ...] = ()
    # TLS (docs/deploy-site.md): a PEM certificate (with its chain) and key make the pages and the API listen on
    # https; ca_file, a PEM bundle, is trusted besides the system's CAs when it asks the tracker for swarms.
    tls_cert: str = ""
    tls_key: str = ""
    ca_file: str = ""
    # Restricted datasets' peer wire (btrepo/peercerts.py, docs/deploy-site.md): the federation's peer CA and
    # its key sign T3s' certificate requests (POST /api/peer-certificate) for this long. peer_cert_anyone
    # signs for anyone who asks (a test bed's setting, until the token check decides who may read what).
    peer_ca: str = ""
    peer_ca_key: str = ""
    peer_cert_lifetime: Seconds = Seconds(12 * 3600.0)
    peer_cert_anyone: bool = False

    def __post_init__(self) -> None:
        check_hostport(self, "listen")
        check_kinds("site_kinds", self.site_kinds)
        if not 1 <= self.processes <= 64:
            raise ConfigError("processes", f"must be 1 to 64, got {self.processes}")

    def kind_of(self, site: str) -> str:
        return kind_of(site, self.site_kinds)

    def check_roles(self) -> None:
        """Every site of site_kinds and curators has a secret, and a curator is a T2 (rules across keys,
        checked once every key is read)."""
        check_sites("[repo] site_kinds", self.site_kinds, self.site_secrets)
        check_sites("[repo] curators", self.curators, self.site_secrets)
        for site in self.curators:
            if self.kind_of(site) != T2:
                raise ConfigError("[repo] curators", f"{site}: is a {self.kind_of(site)} in site_kinds; a curator "
                                                     "is a storage site (T2)")


def load(explicit: str | os.PathLike | None = None, *, overrides: Mapping[str, Any] | None = None,
         environ: Mapping[str, str] | None = None) -> RepoConfig:
    return load_section("repo", RepoConfig, explicit, overrides=overrides, environ=environ)
