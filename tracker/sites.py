"""The sites the tracker knows, from their signed heartbeats.

A site is up while its heartbeats keep coming; after three missed beats it
is down and no seed is asked of it (its info-hashes stay known: the data
did not go away). `holders` indexes which sites can seed which info-hash,
rebuilt per heartbeat, so an announce looks it up in O(1); `stuck` which
seeds' endpoints the sites say are stuck (their storage hangs: btserver/stuck.py),
which are neither handed out nor counted until the site says they recovered.

SiteRegistry keeps the sites in this process; RedisSiteRegistry
(tracker/redisstore.py) keeps the same view, written through to Redis and
refreshed from it, so that a heartbeat to any tracker process counts for all.
`beat` and `refresh` are maybe-async, like the peer store's methods.
"""

from __future__ import annotations

import ipaddress
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from torrents.errors import BtswarmError, ConfigError
from torrents.hostport import parse_hostport
from torrents.infohash import is_info_hash

MISSED_BEATS = 3
MAX_HASHES = 200_000  # per heartbeat; a site announcing more is misconfigured


class HeartbeatError(BtswarmError):
    """A heartbeat body the tracker cannot use (HTTP 400)."""


@dataclass
class Site:
    name: str
    control_url: str
    peers: tuple[str, ...]
    can_seed: frozenset[bytes]
    seeding: frozenset[bytes]
    load: int
    capacity: int
    last_seen: float  # wall clock, shown to users
    seen_mono: float = field(default=0.0, repr=False)  # monotonic, for up/down
    stuck: frozenset[bytes] = frozenset()  # its seeds whose storage hangs: not handed out, not counted
    # When the site built this heartbeat, on the site's own clock (docs/contracts.md); None from a site that
    # does not say: its heartbeat then says nothing about seeds started after that (see Announcer.site_beat).
    built: int | None = None
    # info-hash → payload bytes the site sent of it since its daemon started (the repository draws them)
    uploaded: dict[bytes, int] = field(default_factory=dict)
    # Its SSL peer sockets (restricted datasets' torrents), and which of its info-hashes are restricted,
    # by the dataset name a member's certificate must carry (tracker/membership.py).
    ssl_peers: tuple[str, ...] = ()
    restricted: dict[bytes, str] = field(default_factory=dict)

    @property
    def ssl_endpoints(self) -> frozenset[tuple[str, int]]:
        return frozenset(parse_hostport(p) for p in self.ssl_peers)

    @property
    def peer_endpoints(self) -> frozenset[tuple[str, int]]:
        return frozenset(parse_hostport(p) for p in self.peers)

    def seed_endpoints(self, info_hash: bytes) -> list[tuple[str, int]]:
        """Where its seed of `info_hash` listens: the SSL sockets for a restricted dataset, else the plain ones."""
        return sorted(self.ssl_endpoints if info_hash in self.restricted else self.peer_endpoints)

    @property
    def peer_ips(self) -> frozenset[str]:
        return frozenset(parse_hostport(p)[0] for p in self.peers)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _hash(h: object, key: str, site: str) -> bytes:
    if not is_info_hash(h) or not isinstance(h, str) or h != h.lower():
        raise HeartbeatError(f"{site}: {key}", f"{str(h)[:50]!r} is not 40 lowercase hex characters")
    return bytes.fromhex(h)


def _hashes(body: Mapping[str, Any], key: str, site: str) -> frozenset[bytes]:
    value = body.get(key, [])
    if not isinstance(value, list) or len(value) > MAX_HASHES:
        raise HeartbeatError(f"{site}: {key}", f"expected a list of at most {MAX_HASHES} info-hashes")
    return frozenset(_hash(h, key, site) for h in value)


def _by_hash(body: Mapping[str, Any], key: str, site: str, what: str, valid: Callable[[Any], bool],
             bad: str) -> dict[bytes, Any]:
    """The heartbeat's object `key` ({info-hash: its `what`}; none from a site older than it), each value
    `valid` (else `bad` says what it is not)."""
    value = body.get(key, {})
    if not isinstance(value, dict) or len(value) > MAX_HASHES:
        raise HeartbeatError(f"{site}: {key}", f"expected an object of at most {MAX_HASHES} info-hashes "
                                               f"and their {what}")
    out = {}
    for h, v in value.items():
        if not valid(v):
            raise HeartbeatError(f"{site}: {key}", f"{str(h)[:50]!r}: {str(v)[:60]!r} {bad}")
        out[_hash(h, key, site)] = v
    return out


