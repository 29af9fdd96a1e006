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
import time
from typing import Any, Awaitable, Callable, Protocol

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from yarl import URL

from torrents import auth, clockskew, tokens
from torrents.servicekit import sdnotify
from torrents.servicekit.httpclient import client_error, client_session  # noqa: F401  (the services' import)
from torrents.errors import (AuthError, BencodeError, BtswarmError, ConfigError, Conflict, DatasetError,
                             Forbidden, MetainfoError, NotFound, TokenRefused)

log = logging.getLogger("btswarm.web")

MAX_CONTROL_BODY = 1024 * 1024
MAX_URL = 8 * 1024  # what a service answers; longer is a styled 414, not the parser's raw 400
_PARSER_LINE_LIMIT = 64 * 1024  # what aiohttp reads before giving up with its own plain-text answer
REGISTRY_KEY = web.AppKey("metrics_registry", CollectorRegistry)

_STATUS = {NotFound: 404, AuthError: 401, Forbidden: 403, MetainfoError: 400, DatasetError: 400, BencodeError: 400,
           ConfigError: 400, Conflict: 409}


def status_for(exc: BtswarmError) -> int:
    if isinstance(exc, TokenRefused):
        return exc.status
    for cls, status in _STATUS.items():
        if isinstance(exc, cls):
            return status
    return 400


def json_error(status: int, message: str, **extra: Any) -> web.Response:
    return web.json_response({"error": message, **extra}, status=status)


def challenge(response: web.Response, refused: TokenRefused) -> web.Response:
    """RFC 6750: a 401 or 403 for a token says what a token must be."""
    if refused.status in (401, 403):
        response.headers["WWW-Authenticate"] = tokens.www_authenticate(refused)
    return response


