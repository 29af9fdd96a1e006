"""aiohttp client sessions that verify TLS (torrents.servicekit.tls) and go through the proxies they are given
(torrents.proxyenv: `http_proxy`, `https_proxy`, `no_proxy`), apart from the service kit's server half.

bt-get's start needs only these: importing torrents.servicekit.web would add
aiohttp's server and prometheus_client to every bt-get's start, which T3s
launched at once each pay (docs/benchmarks.md "wan").
"""

from __future__ import annotations

from typing import Any

import aiohttp
from yarl import URL

from torrents.proxyenv import NONE, Proxies
from torrents.servicekit import tls


class ProxiedRequest(aiohttp.ClientRequest):
    """A request that goes through the proxy `proxies` names for its URL, unless the caller gave one.

    Not aiohttp's trust_env: its no_proxy knows neither CIDR blocks nor ports, and its rules would differ
    from those of libtorrent's announces and the web-seed relay, which torrents.proxyenv decides too.
    """

    proxies: Proxies = NONE

    def update_proxy(self, proxy: URL | None, proxy_auth: aiohttp.BasicAuth | None, proxy_headers: Any) -> None:
        chosen = self.proxies.for_url(str(self.url)) if proxy is None else None
        if chosen is not None:
            proxy = URL(chosen.url)
            if chosen.authorization:  # aiohttp sends a proxy header's Authorization as Proxy-Authorization
                # (aiohttp.BasicAuth is deprecated, its successor not in the aiohttp releases we support)
                proxy_headers = {**dict(proxy_headers or {}), "Authorization": chosen.authorization}
        super().update_proxy(proxy, proxy_auth, proxy_headers)


def client_session(ca: str = "", *, limit: int = 100, proxies: Proxies = NONE, **kwargs: Any) -> aiohttp.ClientSession:
    """A client session whose https:// requests verify the server against the system's CAs and `ca`, and whose
    requests go through `proxies` (none by default: the services talk to each other directly)."""
    # Without `ca`, aiohttp's own verified context (ssl.create_default_context, made at its import) is the same
    # check; a context of ours would read the system's CA bundle once more, 20-33 ms of every bt-get's start.
    verify = tls.client_context(ca) if ca else True
    if proxies:
        kwargs["request_class"] = type("ProxiedRequest", (ProxiedRequest,), {"proxies": proxies})
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=verify, limit=limit), **kwargs)


def client_error(exc: BaseException, hint: str) -> str:
    """A failed request as a sentence; an untrusted certificate says how to give the CA (`hint`)."""
    return tls.certificate_problem(exc, hint) or (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
