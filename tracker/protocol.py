"""The tracker's wire protocol, pure: raw query bytes in, bencoded answers out.

BEP 3 (announce), 7 (peers6), 23 (compact), 27 (private), 48 (scrape).
The query is parsed from the raw request target with
`urllib.parse.unquote_to_bytes`: aiohttp's `request.query` decodes values as
UTF-8 with replacement, so two binary info-hashes would collide, and in a
query string '+' is a literal '+' here (clients percent-encode a space).

Nothing here touches a socket or a clock: `parse_announce` and
`parse_scrape` raise AnnounceError (its message is the `failure reason`),
and the `*_answer` functions return the body to send.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import NamedTuple
from urllib.parse import unquote_to_bytes

from torrents import bencoding
from torrents.errors import BtswarmError

HASH_LEN = 20
MAX_NUMWANT = 200
MAX_SCRAPE = 100  # info-hashes per scrape: bounds the work one request can cause
MAX_QUERY = 4096  # a real announce is under 400 bytes; aiohttp caps the line at 8190 anyway
EVENTS = frozenset({"", "started", "completed", "stopped", "paused", "empty"})
_MAX_COUNTER = 2 ** 63 - 1


class AnnounceError(BtswarmError):
    """An announce or scrape the tracker refuses; str(err) is the `failure reason`."""


class Announce(NamedTuple):  # a tuple: built on every announce, ~5x cheaper than a frozen dataclass
    info_hash: bytes
    peer_id: bytes
    ip: str  # where other peers reach this one: the connection's address unless trusted
    port: int
    uploaded: int
    downloaded: int
    left: int
    event: str
    compact: bool
    no_peer_id: bool
    numwant: int
    # `inbound=0`: the peer accepts no inbound connection (NAT, a closed firewall, a node behind a proxy).
    # No BEP says it; bt-get sends it (btget/resolve/reach.py), others' trackers ignore it.
    closed: bool = False

    @property
    def seed(self) -> bool:
        return self.left == 0


def split_query(raw: str | bytes) -> dict[bytes, list[bytes]]:
    """'a=1&b=%ff&a=2' → {b'a': [b'1', b'2'], b'b': [b'\\xff']}; never raises on any input.

    An invalid escape ('%zz', a lone '%') stays as its literal bytes, which
    is what unquote_to_bytes does and what makes the length checks fail.
    This runs on every announce, so plain keys and values skip unquoting.
    """
    if isinstance(raw, str):
        # aiohttp hands over the target decoded as UTF-8 with surrogateescape;
        # this restores the exact bytes a client sent unescaped.
        raw = raw.encode("utf-8", "surrogateescape")
    out: dict[bytes, list[bytes]] = {}
    for part in raw.split(b"&"):
        if not part:
            continue
        key, _, value = part.partition(b"=")
        if b"%" in key:
            key = unquote_to_bytes(key)
        if b"%" in value:
            value = _unescape(value)
        values = out.get(key)
        if values is None:
            out[key] = [value]
        else:
            values.append(value)
    return out


def _unescape(value: bytes) -> bytes:
    # Clients escape every byte of a binary hash ('%AB' x 20); bytes.fromhex
    # decodes that in one C call, where unquote_to_bytes loops in Python.
    if len(value) == 3 * value.count(b"%") and value[::3] == b"%" * (len(value) // 3):
        try:
            return bytes.fromhex(value.replace(b"%", b"").decode("ascii"))
        except (ValueError, UnicodeDecodeError):
            pass
    return unquote_to_bytes(value)


def _one(params: dict[bytes, list[bytes]], key: bytes, required: bool = True) -> bytes | None:
    values = params.get(key)
    if not values:
        if required:
            raise AnnounceError(key.decode(), "missing")
        return None
    if len(values) > 1:
        raise AnnounceError(key.decode(), f"given {len(values)} times, expected once")
    return values[0]


def _int(params: dict[bytes, list[bytes]], key: bytes, default: int | None = None,
         lo: int = 0, hi: int = _MAX_COUNTER) -> int:
    raw = _one(params, key, required=default is None)
    if raw is None:
        return default  # type: ignore[return-value]
    # int() would accept ' 1', '1_0' and '٣'; a counter is plain ASCII digits.
    text = raw[1:] if raw[:1] == b"-" else raw
    if not text or len(text) > 20 or not text.isdigit():
        raise AnnounceError(key.decode(), "not a whole number")
    value = int(raw)
    if not lo <= value <= hi:
        raise AnnounceError(key.decode(), f"{value} is out of range {lo}–{hi}")
    return value


def _hash(value: bytes, what: str) -> bytes:
    if len(value) != HASH_LEN:
        raise AnnounceError(what, f"must be {HASH_LEN} bytes, got {len(value)}")
    return value


def _peer_ip(text: bytes) -> str:
    try:
        addr = ipaddress.ip_address(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise AnnounceError("ip", "not an IP address") from None
    return normalise_ip(str(addr))


def normalise_ip(ip: str) -> str:
    """'::ffff:1.2.3.4' → '1.2.3.4': an IPv4 peer reached over a v6 socket is a v4 peer."""
    if ip.startswith("::ffff:") and "." in ip:
        return ip[7:]
    return ip


def parse_announce(raw_query: str | bytes, remote_ip: str, *, trust_ip: bool = False,
                   default_numwant: int = 50) -> Announce:
    """Check and decode an announce query; raise AnnounceError naming the bad parameter."""
    if len(raw_query) > MAX_QUERY:
        raise AnnounceError("query", f"longer than {MAX_QUERY} bytes")
    params = split_query(raw_query)
    info_hash = _hash(_one(params, b"info_hash"), "info_hash")  # type: ignore[arg-type]
    peer_id = _hash(_one(params, b"peer_id"), "peer_id")  # type: ignore[arg-type]
    port = _int(params, b"port", lo=1, hi=65535)
    uploaded = _int(params, b"uploaded", 0)
    downloaded = _int(params, b"downloaded", 0)
    left = _int(params, b"left", 0)
    raw_event = _one(params, b"event", required=False) or b""
    event = raw_event.decode("ascii", "replace")
    if event not in EVENTS:
        raise AnnounceError("event", f"unknown event {event[:32]!r}")
    if event == "empty":
        event = ""
    numwant = _int(params, b"numwant", default_numwant, lo=-(2 ** 31), hi=2 ** 31)
    if numwant < 0:  # libtorrent and others send -1 for "the tracker's default"
        numwant = default_numwant
    numwant = min(numwant, MAX_NUMWANT)
    compact = _one(params, b"compact", required=False) != b"0"
    no_peer_id = _one(params, b"no_peer_id", required=False) == b"1"
    ip = normalise_ip(remote_ip)
    if trust_ip:
        claimed = _one(params, b"ip", required=False)
        if claimed:
            ip = _peer_ip(claimed)
    closed = _one(params, b"inbound", required=False) == b"0"
    return Announce(info_hash, peer_id, ip, port, uploaded, downloaded, left, event, compact,
                    no_peer_id, numwant, closed)


def parse_scrape(raw_query: str | bytes) -> list[bytes]:
    """Info-hashes to scrape (BEP 48: any number of `info_hash` keys; none means all)."""
    if len(raw_query) > MAX_QUERY * 4:
        raise AnnounceError("query", f"longer than {MAX_QUERY * 4} bytes")
    hashes = split_query(raw_query).get(b"info_hash", [])
    if len(hashes) > MAX_SCRAPE:
        raise AnnounceError("info_hash", f"{len(hashes)} given, at most {MAX_SCRAPE} per scrape")
    seen: dict[bytes, None] = {}
    for h in hashes:
        seen[_hash(h, "info_hash")] = None
    return list(seen)


# --- answers ---------------------------------------------------------------

def compact_endpoint(ip: str, port: int) -> tuple[bytes, bool]:
    """(BEP 23 / BEP 7 bytes, is_ipv6) for an endpoint; raises ValueError for a bad address."""
    if ":" in ip:
        return socket.inet_pton(socket.AF_INET6, ip) + port.to_bytes(2, "big"), True
    return socket.inet_aton(ip) + port.to_bytes(2, "big"), False


def _bstr(data: bytes) -> bytes:
    return b"%d:%s" % (len(data), data)


def compact_answer(interval: int, min_interval: int, complete: int, incomplete: int,
                   peers4: bytes, peers6: bytes) -> bytes:
    """The usual announce answer, written directly.

    This is the hot path of the tracker; bencode.py's generic encoder costs
    ~7 µs for this fixed shape, this ~1 µs. Keys are in sorted order, as
    bencoding requires.
    """
    body = b"d8:completei%de10:incompletei%de8:intervali%de12:min intervali%de5:peers%s" % (
        complete, incomplete, interval, min_interval, _bstr(peers4))
    if peers6:
        body += b"6:peers6" + _bstr(peers6)
    return body + b"e"


def list_answer(interval: int, min_interval: int, complete: int, incomplete: int,
                peers: list[tuple[str, int, bytes]], no_peer_id: bool) -> bytes:
    """The original (non-compact, BEP 3) answer: a list of dicts."""
    out = []
    for ip, port, peer_id in peers:
        entry: dict[str, object] = {"ip": ip, "port": port}
        if not no_peer_id:
            entry["peer id"] = peer_id
        out.append(entry)
    return bencoding.encode({"interval": interval, "min interval": min_interval, "complete": complete,
                             "incomplete": incomplete, "peers": out})


def failure_answer(reason: str) -> bytes:
    return bencoding.encode({"failure reason": reason})


def scrape_answer(files: dict[bytes, tuple[int, int, int]]) -> bytes:
    """{info_hash: (complete, downloaded, incomplete)} → BEP 48 `files` dict."""
    return bencoding.encode({"files": {h: {"complete": c, "downloaded": d, "incomplete": i}
                                       for h, (c, d, i) in files.items()}})


def interval_jitter(interval: int) -> int:
    """Up to this much is added to each answer's interval, so a swarm that started together does not
    come back in lock-step."""
    return max(1, interval // 10)


def peer_ttl(interval: int) -> float:
    """How long a peer stays in its swarm after its last announce: a live client is back within
    `interval` plus the jitter; one killed without a `stopped` announce is gone half an interval
    later, so no one is handed it past two intervals."""
    return 1.5 * interval + interval_jitter(interval)
