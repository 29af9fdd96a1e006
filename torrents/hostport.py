"""`host:port` endpoints, parsed and written the one way every part uses (IPv6 in brackets)."""

from __future__ import annotations

from torrents.errors import ConfigError


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


def format_hostport(host: str, port: int) -> str:
    """(host, port) → 'host:port', with an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
