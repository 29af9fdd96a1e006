"""bt-repo's section of the configuration file: [repo]."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from torrents.config import default_state_dir, load_section
from torrents.devsecret import DEV_SECRET
from torrents.hostport import check_hostport


@dataclass(frozen=True)
class RepoConfig:
    listen: str = "127.0.0.1:8080"
    state: str = field(default_factory=lambda: default_state_dir("repo"))
    tracker: str = "http://127.0.0.1:6969"  # for live swarm state
    public_url: str = ""  # as users reach it; default http(s)://<listen>
    # site → its secret, the same as that site's [server] secret; DEV_SECRET is allowed on loopback only
    site_secrets: Mapping[str, str] = field(default_factory=lambda: {"site1": DEV_SECRET})
    # TLS (docs/deploy-site.md): a PEM certificate (with its chain) and key make the pages and the API listen on
    # https; ca_file, a PEM bundle, is trusted besides the system's CAs when it asks the tracker for swarms
    # (else $BTSWARM_CA_FILE).
    tls_cert: str = ""
    tls_key: str = ""
    ca_file: str = ""

    def __post_init__(self) -> None:
        check_hostport(self, "listen")


def load(explicit: str | os.PathLike | None = None, *, overrides: Mapping[str, Any] | None = None,
         environ: Mapping[str, str] | None = None) -> RepoConfig:
    return load_section("repo", RepoConfig, explicit, overrides=overrides, environ=environ)