def _uploaded(body: Mapping[str, Any], site: str) -> dict[bytes, int]:
    """The heartbeat's `uploaded`: bytes each seed sent."""
    return _by_hash(body, "uploaded", site, "bytes", _is_count, "is not a whole number ≥ 0")


def _restricted(body: Mapping[str, Any], site: str) -> dict[bytes, str]:
    """The heartbeat's `restricted`: the dataset name of each members-only info-hash."""
    return _by_hash(body, "restricted", site, "dataset names",
                    lambda name: isinstance(name, str) and 0 < len(name) <= 255, "is not a dataset name")


def _endpoint(text: object, site: str, key: str = "peers") -> str:
    if not isinstance(text, str):
        raise HeartbeatError(f"{site}: {key}", f"{text!r} is not ip:port")
    try:
        host, port = parse_hostport(text)
        ipaddress.ip_address(host)
        ok = 1 <= port <= 65535
    except (ConfigError, ValueError):
        ok = False
    if not ok:
        raise HeartbeatError(f"{site}: {key}", f"{text[:60]!r} is not ip:port")
    return text


def parse_heartbeat(site: str, body: Any, *, now: float, mono: float) -> Site:
    """Check a heartbeat body (docs/contracts.md) sent by `site` → Site."""
    if not isinstance(body, dict):
        raise HeartbeatError(site, "heartbeat body must be a JSON object")
    if body.get("site", site) != site:
        raise HeartbeatError(site, f"body names site {str(body.get('site'))[:60]!r}")
    control_url = body.get("control_url")
    if not isinstance(control_url, str) or not control_url.startswith(("http://", "https://")):
        raise HeartbeatError(f"{site}: control_url", "must be an http(s) URL")
    peers = body.get("peers", [])
    if not isinstance(peers, list) or len(peers) > 64:
        raise HeartbeatError(f"{site}: peers", "expected a list of at most 64 ip:port")
    ssl_peers = body.get("ssl_peers", [])
    if not isinstance(ssl_peers, list) or len(ssl_peers) > 64:
        raise HeartbeatError(f"{site}: ssl_peers", "expected a list of at most 64 ip:port")
    built = body.get("built")
    if built is not None and not _is_count(built):
        raise HeartbeatError(f"{site}: built", "expected a whole number ≥ 0")
    numbers = {}
    for key in ("load", "capacity"):
        value = body.get(key, 0)
        if not _is_count(value):
            raise HeartbeatError(f"{site}: {key}", "expected a whole number ≥ 0")
        numbers[key] = value
    return Site(name=site, control_url=control_url.rstrip("/"),
                peers=tuple(_endpoint(p, site) for p in peers),
                can_seed=_hashes(body, "can_seed", site), seeding=_hashes(body, "seeding", site),
                load=numbers["load"], capacity=numbers["capacity"], last_seen=now, seen_mono=mono,
                stuck=_hashes(body, "stuck", site), built=built, uploaded=_uploaded(body, site),
                ssl_peers=tuple(_endpoint(p, site, "ssl_peers") for p in ssl_peers),
                restricted=_restricted(body, site))


