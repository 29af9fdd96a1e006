"""aiohttp client sessions that verify TLS (torrents.servicekit.tls), apart from the service kit's server half.

bt-get's start needs only these: importing torrents.servicekit.web would add
aiohttp's server and prometheus_client to every bt-get's start, which 8 T3s
launched at once pay 8 times over (docs/benchmarks.md "wan").
"""

from __future__ import annotations

from typing import Any

import aiohttp

from torrents.servicekit import tls


def client_session(ca: str = "", *, limit: int = 100, **kwargs: Any) -> aiohttp.ClientSession:
    """A client session whose https:// requests verify the server against the system's CAs and `ca`."""
    # Without `ca`, aiohttp's own verified context (ssl.create_default_context, made at its import) is the same
    # check; a context of ours would read the system's CA bundle once more, 20-33 ms of every bt-get's start.
    verify = tls.client_context(ca) if ca else True
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=verify, limit=limit), **kwargs)


def client_error(exc: BaseException, hint: str) -> str:
    """A failed request as a sentence; an untrusted certificate says how to give the CA (`hint`)."""
    return tls.certificate_problem(exc, hint) or (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
