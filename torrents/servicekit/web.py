"""aiohttp helpers shared by the services: errors to HTTP in one place,
signed requests (both ends), Prometheus metrics, client sessions that
verify TLS (torrents.servicekit.tls), and running an app.

Imports aiohttp and prometheus_client: used by services only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import ssl
from typing import Any, Awaitable, Callable

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from yarl import URL

from torrents import auth
from torrents.servicekit import sdnotify
from torrents.servicekit.httpclient import client_error, client_session  # noqa: F401  (the services' import)
from torrents.errors import (AuthError, BencodeError, BtswarmError, ConfigError, Conflict, DatasetError,
                             MetainfoError, NotFound)

log = logging.getLogger("btswarm.web")

MAX_CONTROL_BODY = 1024 * 1024
MAX_URL = 8 * 1024  # what a service answers; longer is a styled 414, not the parser's raw 400
_PARSER_LINE_LIMIT = 64 * 1024  # what aiohttp reads before giving up with its own plain-text answer
REGISTRY_KEY = web.AppKey("metrics_registry", CollectorRegistry)

_STATUS = {NotFound: 404, AuthError: 401, MetainfoError: 400, DatasetError: 400, BencodeError: 400,
           ConfigError: 400, Conflict: 409}


def status_for(exc: BtswarmError) -> int:
    for cls, status in _STATUS.items():
        if isinstance(exc, cls):
            return status
    return 400


def json_error(status: int, message: str, **extra: Any) -> web.Response:
    return web.json_response({"error": message, **extra}, status=status)


@web.middleware
async def error_middleware(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
    """Domain errors become JSON errors here, and only here; nothing else escapes as a 500 page."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status >= 400 and exc.content_type != "application/json" and request.path.startswith("/api/"):
            return json_error(exc.status, exc.reason)
        raise
    except BtswarmError as exc:
        return json_error(status_for(exc), str(exc))
    except Exception:
        log.exception("%s %s: internal error", request.method, request.path)
        return json_error(500, "internal error")


@web.middleware
async def url_limit(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
    """An address longer than MAX_URL is refused as an HTTP error the service's own pages render."""
    if len(request.raw_path) > MAX_URL:
        raise web.HTTPRequestURITooLong(reason=f"the address is {len(request.raw_path):,} bytes long; "
                                              f"at most {MAX_URL:,} are accepted")
    return await handler(request)


async def read_signed(request: web.Request, verifier: auth.Verifier, max_body: int = MAX_CONTROL_BODY) -> tuple[str, bytes]:
    """Read a signed request's body (bounded) and check its signature → (site, body)."""
    if request.content_length is not None and request.content_length > max_body:
        raise web.HTTPRequestEntityTooLarge(max_size=max_body, actual_size=request.content_length)
    buf = bytearray()
    while True:
        chunk = await request.content.read(65536)
        if not chunk:
            break
        buf += chunk
        if len(buf) > max_body:
            raise web.HTTPRequestEntityTooLarge(max_size=max_body, actual_size=len(buf))
    body = bytes(buf)
    site = verifier.verify(request.method, request.raw_path, request.headers, body)
    return site, body


def parse_json_body(body: bytes, subject: str = "request") -> Any:
    try:
        return json.loads(body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BtswarmError(subject, f"body is not valid JSON ({exc})") from None


async def signed_request(session: aiohttp.ClientSession, method: str, url: str, *, site: str, secret: str,
                         payload: Any = None, timeout: float = 10.0) -> tuple[int, Any]:
    """Send a signed JSON request → (status, decoded JSON or None). Network errors propagate."""
    body = b"" if payload is None else json.dumps(payload, separators=(",", ":")).encode()
    # Sign the path exactly as it goes on the wire (percent-encoded by yarl, as
    # the receiver's request.path_qs sees it), so names with spaces or '<' verify.
    target = URL(url)
    headers = auth.sign(secret, site, method, target.raw_path_qs, body)
    headers["Content-Type"] = "application/json"
    async with session.request(method, target, data=body, headers=headers,
                               timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
        try:
            data = await resp.json(content_type=None)
        except (json.JSONDecodeError, aiohttp.ContentTypeError, UnicodeDecodeError):
            data = None
        return resp.status, data


def add_metrics_route(app: web.Application, registry: CollectorRegistry) -> None:
    app[REGISTRY_KEY] = registry

    async def metrics(request: web.Request) -> web.Response:
        resp = web.Response(body=generate_latest(request.app[REGISTRY_KEY]))
        resp.content_type = CONTENT_TYPE_LATEST.split(";")[0]
        return resp

    app.router.add_get("/metrics", metrics)


def run(app: web.Application, host: str, port: int, *, name: str, ssl_context: ssl.SSLContext | None = None) -> None:
    """Serve (with TLS when `ssl_context`) until SIGINT/SIGTERM; the cleanup contexts run on the way out.

    Once the socket listens, systemd hears READY=1 (torrents.servicekit.sdnotify), and not before:
    a unit ordered after this one starts when the service really answers.
    """
    asyncio.run(_serve(app, host, port, name, ssl_context))


async def _serve(app: web.Application, host: str, port: int, name: str, ssl_context: ssl.SSLContext | None) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    runner = web.AppRunner(app, access_log=None, handle_signals=False, max_line_size=_PARSER_LINE_LIMIT,
                           max_field_size=_PARSER_LINE_LIMIT)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
        await site.start()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        url = f"{'https' if ssl_context else 'http'}://{host}:{port}"
        log.info("%s listening on %s", name, url)
        sdnotify.ready(f"listening on {url}")
        await stop.wait()
        sdnotify.stopping()
    finally:
        await runner.cleanup()
