"""libtorrent session settings shared by bt-server seeds and bt-get workers.

What decides whether anything moves (measured; docs/benchmarks.md):
TCP only (uTP crawls on loopback), and no DHT, local discovery, UPnP or
NAT-PMP (no traffic off the federation). A session given an address
listens there and binds its outgoing connections to it (several processes
on one host's loopback each on a 127.0.0.x of their own); a session given
ANY listens on every address of both families, on one port, and lets the
kernel choose the source of each connection, as a host on a real network
must: bound to 127.0.0.1 it reaches nothing beyond itself. Imports
libtorrent: use it only from the processes that run a session.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from pathlib import Path
from typing import Any, Callable, Mapping

import libtorrent as lt

from torrents import measuring, metainfo, peerca
from torrents.errors import ConfigError
from torrents.hostport import ANY, is_wildcard
from torrents.proxyenv import Proxy
from torrents.procs import free_port

log = logging.getLogger("btswarm.ltsession")

ALERTS = (lt.alert.category_t.error_notification | lt.alert.category_t.status_notification
          | lt.alert.category_t.storage_notification | lt.alert.category_t.tracker_notification
          | lt.alert.category_t.peer_notification | lt.alert.category_t.connect_notification)


def listen_interfaces(listen_ip: str, port: int = 0, ssl_port: int | None = None) -> str:
    """libtorrent's listen_interfaces for `listen_ip` (ANY: both wildcards) on `port` (0: a free one), and
    with `ssl_port` (not None; 0: a free one) an SSL socket beside it for restricted datasets' torrents.

    For a wildcard libtorrent opens a socket on each address of the host, each on its own port when
    asked for port 0; one port for all of them is what peers, the tracker and sibling workers expect."""
    if listen_ip == ANY:
        port = port or free_port_everywhere()
        hosts = ["0.0.0.0", "[::]"]
        if ssl_port == 0:
            ssl_port = free_port_everywhere()
    else:
        hosts = [f"[{listen_ip}]" if ":" in listen_ip else listen_ip]
    plain = [f"{h}:{port}" for h in hosts]
    # The SSL socket only carries SSL torrents (TLS with SNI = info-hash); plain torrents never use it.
    return ",".join(plain + ([f"{h}:{ssl_port}s" for h in hosts] if ssl_port is not None else []))


def free_port_everywhere() -> int:
    """A TCP port free on every address of both families (Linux binds "::" dual-stack by default), else on
    every IPv4 address when the host has no IPv6."""
    try:
        return free_port("::")
    except OSError:
        return free_port("0.0.0.0")


# Nothing leaves the federation by itself: no DHT, local discovery, UPnP or NAT-PMP; TCP only.
_ISOLATED: dict[str, Any] = {
    "enable_outgoing_utp": False,
    "enable_incoming_utp": False,
    "enable_dht": False,
    "enable_lsd": False,
    "enable_upnp": False,
    "enable_natpmp": False,
    "dht_bootstrap_nodes": "",
}

# How the session talks to the federation's trackers.
_ANNOUNCES: dict[str, Any] = {
    # Trackers here are on private addresses; libtorrent's SSRF guard
    # would refuse announce URLs on loopback that have a query path.
    "ssrf_mitigation": False,
    # An https tracker's certificate is checked (name or IP included) against the system's
    # CAs and a federation's own (torrents.servicekit.tls.trust_in_libtorrent).
    "validate_https_trackers": True,
    "tick_interval": 100,
    "announce_to_all_trackers": True,
    "stop_tracker_timeout": 1,
    # Failover between the federation's trackers (one announce-list tier):
    # libtorrent asks them in turn, and moves on when one does not answer
    # in time. A hung tracker host (it accepts, never answers) cost the
    # default 30 s before the next was asked; our trackers answer in
    # milliseconds, or after at most start_wait (2 s) while a site starts
    # a seed, so 5 s is enough and a new T3 is served in ~5 s
    # (docs/reliability.md). A dead one (connection refused) costs nothing.
    "tracker_completion_timeout": 5,
    "tracker_receive_timeout": 4,
    # The federation's tracker sets the interval (60 s by default); libtorrent
    # would stretch anything under 300 s to 300 s, so after a tracker restart
    # peers would stay unknown to it for five minutes.
    "min_announce_interval": 5,
}

# Peers, requests, buffers and disk: sized for a few fast links between sites, not thousands of slow ones.
_TRANSFER: dict[str, Any] = {
    "connection_speed": 200,
    "smooth_connects": False,
    "min_reconnect_time": 1,
    "peer_connect_timeout": 3,
    "handshake_timeout": 5,
    "connections_limit": 500,
    "unchoke_slots_limit": 64,
    "max_out_request_queue": 1500,
    "max_allowed_in_request_queue": 4000,
    "request_queue_time": 2,
    "send_buffer_watermark": 8 * 1024 * 1024,
    "send_buffer_low_watermark": 1024 * 1024,
    "send_buffer_watermark_factor": 150,
    "max_queued_disk_bytes": 256 * 1024 * 1024,
    "aio_threads": 8,
    "hashing_threads": 2,
    "file_pool_size": 500,
    "active_downloads": -1,
    "active_seeds": -1,
    "active_limit": -1,
    "active_checking": 4,
    "auto_manage_startup": 0,
    "allow_multiple_connections_per_ip": True,
}

# A site's seeding session on top.
_SEEDING: dict[str, Any] = {
    "seeding_outgoing_connections": False,
    "close_file_interval": 30,
    # A seed's upload slots change with what its peers want (btserver/uploadslots.py) and a
    # slot is freed when a T3 completes; libtorrent hands a slot out only at its next unchoke
    # round (15 s by default), so a second shard waited 15 s. A round costs a sort of the
    # peers; rotation is not faster for it (round robin keeps a peer unchoked for at least a
    # minute and `seeding_piece_quota` pieces).
    "unchoke_interval": 1,
}


def settings(listen_ip: str, port: int = 0, *, seeding: bool = False, ssl_port: int | None = None,
             **extra: Any) -> dict[str, Any]:
    """A settings pack for a session on `listen_ip:port` (ANY: every address; port 0: a free port), with an
    SSL socket on `ssl_port` too when it is not None (PeerCerts)."""
    pack: dict[str, Any] = {
        "listen_interfaces": listen_interfaces(listen_ip, port, ssl_port),
        # Bound to one address, every connection leaves from it; listening on a wildcard, from where the route says.
        "outgoing_interfaces": "" if is_wildcard(listen_ip) else listen_ip,
        **_ISOLATED,
        "alert_mask": int(ALERTS),
        "user_agent": "btswarm/0.1 libtorrent/" + lt.__version__,
        **_ANNOUNCES,
        **_TRANSFER,
    }
    if seeding:
        pack.update(_SEEDING)
    pack.update(extra)
    pack.update(measuring.libtorrent_settings(seeding))  # a benchmark's, said at WARNING
    return pack


def proxy_settings(proxy: Proxy | None) -> dict[str, Any]:
    """Settings that send a session's tracker announces through HTTP proxy `proxy` (None: none, direct).

    Only the announces: the peer wire is no HTTP (a site's squid would refuse a CONNECT to a peer port),
    and bt-get's web seeds reach libtorrent through its loopback relay, which goes through the proxy
    itself (btget/worker/doorrelay.py), so peer connections, web seeds' included, stay direct.
    """
    if proxy is None:
        return {}
    return {"proxy_type": int(lt.proxy_type_t.http_pw if proxy.username else lt.proxy_type_t.http),
            "proxy_hostname": proxy.host, "proxy_port": proxy.port,
            "proxy_username": proxy.username, "proxy_password": proxy.password,
            "proxy_hostnames": True, "proxy_tracker_connections": True, "proxy_peer_connections": False}


def session(listen_ip: str, port: int = 0, **kw: Any) -> "lt.session":
    return lt.session(settings(listen_ip, port, **kw))


class PeerCerts:
    """A session's peer certificate for its restricted datasets' SSL torrents (torrents.peerca).

    `add(atp)` makes a torrent an SSL torrent of the federation's peer CA before it is added (the info-hash
    stays the public one); libtorrent then asks for a certificate (torrent_need_cert_alert, handled by
    `on_need_cert`) and holds it in memory only. `renew_if_due(now)` takes a new certificate from `load`
    (the files again, which an operator's renewal rewrites, or a fresh one from the repository) once
    peerca.RENEW_AT of the current one's lifetime is gone, and sets it on every SSL torrent: connections
    open keep going, new handshakes present the new one. A torrent added later gets the newest.
    """

    def __init__(self, ca_pem: bytes, load: Callable[[], tuple[bytes, bytes]], subject: str = "peer certificate",
                 clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.timezone.utc)) -> None:
        self.ca = ca_pem
        self.subject = subject
        self.load = load  # where a renewed certificate comes from (a caller may give another)
        self._clock = clock
        self._lock = threading.Lock()
        self.cert, self.key = load()
        peerca.load_cert(self.cert, subject)
        self.renewals = 0
        self._handles: dict[str, Any] = {}  # info-hash → handle of an SSL torrent that holds our certificate
        self._held: dict[str, Any] = {}  # info-hash → the start flags of a torrent added, not yet given one

    def add(self, atp: "lt.add_torrent_params") -> "lt.add_torrent_params":
        atp.root_certificate = self.ca
        # Held (paused, out of the queue) until libtorrent asks for the certificate, then started as the
        # caller added it (on_need_cert): started at once, its first announce left without one, the
        # restricted swarm's tracker refused it, and the fetch waited for the next announce.
        start = lt.torrent_flags.paused | lt.torrent_flags.auto_managed
        self._held[str(atp.ti.info_hashes().v1)] = atp.flags & start
        atp.flags = (atp.flags & ~start) | lt.torrent_flags.paused
        return atp

    def check(self, name: str) -> None:
        """PeerCertError saying why the certificate cannot trade dataset `name`, if it cannot (libtorrent
        itself would only fail every handshake, silently)."""
        peerca.check_usable(self.cert, self.key, self.ca, name, self._clock(), self.subject)

    def on_need_cert(self, alert: Any) -> None:
        ih = str(alert.handle.info_hashes().v1)
        with self._lock:
            self._set(alert.handle)
            self._handles[ih] = alert.handle
            flags = self._held.pop(ih, None)
        if flags is not None and flags & lt.torrent_flags.auto_managed:
            alert.handle.set_flags(lt.torrent_flags.auto_managed)  # the queue starts it
        elif flags is not None and not flags & lt.torrent_flags.paused:
            alert.handle.resume()

    def forget(self, info_hash: str) -> None:
        with self._lock:
            self._handles.pop(info_hash, None)

    def renew_if_due(self, now: dt.datetime | None = None) -> bool:
        """Take and set a new certificate if the current one is due; True when one was set."""
        now = now or self._clock()
        if now < peerca.renew_at(self.cert):
            return False
        cert, key = self.load()
        if peerca.expires(cert) <= peerca.expires(self.cert):
            log.warning("%s: due for renewal (expires %s) but no newer one is given", self.subject,
                        f"{peerca.expires(self.cert):%Y-%m-%d %H:%M:%S} UTC")
            return False
        with self._lock:
            self.cert, self.key = cert, key
            self.renewals += 1
            for ih, handle in list(self._handles.items()):
                if handle.is_valid():
                    self._set(handle)
                else:
                    del self._handles[ih]
        log.info("%s: renewed, valid until %s", self.subject, f"{peerca.expires(cert):%Y-%m-%d %H:%M:%S} UTC")
        return True

    def to_json(self) -> dict[str, Any]:
        """What an operator's status shows: the names, when it expires, when it is due for renewal."""
        return {"names": list(peerca.cert_names(self.cert)), "renewals": self.renewals,
                "expires": f"{peerca.expires(self.cert):%Y-%m-%dT%H:%M:%SZ}",
                "renew_at": f"{peerca.renew_at(self.cert):%Y-%m-%dT%H:%M:%SZ}"}

    def problem(self, now: dt.datetime | None = None) -> str | None:
        """Expired, or due and not renewed: a sentence for the status's problems; else None."""
        now = now or self._clock()
        end = peerca.expires(self.cert)
        if now >= end:
            return f"{self.subject}: expired at {end:%Y-%m-%d %H:%M:%S} UTC: restricted datasets' new peers are refused"
        if now >= peerca.renew_at(self.cert):
            return (f"{self.subject}: due for renewal, no newer one given; it expires at "
                    f"{end:%Y-%m-%d %H:%M:%S} UTC")
        return None

    def _set(self, handle: Any) -> None:
        handle.set_ssl_certificate_buffer(self.cert.decode(), self.key.decode(), peerca.DH_PARAMS.decode())


def peer_certs(ca_path: str, cert_path: str, key_path: str, section: str) -> PeerCerts | None:
    """The PeerCerts of `[section] peer_ca, peer_cert, peer_key` (None when none is set), checked now: a
    certificate of another CA, expired, or not matching its key is a ConfigError naming the key."""
    if not (ca_path or cert_path or key_path):
        return None
    try:
        ca = Path(ca_path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"[{section}] peer_ca", f"{ca_path}: cannot read ({exc.strerror})") from None
    certs = PeerCerts(ca, read_peer_cert(cert_path, key_path, f"[{section}]"), f"[{section}] peer_cert")
    try:
        peerca.check_usable(certs.cert, certs.key, ca, None, dt.datetime.now(dt.timezone.utc), cert_path)
    except peerca.PeerCertError as exc:
        raise ConfigError(f"[{section}] peer_cert", str(exc)) from None
    return certs


def read_peer_cert(cert_path: str, key_path: str, subject: str) -> Callable[[], tuple[bytes, bytes]]:
    """A PeerCerts `load` reading a certificate and key file each time (the operator's renewal rewrites them)."""
    def load() -> tuple[bytes, bytes]:
        cert, key = peerca.read_files(subject, (("peer_cert", cert_path), ("peer_key", key_path)))
        return cert, key
    return load


def limit_everyone(ses: "lt.session", exempt: tuple[str, ...] = ()) -> None:
    """Put every peer in libtorrent's global peer class, `exempt` addresses (IPv4) apart.

    libtorrent puts peers on loopback and private networks in its "local"
    class, which rate limits and unchoke slots skip: a site's limits protect
    its storage from every peer, the campus ones too (the federation's T3s
    are often on private networks), and a T3's cap is for its campus link.
    An exempt address (bt-get's own, where its sibling workers listen)
    stays local: trading between workers never crosses the link.
    """
    everyone = lt.ip_filter()
    everyone.add_rule("0.0.0.0", "255.255.255.255", 1 << lt.session.global_peer_class_id)
    everyone.add_rule("::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 1 << lt.session.global_peer_class_id)
    for ip in exempt:
        everyone.add_rule(ip, ip, 1 << lt.session.local_peer_class_id)
    ses.set_peer_class_filter(everyone)


# libtorrent's own parse limits, as wide as torrents.metainfo.parse's (which every torrent
# passes first): its defaults (10 MB, 3 million tokens) refuse a 200,000-file torrent.
_LIMITS = metainfo.DEFAULT_READ_LIMITS
LOAD_LIMITS = {"max_buffer_size": _LIMITS.max_bytes, "max_pieces": _LIMITS.max_pieces,
               "max_decode_depth": _LIMITS.max_depth + 8, "max_decode_tokens": 8 * _LIMITS.max_files + 1024}


def torrent_info(data: bytes) -> "lt.torrent_info":
    """A .torrent's torrent_info, parsed straight from its bytes.

    Not `torrent_info(bdecode(data))`: that builds the whole file list as Python
    objects first: far slower (docs/benchmarks.md "cost").
    """
    return lt.torrent_info(data, LOAD_LIMITS)


def torrent_params(info: "lt.torrent_info", save_path: str, own_names: Mapping[int, str],
                   atp: "lt.add_torrent_params | None" = None) -> "lt.add_torrent_params":
    """add_torrent_params for a torrent whose every file keeps the name its info dict gives.

    libtorrent renames files whose paths differ only in case (`xt_tcpmss.1.c`);
    renamed_files (applied to the torrent's own copy of its file list, not by
    moving files) gives them their names back, on seeds and clients alike.
    `own_names` is torrents.metainfo.own_names of the torrent.
    """
    atp = atp or lt.add_torrent_params()
    atp.ti = info
    atp.save_path = save_path
    atp.renamed_files = dict(own_names)
    return atp


class Alerts:
    """Alerts to handlers by type: `Alerts({lt.state_update_alert: self._on_state, ...})`, then `alerts(a)` for
    each popped alert, or `alerts.drain(ses)`. An alert nobody handles is counted by name (`unhandled`), not
    dropped unseen: a handler missing for a type asked for in the alert mask shows there.

    One table instead of an `isinstance` chain: each handler is a method of its own that a test can call,
    and a handler that raises names its alert's type in the error.
    """

    def __init__(self, handlers: Mapping[type, Any]) -> None:
        self._handlers = dict(handlers)
        self._resolved: dict[type, Any] = {}  # an alert's own type → its handler (or None), found once
        self.unhandled: dict[str, int] = {}
        self.handled: dict[str, int] = {}  # by type name: what a run's alerts cost (tests/btget/test_perfile.py)

    def __call__(self, alert: Any) -> None:
        kind = type(alert)
        if kind not in self._resolved:
            self._resolved[kind] = next((self._handlers[k] for k in kind.__mro__ if k in self._handlers), None)
        handler = self._resolved[kind]
        if handler is None:
            self.unhandled[kind.__name__] = self.unhandled.get(kind.__name__, 0) + 1
            return
        self.handled[kind.__name__] = self.handled.get(kind.__name__, 0) + 1
        try:
            handler(alert)
        except Exception as exc:
            exc.add_note(f"while handling a libtorrent {kind.__name__}")
            raise

    def drain(self, ses: "lt.session") -> list[Any]:
        """Pop every pending alert and handle each, in order; returns them (they live until the next pop)."""
        alerts = ses.pop_alerts()
        for alert in alerts:
            self(alert)
        return alerts
