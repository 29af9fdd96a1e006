"""Which HTTP proxy a URL goes through, from `http_proxy`, `https_proxy` and `no_proxy`. Pure.

Batch worker nodes often reach the world only through a site's squid, named
in these variables; every HTTP client of btswarm asks `Proxies.for_url`
(torrents/servicekit/httpclient.py, bt-get's web-seed relay, libtorrent's
tracker announces), so the variables mean the same everywhere. The rules,
those of curl where curl has one:

- `http_proxy` is used for http:// URLs, `https_proxy` for https:// ones (an
  https URL is tunnelled with CONNECT). The lower-case name wins over the
  upper-case one; `HTTP_PROXY` is ignored when `REQUEST_METHOD` is set (a CGI
  program, where a request's `Proxy:` header becomes that variable).
- A proxy is `http://[user:password@]host[:port]`; the scheme may be left
  out (`squid.example:3128`); without a port it is 1080, as curl has it.
  Another scheme (socks5://, https://) is an error naming the variable.
- `no_proxy` lists, separated by commas or spaces, what goes direct: `*`
  (everything); a host name, which matches itself and every name under it
  (`example.org` and `.example.org` both match `a.example.org`); an IP
  address; a CIDR block (`10.0.0.0/8`, `fd00::/8`, as curl 7.86 and later); any
  of them with `:PORT`, which then matches that port only (as Go and Python
  do; curl ignores the port). Names are compared without case and without a
  trailing dot; a name is never resolved to match an address entry.
- This host itself (`localhost`, 127.0.0.1, ::1) is never proxied: a proxy
  on another host cannot reach it (bt-get's web-seed relay, `--serve`, a
  local bt-server). The rest of 127.0.0.0/8 follows the rules above, as any
  address does (the hosts test bed gives its hosts addresses there).
"""

from __future__ import annotations

import base64
import ipaddress
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import unquote, urlsplit

from torrents.errors import ConfigError

DEFAULT_PORT = 1080  # curl's, for a proxy written without one
_Net = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Proxy:
    """One HTTP proxy: where it is, and the credentials it wants (empty: none)."""

    host: str
    port: int
    username: str = ""
    password: str = ""

    @property
    def url(self) -> str:
        """Its URL without credentials (what is logged and said)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def authorization(self) -> str:
        """Its credentials as an HTTP Basic header value (RFC 7617), "" when it wants none."""
        if not self.username:
            return ""
        return "Basic " + base64.b64encode(f"{self.username}:{self.password}".encode()).decode("ascii")


@dataclass(frozen=True)
class Bypass:
    """One `no_proxy` entry: a name (and the names under it), or a network; with a port, that port only."""

    name: str = ""
    network: _Net | None = None
    port: int = 0

    def matches(self, host: str, port: int) -> bool:
        if self.port and self.port != port:
            return False
        if self.network is not None:
            ip = _ip(host)
            return ip is not None and ip.version == self.network.version and ip in self.network
        return host == self.name or host.endswith("." + self.name)


@dataclass(frozen=True)
class Proxies:
    """The proxies of http:// and https:// URLs, and what bypasses them."""

    http: Proxy | None = None
    https: Proxy | None = None
    bypass: tuple[Bypass, ...] = ()
    everything_direct: bool = False  # no_proxy=*

    def __bool__(self) -> bool:
        return not self.everything_direct and (self.http is not None or self.https is not None)

    def for_url(self, url: str) -> Proxy | None:
        """The proxy `url` goes through, or None when it goes direct."""
        parts = urlsplit(url)
        proxy = self.https if parts.scheme in ("https", "wss") else self.http if parts.scheme in ("http", "ws") else None
        if proxy is None or self.everything_direct or not parts.hostname:
            return None
        host = parts.hostname.lower().rstrip(".")
        try:
            port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
        except ValueError:
            return proxy  # a bad port: the request fails on its own, not here
        if _loopback(host) or any(b.matches(host, port) for b in self.bypass):
            return None
        return proxy


NONE = Proxies()


def from_environ(environ: Mapping[str, str]) -> Proxies:
    """The proxies the environment names (NONE when it names none); a bad value is a ConfigError naming it."""
    cgi = "REQUEST_METHOD" in environ
    http = _proxy(*_variable(environ, "http_proxy", upper=not cgi))
    https = _proxy(*_variable(environ, "https_proxy", upper=True))
    if http is None and https is None:
        return NONE
    _, text = _variable(environ, "no_proxy", upper=True)
    entries = [e for e in text.replace(",", " ").split() if e]
    if "*" in entries:
        return Proxies(http, https, (), everything_direct=True)
    return Proxies(http, https, tuple(_bypass(e, "no_proxy") for e in entries))


def _variable(environ: Mapping[str, str], name: str, *, upper: bool) -> tuple[str, str]:
    """(the name it was found under, its value): the lower-case variable first."""
    for key in (name, name.upper()) if upper else (name,):
        value = environ.get(key, "").strip()
        if value:
            return key, value
    return name, ""


def _proxy(name: str, text: str) -> Proxy | None:
    if not text:
        return None
    parts = urlsplit(text if "://" in text else "http://" + text)
    if parts.scheme.lower() != "http":
        raise ConfigError(name, f"{parts.scheme}:// proxies are not supported, only http:// ({text!r})")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        raise ConfigError(name, f"{text!r} has a bad port") from None
    if not host:
        raise ConfigError(name, f"{text!r} names no host")
    return Proxy(host, port or DEFAULT_PORT, unquote(parts.username or ""), unquote(parts.password or ""))


def _bypass(entry: str, name: str) -> Bypass:
    text, port = entry.lower(), 0
    if text.startswith("["):  # [::1] or [::1]:8080
        inside, _, rest = text[1:].partition("]")
        text, port = inside, _port(rest[1:], entry, name) if rest.startswith(":") else 0
    elif text.count(":") == 1:  # host:port, 1.2.3.4:port (several colons: an IPv6 address or block)
        text, _, given = text.partition(":")
        port = _port(given, entry, name)
    if "/" in text:
        try:
            return Bypass(network=ipaddress.ip_network(text, strict=False), port=port)
        except ValueError:
            raise ConfigError(name, f"{entry!r} is not a CIDR block") from None
    ip = _ip(text)
    if ip is not None:
        return Bypass(network=ipaddress.ip_network(ip), port=port)
    name_ = text.lstrip("*").lstrip(".").rstrip(".")
    return Bypass(name=name_, port=port)


def _port(text: str, entry: str, name: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ConfigError(name, f"{entry!r} has a bad port")
    return int(text)


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _loopback(host: str) -> bool:
    return host in ("localhost", "127.0.0.1", "::1") or host.endswith(".localhost")
