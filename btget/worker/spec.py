"""A share, as one libtorrent session fetches it: `WorkerSpec`, and the restricted dataset's certificates it holds.

Made by the parent (btget/transfer/download.py) for each worker, and by `bt-get --serve`
(btget/swarmread/serve.py) for its one session; read by every part of a session that fetches a share.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

from torrents import peerid
from torrents.hostport import ANY
from torrents.proxyenv import NONE, Proxies, Proxy

from btget.resolve.bearer import TokenSource

RESUME_SUFFIX = ".resume"
RENEW_CHECK_EVERY = 5.0  # seconds between looks at whether the peer certificate is due for renewal


@dataclass(frozen=True)
class WorkerSpec:
    index: int  # 1-based, as shown to the user
    torrent: bytes  # the .torrent file
    save_path: str  # DIR: libtorrent writes DIR/NAME/<LFN>
    state_dir: str  # DIR/NAME/.bt-get
    key: str  # names this share's resume state (plan.share_key)
    wanted: tuple[int, ...]  # file indices this worker downloads; the rest get priority 0
    listen_ip: str = ANY  # one address, or every address of the host (the sessions' connections then unbound)
    peers: tuple[tuple[str, int], ...] = ()
    web_seeds: tuple[str, ...] = ()  # HTTP sources (BEP 19) used from the start; the parent adds and drops them
    url_list: tuple[str, ...] = ()  # every web seed it may be told to use (the torrent's, --web-seed): naming
    own_names: dict[int, str] = field(default_factory=dict)  # torrents.metainfo.own_names: case twins
    recheck: bool = False  # --check: ignore saved resume state, hash what is on disk
    max_connections: int = 200
    report_interval: float = 0.5
    # Resume state is written at most this often while pieces arrive: a kill -9
    # then costs at most this long of transfer on the rerun.
    resume_interval: float = 0.5
    # This run's peer-id prefix (download.sibling_prefix); the worker's peer id is it plus its index and
    # part (torrents/peerid.py). A connection whose peer id starts with it is a sibling worker, whatever
    # its address.
    peer_prefix: str = ""
    part: str = ""  # torrents.peerid.part_tag of its files when it wants part of the dataset, else ""
    site_peers: tuple[str, ...] = ()  # the sites' seeds, 'ip:port' (the tracker's /api/sites): btget/worker/siteshare.py
    prefer_ips: tuple[str, ...] = ()  # the addresses of the sites the user prefers (--prefer-site): btget/worker/steering.py
    exclude_ips: tuple[str, ...] = ()  # and of those left out (--exclude-site): never connected
    rates: tuple[int, int] = (0, 0)  # its part of the run's caps, (download, upload) bytes/s; 0: none
    proxies: Proxies = NONE  # the web seeds' proxies, for the relay (torrents/proxyenv.py)
    tracker_proxy: Proxy | None = None  # the proxy libtorrent announces through (btget/resolve/reach.py)
    token: TokenSource | None = None  # a members-only dataset: the user's token, sent to its web seeds
    # A restricted dataset (torrents.access): (peer CA, certificate, key) files; the torrent is an SSL torrent
    # of that CA on an SSL socket of its own, and the certificate is read again when it is due for renewal.
    peer_cert: tuple[str, str, str] = ()
    # (repository URL, CA file) when the certificate came from the repository: renewed by asking it again.
    peer_cert_repo: tuple[str, str] = ()

    @property
    def peer_fingerprint(self) -> str:
        return peerid.fingerprint(self.peer_prefix, self.index, self.part) if self.peer_prefix else ""

    @property
    def resume_path(self) -> str:
        return os.path.join(self.state_dir, f"{self.key}{RESUME_SUFFIX}")

    @property
    def stale_path(self) -> str:
        """Where a state that may claim what is not on disk waits to be written over (write_resume's room)."""
        return f"{self.resume_path}.stale"

    @property
    def part_dir(self) -> str:
        return os.path.join(self.state_dir, self.key)


def peer_certs_of(spec: WorkerSpec) -> Any:
    """The share's PeerCerts (a restricted dataset), renewed from the repository when it gave the
    certificate, else from the files again; None for a public dataset. Shared with `bt-get --serve`."""
    if not spec.peer_cert:
        return None
    from torrents.servicekit import ltsession

    certs = ltsession.peer_certs(*spec.peer_cert, "get")
    if spec.peer_cert_repo:
        from btget.resolve import peercert

        certs.load = peercert.renewer(*spec.peer_cert_repo, ltsession.torrent_info(spec.torrent).name(),
                                      token=spec.token)
    return certs


class CertRenewal:
    """A long fetch or --seed-time outlives a T3's certificate: the share's PeerCerts (None: a public dataset)
    looked at every RENEW_CHECK_EVERY seconds, and renewed in time when due."""

    def __init__(self, certs: Any, log: logging.Logger) -> None:
        self.certs = certs
        self.log = log  # the session's: a failure is said under its name
        self.next = 0.0

    def due(self, now: float) -> bool:
        """Whether to look now (`now`: time.monotonic()); the next look is then RENEW_CHECK_EVERY away."""
        if self.certs is None or now < self.next:
            return False
        self.next = now + RENEW_CHECK_EVERY
        return True

    def on_need_cert(self, alert: Any) -> None:
        """torrent_need_cert_alert: the SSL torrent wants its certificate."""
        if self.certs is not None:
            self.certs.on_need_cert(alert)

    def renew(self) -> None:
        """Renew if due (a repository's renewal is an HTTP request: blocking)."""
        try:
            self.certs.renew_if_due()
        except Exception as exc:  # noqa: BLE001 - the current certificate holds; tried again later
            self.log.warning("peer certificate: renewal failed: %s", exc)