@web.middleware
async def error_middleware(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
    """Domain errors become JSON errors here, and only here; nothing else escapes as a 500 page."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status >= 400 and exc.content_type != "application/json" and request.path.startswith("/api/"):
            return json_error(exc.status, exc.reason)
        raise
    except auth.StaleRequest as exc:
        # The signer learns its clock is the reason, and its offset to the millisecond from our time
        # (clock_offset_s, from its whole-second timestamp, is ±0.5 s).
        return json_error(401, str(exc), clock_offset_s=round(exc.offset, 1), limit_s=exc.limit,
                          server_time=time.time())
    except TokenRefused as exc:
        return challenge(json_error(exc.status, str(exc)), exc)
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
    try:
        site = verifier.verify(request.method, request.raw_path, request.headers, body)
    except auth.StaleRequest as exc:
        if verifier.clocks.off(exc.site, exc.offset):
            log.warning("%s %s: its clock is %d s %s this host's: its signed requests are refused beyond %d s "
                        "until its clock is set (NTP)", verifier.signer, exc.site, abs(round(exc.offset)),
                        "ahead of" if exc.offset > 0 else "behind", exc.limit)
        raise
    if verifier.clocks.in_step(site):
        log.info("%s %s: its clock is within %d s of this host's again", verifier.signer, site, verifier.max_skew)
    return site, body


def parse_json_body(body: bytes, subject: str = "request") -> Any:
    try:
        return json.loads(body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BtswarmError(subject, f"body is not valid JSON ({exc})") from None


class PeerClock:
    """This host's clock against one service it signs requests to (`whose`: "the tracker's").

    Measured on every answer (from its Date header to ±1 s, or to the
    millisecond from the server's time a stale refusal carries), said once when that service refuses us for it, again when the
    offset moves by clockskew.STEP, and once when requests go through again.
    """

    def __init__(self, whose: str, url: str, logger: logging.Logger = log) -> None:
        self.whose, self.url, self._log = whose, url, logger
        self.offset: float | None = None  # ours minus theirs, seconds; None until an answer came
        self.refused = False  # the last answer was a refusal for our clock
        self._said = clockskew.Reports()

    def answered(self, status: int, doc: Any, date: str | None, sent: float, received: float) -> None:
        """One answer to a request sent at `sent` (this host's time), read at `received`."""
        if status == 401 and isinstance(doc, dict) and isinstance(doc.get("clock_offset_s"), (int, float)):
            server = doc.get("server_time")
            self.refused = True
            self.offset = ((sent + received) / 2 - server if isinstance(server, (int, float))
                           else float(doc["clock_offset_s"]))
            if self._said.off(self.url, self.offset):
                self._log.warning("%s at %s: it refuses signed requests more than %s s off; set this host's "
                                  "clock (NTP)", self.problem(), self.url, doc.get("limit_s", auth.MAX_SKEW))
            return
        offset = clockskew.offset_from_date(date, sent, received)
        if offset is not None:
            self.offset = offset
        self.refused = False
        if 200 <= status < 300 and self._said.in_step(self.url):
            self._log.info("this host's clock agrees with %s at %s again", self.whose, self.url)

    def problem(self) -> str:
        return clockskew.describe(self.offset or 0.0, self.whose)


async def signed_request(session: aiohttp.ClientSession, method: str, url: str, *, site: str, secret: str,
                         payload: Any = None, timeout: float = 10.0,
                         clock: PeerClock | None = None) -> tuple[int, Any]:
    """Send a signed JSON request → (status, decoded JSON or None). Network errors propagate.
    `clock` hears each answer (this host's clock against the server's)."""
    body = b"" if payload is None else json.dumps(payload, separators=(",", ":")).encode()
    # Sign the path exactly as it goes on the wire (percent-encoded by yarl, as
    # the receiver's request.path_qs sees it), so names with spaces or '<' verify.
    target = URL(url)
    headers = auth.sign(secret, site, method, target.raw_path_qs, body)
    headers["Content-Type"] = "application/json"
    sent = time.time()
    async with session.request(method, target, data=body, headers=headers,
                               timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
        try:
            data = await resp.json(content_type=None)
        except (json.JSONDecodeError, aiohttp.ContentTypeError, UnicodeDecodeError):
            data = None
        if clock is not None:
            clock.answered(resp.status, data, resp.headers.get("Date"), sent, time.time())
        return resp.status, data


def add_metrics_route(app: web.Application, registry: CollectorRegistry) -> None:
    app[REGISTRY_KEY] = registry

    async def metrics(request: web.Request) -> web.Response:
        resp = web.Response(body=generate_latest(request.app[REGISTRY_KEY]))
        resp.content_type = CONTENT_TYPE_LATEST.split(";")[0]
        return resp

    app.router.add_get("/metrics", metrics)


def run(app: web.Application, host: str, port: int, *, name: str, ssl_context: ssl.SSLContext | None = None,
        reuse_port: bool = False) -> None:
    """Serve (with TLS when `ssl_context`) until SIGINT/SIGTERM; the cleanup contexts run on the way out."""
    asyncio.run(_serve(app, host, port, name, ssl_context, reuse_port))


async def _serve(app: web.Application, host: str, port: int, name: str, ssl_context: ssl.SSLContext | None,
                 reuse_port: bool) -> None:
    runner = web.AppRunner(app, access_log=None, handle_signals=False, max_line_size=_PARSER_LINE_LIMIT,
                           max_field_size=_PARSER_LINE_LIMIT)
    await runner.setup()
    await serve_until_stopped(runner, _SiteListener(runner, host, port, ssl_context, reuse_port), name=name,
                              host=host, secure=ssl_context is not None)


class Listener(Protocol):
    """What `serve_until_stopped` starts and stops: aiohttp's own site here, the tracker's fast path there."""

    port: int  # the port bound, once started

    async def start(self) -> object: ...

    async def stop(self) -> None: ...  # also when start failed; the runner's cleanup follows


class _SiteListener:
    def __init__(self, runner: web.AppRunner, host: str, port: int, ssl_context: ssl.SSLContext | None,
                 reuse_port: bool) -> None:
        # reuse_port: beside other processes on the same port (torrents.servicekit.prefork).
        self.site = web.TCPSite(runner, host, port, ssl_context=ssl_context, reuse_port=reuse_port or None)
        self.runner, self.port = runner, port

    async def start(self) -> None:
        await self.site.start()
        self.port = self.runner.addresses[0][1] if self.runner.addresses else self.port

    async def stop(self) -> None:
        pass  # the runner's cleanup stops aiohttp's sites


async def serve_until_stopped(runner: web.AppRunner, listener: Listener, *, name: str, host: str,
                              secure: bool) -> None:
    """The one serve loop of every service: listen, tell systemd READY=1 once the socket listens (and not
    before: a unit ordered after this one starts when the service really answers), wait for SIGINT or
    SIGTERM, then stop listening, run the app's cleanup contexts and take the signal handlers back."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await listener.start()
        url = f"{'https' if secure else 'http'}://{host}:{listener.port}"
        log.info("%s listening on %s", name, url)
        sdnotify.ready(f"listening on {url}")
        await stop.wait()
        sdnotify.stopping()
    finally:
        await listener.stop()
        await runner.cleanup()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