class SiteRegistry:
    def __init__(self, *, heartbeat_interval: float, clock: Callable[[], float] = time.monotonic,
                 networks: Mapping[str, tuple[str, ...]] | None = None) -> None:
        self.heartbeat_interval = heartbeat_interval
        self.clock = clock
        self._sites: dict[str, Site] = {}
        self.holders: dict[bytes, tuple[str, ...]] = {}
        # Every info-hash a site held since the repository's last list (forget_released): a replica
        # that a site stops offering (a read error, a rescan) is still the federation's dataset, and
        # the tracker's copy of the repository's list can be a poll behind the site's publication.
        self.held: set[bytes] = set()
        self.stuck: dict[bytes, frozenset[tuple[str, int]]] = {}  # info-hash → endpoints of stuck seeds
        self.seeders: dict[bytes, tuple[str, ...]] = {}  # info-hash → sites whose last heartbeat says they seed it
        self.site_at: dict[tuple[str, int], str] = {}  # a peer endpoint a site's heartbeat declares → that site
        self.endpoints: dict[str, tuple[tuple[str, int], ...]] = {}  # site → the peer endpoints it declares
        self.ssl_endpoints: dict[str, tuple[tuple[str, int], ...]] = {}  # site → its SSL peer endpoints
        self.restricted: dict[bytes, str] = {}  # info-hash → dataset name, of every restricted dataset a site holds
        self._networks = [(site, ipaddress.ip_network(net, strict=False))
                          for site, nets in (networks or {}).items() for net in nets]
        self._ip_site: dict[str, str] = {}
        self._net_cache: dict[str, str | None] = {}

    def beat(self, site: Site) -> None:
        self._sites[site.name] = site
        self._reindex()

    def refresh(self) -> None:
        """Bring the view up to date with the shared registry (nothing to do here: this is the registry)."""

    def load(self, sites: list[Site]) -> None:
        """Replace the view with `sites`; the indexes are rebuilt only if what they hold changed."""
        def index_key(ss: dict[str, Site]) -> dict[str, tuple]:
            return {n: (s.can_seed, s.seeding, s.peers, s.stuck, s.ssl_peers, s.restricted) for n, s in ss.items()}
        new = {s.name: s for s in sites}
        changed = index_key(new) != index_key(self._sites)
        self._sites = new
        if changed:
            self._reindex()

    def forget_released(self) -> None:
        """The repository's list is current: what no site holds now is known only if it is on that list."""
        self.held = set(self.holders)

    def _reindex(self) -> None:
        holders: dict[bytes, list[str]] = {}
        seeders: dict[bytes, list[str]] = {}
        ip_site: dict[str, str] = {}
        site_at: dict[tuple[str, int], str] = {}
        stuck: dict[bytes, frozenset[tuple[str, int]]] = {}
        restricted: dict[bytes, str] = {}
        for s in self._sites.values():
            restricted.update(s.restricted)
            for h in s.can_seed | s.seeding:
                holders.setdefault(h, []).append(s.name)
            for h in s.seeding:
                seeders.setdefault(h, []).append(s.name)
            for ip in s.peer_ips:
                ip_site.setdefault(ip, s.name)
            for ep in s.peer_endpoints | s.ssl_endpoints:
                site_at.setdefault(ep, s.name)
            for h in s.stuck:
                stuck[h] = stuck.get(h, frozenset()) | s.peer_endpoints | s.ssl_endpoints
        self.holders = {h: tuple(names) for h, names in holders.items()}
        self.held.update(self.holders)
        self.seeders = {h: tuple(names) for h, names in seeders.items()}
        self._ip_site = ip_site
        self.site_at = site_at
        self.endpoints = {s.name: tuple(sorted(s.peer_endpoints)) for s in self._sites.values()}
        self.ssl_endpoints = {s.name: tuple(sorted(s.ssl_endpoints)) for s in self._sites.values()}
        self.restricted = restricted
        self.stuck = stuck

    def get(self, name: str) -> Site | None:
        return self._sites.get(name)

    def uploaded_by(self, info_hash: bytes) -> dict[str, int]:
        """site → the bytes of `info_hash` it says it sent since its daemon started, for every site that
        holds it (0 when it sent none: the repository counts a first send from there) or sent some; a
        site down too, its last word standing (one leaving the list would look like a counter gone back)."""
        holders = self.holders.get(info_hash, ())
        return {s.name: s.uploaded.get(info_hash, 0) for s in self.all()
                if info_hash in s.uploaded or s.name in holders}

    def all(self) -> list[Site]:
        return sorted(self._sites.values(), key=lambda s: s.name)

    def is_up(self, site: Site) -> bool:
        return self.clock() - site.seen_mono <= MISSED_BEATS * self.heartbeat_interval

    def site_of(self, ip: str) -> str | None:
        """The site an address belongs to: by configured networks, else by a site's registered peer addresses.

        Not by /24: on one host every site is some 127.0.0.x, so a prefix
        would put everyone at one site.
        """
        if self._networks:
            cached = self._net_cache.get(ip, False)
            if cached is not False:
                return cached  # type: ignore[return-value]
            if len(self._net_cache) > 65536:
                self._net_cache.clear()
            found = self._net_cache[ip] = self._match_network(ip)
            return found
        return self._ip_site.get(ip)

    def _match_network(self, ip: str) -> str | None:
        try:
            addr = ipaddress.ip_address(ip)
        except ValueError:
            return None
        for site, net in self._networks:
            if addr.version == net.version and addr in net:
                return site
        return None
