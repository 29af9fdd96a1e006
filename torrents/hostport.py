"""`host:port` endpoints, parsed and written the one way every part uses (IPv6 in brackets); a process's own
addresses."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from torrents.errors import ConfigError

ANY = ""  # a session that listens on every address of both families, its connections unbound
LOOPBACK = ("127.0.0.1", "::1")


def own_addresses(listen_ip: str) -> tuple[str, ...]:
    """Where this host's other sessions (a run's sibling workers) connect from: the one address they all
    listen on, or, listening everywhere, this host's loopback."""
    return LOOPBACK if listen_ip == ANY else (listen_ip,)


def url_endpoint(url: str) -> tuple[str, int]:
    """(host, port) of an http(s) URL, the port its scheme's when none is written; ("", 0) without a host."""
    parts = urlsplit(url)
    if not parts.hostname:
        return "", 0
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


def source_address(host: str, port: int) -> str:
    """This host's address on the way to `host:port`: the one a peer there sees us at. A connected UDP
    socket asks the kernel's routing table; no packet is sent. Raises OSError when there is no route."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    family, _, _, _, sockaddr = infos[0]
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.connect(sockaddr)
        return s.getsockname()[0]


def is_local(host: str) -> bool:
    """Whether `host` is an address of this host (a socket can bind to it)."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.bind((host, 0))
        return True
    except OSError:
        return False


def is_wildcard(host: str) -> bool:
    """0.0.0.0, :: or ANY: every address of the host, not one a peer can be told."""
    if host == ANY:
        return True
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def parse_hostport(text: str, subject: str = "address") -> tuple[str, int]:
    """'127.0.0.1:8080', '[::1]:80' → (host, port); ConfigError naming `subject` otherwise."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host or "[" in host or "]" in host:  # '::1:80' is ambiguous: IPv6 needs brackets
        raise ConfigError(subject, f"{text!r} is not HOST:PORT (write an IPv6 address as [::1]:PORT)")
    if not sep or not host:
        raise ConfigError(subject, f"{text!r} is not HOST:PORT")
    if not (port.isascii() and port.isdigit()):
        raise ConfigError(subject, f"{text!r} has a bad port")
    p = int(port)
    if not 0 <= p <= 65535:
        raise ConfigError(subject, f"{text!r}: port out of range")
    return host, p


def check_hostport(section: object, key: str) -> None:
    """A config section's HOST:PORT field, checked (ConfigError naming the key: the loader adds where)."""
    try:
        parse_hostport(getattr(section, key), key)
    except ConfigError as exc:
        raise ConfigError(key, exc.problem) from None


def host_of(endpoint: str) -> str:
    """The host of a 'host:port' or '[v6]:port' endpoint written by format_hostport, without brackets."""
    host = endpoint.rpartition(":")[0]
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def format_hostport(host: str, port: int) -> str:
    """(host, port) → 'host:port', with an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
