"""Rucio's REST API through aiohttp: a token, DID searches, dataset and container contents, replicas at one RSE.

The calls and headers are Rucio's own (what its client library sends):
`GET /auth/userpass` with X-Rucio-Account / X-Rucio-Username /
X-Rucio-Password gives an X-Rucio-Auth-Token, sent on every other call;
listings answer `application/x-json-stream`, one JSON document a line,
read here line by line with a bound on the line length. Errors are sorted
by what the caller does about them: `RucioUnavailable` (no connection, a
timeout, 5xx: retry later), `RucioRefused` (401/403: the credentials are
wrong, say so), `RucioNotFound` (a DID Rucio does not know: a problem of
that dataset only).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import time
from pathlib import Path
from typing import Any, AsyncIterator
from urllib.parse import quote, urlsplit

import aiohttp

from torrents.did import DID
from torrents.errors import BtswarmError

from btserver.config import RucioConfig

log = logging.getLogger("btswarm.server.rucio")

MAX_LINE = 16 * 1024 * 1024  # one replica with its PFNs is a few hundred bytes
TOKEN_MARGIN = 300.0  # seconds before expiry a userpass token is renewed
STREAM = "application/x-json-stream"


class RucioError(BtswarmError):
    """Rucio answered something btswarm cannot use."""


class RucioUnavailable(RucioError):
    """No answer, a timeout or a server error: the catalog is out of reach for now."""


class RucioRefused(RucioError):
    """401/403: Rucio does not accept these credentials (or this token)."""


class RucioNotFound(RucioError):
    """404: no such DID (or scope) in Rucio."""


def _read_secret(path: str, what: str) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise RucioRefused(path, f"cannot read the {what} ({getattr(exc, 'strerror', None) or exc})") from None
    if not text:
        raise RucioRefused(path, f"the {what} file is empty")
    return text


def _rucio_error(resp: aiohttp.ClientResponse, body: bytes) -> str:
    """Rucio's own words for an error: ExceptionClass/ExceptionMessage, in headers or a JSON body."""
    cls, msg = resp.headers.get("ExceptionClass"), resp.headers.get("ExceptionMessage")
    if not cls:
        try:
            doc = json.loads(body)
            cls, msg = doc.get("ExceptionClass"), doc.get("ExceptionMessage")
        except (ValueError, AttributeError):
            msg = body[:200].decode(errors="replace").strip()
    return f"HTTP {resp.status}" + (f" {cls}" if cls else "") + (f": {msg}" if msg else "")


class RucioClient:
    def __init__(self, http: aiohttp.ClientSession, cfg: RucioConfig) -> None:
        self.http = http
        self.cfg = cfg
        self.base = cfg.server.rstrip("/")
        self.auth_base = (cfg.auth_server or cfg.server).rstrip("/")
        self.timeout = aiohttp.ClientTimeout(total=None, connect=min(10.0, cfg.timeout), sock_read=cfg.timeout)
        self._token: str | None = None
        self._expires = 0.0
        self.requests = 0  # calls made, for the log and the benchmarks

    # -- the token ----------------------------------------------------------------------------
    async def token(self) -> str:
        if self.cfg.token_file:
            return _read_secret(self.cfg.token_file, "Rucio token")  # renewed by someone else: read each time
        if self._token and time.time() < self._expires - TOKEN_MARGIN:
            return self._token
        password = self.cfg.password or _read_secret(self.cfg.password_file, "Rucio password")
        headers = {"X-Rucio-Account": self.cfg.account, "X-Rucio-Username": self.cfg.username,
                   "X-Rucio-Password": password}
        if self.cfg.vo:
            headers["X-Rucio-VO"] = self.cfg.vo
        url = f"{self.auth_base}/auth/userpass"
        async with self._call("GET", url, headers=headers) as resp:
            body = await resp.read()
            if resp.status in (401, 403):
                raise RucioRefused(f"account {self.cfg.account}", f"{self.auth_base} refused the userpass "
                                                                  f"credentials ({_rucio_error(resp, body)})")
            self._raise_for(resp, body, url)
            token = resp.headers.get("X-Rucio-Auth-Token")
            if not token:
                raise RucioError(url, "answered without an X-Rucio-Auth-Token")
        self._token = token
        self._expires = _expiry(resp.headers.get("X-Rucio-Auth-Token-Expires"))
        log.info("rucio: token for account %s from %s", self.cfg.account, self.auth_base)
        return token

    # -- the calls ------------------------------------------------------------------------------
    def _call(self, method: str, url: str, **kwargs: Any) -> Any:
        self.requests += 1
        return _Call(self.http.request(method, url, timeout=self.timeout, **kwargs), url)

    def _raise_for(self, resp: aiohttp.ClientResponse, body: bytes, url: str) -> None:
        if resp.status >= 500:
            raise RucioUnavailable(self.base, f"{url}: {_rucio_error(resp, body)}")
        if resp.status >= 400:
            raise RucioError(url, _rucio_error(resp, body))

    async def _stream(self, method: str, path: str, subject: str, **kwargs: Any) -> AsyncIterator[Any]:
        """The documents of an x-json-stream answer; renews a userpass token once on a 401."""
        url = f"{self.base}{path}"
        for attempt in (1, 2):
            headers = {"X-Rucio-Auth-Token": await self.token(), "Accept": STREAM}
            async with self._call(method, url, headers=headers, **kwargs) as resp:
                if resp.status == 401 and attempt == 1 and not self.cfg.token_file:
                    await resp.read()
                    self._token = None  # expired or revoked: log in again
                    continue
                if resp.status >= 400:
                    body = await resp.read()
                    if resp.status in (401, 403):
                        raise RucioRefused(subject, f"Rucio refused the {'token' if self.cfg.token_file else 'login'}"
                                                    f" ({_rucio_error(resp, body)})")
                    if resp.status == 404:
                        raise RucioNotFound(subject, f"not in Rucio ({_rucio_error(resp, body)})")
                    self._raise_for(resp, body, url)
                async for doc in _json_lines(resp, url):
                    yield doc
                return

    async def search(self, scope: str, pattern: str, did_type: str = "dataset") -> list[DID]:
        """DIDs of `did_type` (dataset, container) in `scope` whose name matches `pattern` (Rucio's '*')."""
        path = f"/dids/{quote(scope, safe='')}/dids/search"
        out = []
        async for doc in self._stream("GET", path, f"{scope}:{pattern}", params={"type": did_type, "name": pattern}):
            name = doc.get("name") if isinstance(doc, dict) else doc
            if isinstance(name, str):
                out.append(DID(scope, name))
        return out

    async def search_datasets(self, scope: str, pattern: str) -> list[DID]:
        return await self.search(scope, pattern, "dataset")

    async def types(self, dids: list[DID]) -> dict[DID, str]:
        """Each DID's type (DATASET, CONTAINER, FILE) in one call (`POST /dids/bulkmeta`); RucioNotFound
        when Rucio knows one of them not."""
        out = {}
        async for doc in self._stream("POST", "/dids/bulkmeta", f"{len(dids)} DIDs",
                                      json={"dids": [d.record() for d in dids]}):
            if isinstance(doc, dict) and isinstance(doc.get("scope"), str) and isinstance(doc.get("name"), str):
                out[DID(doc["scope"], doc["name"])] = str(doc.get("did_type", "")).upper()
        return out

    async def content(self, did: DID) -> list[tuple[DID, str]]:
        """What a container (or dataset) holds directly: (DID, type: DATASET, CONTAINER or FILE);
        RucioNotFound if unknown."""
        path = f"/dids/{quote(did.scope, safe='')}/{quote(did.name, safe='')}/dids"
        out = []
        async for doc in self._stream("GET", path, str(did)):
            if isinstance(doc, dict) and isinstance(doc.get("scope"), str) and isinstance(doc.get("name"), str):
                out.append((DID(doc["scope"], doc["name"]), str(doc.get("type", "")).upper()))
        return out

    async def dataset_files(self, did: DID) -> list[dict]:
        """Every file of a dataset: {"scope", "name", "bytes", "adler32", ...}; RucioNotFound if unknown."""
        path = f"/dids/{quote(did.scope, safe='')}/{quote(did.name, safe='')}/files"
        return [doc async for doc in self._stream("GET", path, str(did)) if isinstance(doc, dict)]

    async def bulk_files(self, dids: list[DID]) -> dict[DID, list[dict]]:
        """The files of many datasets in one call (`POST /dids/bulkfiles`); unknown or empty ones are absent."""
        out: dict[DID, list[dict]] = {}
        async for doc in self._stream("POST", "/dids/bulkfiles", f"{len(dids)} datasets",
                                      json={"dids": [d.record() for d in dids]}):
            if isinstance(doc, dict):
                out.setdefault(DID(doc.get("parent_scope"), doc.get("parent_name")), []).append(doc)
        return out

    async def replicas(self, dids: list[DID], rse: str, schemes: tuple[str, ...]) -> list[dict]:
        """`list_replicas` of these datasets' files, restricted to one RSE and these schemes: each
        file once (whatever datasets hold it); a file with no replica there is absent."""
        # ignore_availability: bt-server reads its own disks; an RSE flagged
        # unavailable for the grid still has the files (the farm checks them).
        # sort=random: else Rucio orders each file's PFNs by GeoIP distance to
        # the caller, which is all of one RSE here (rucio_map orders them by
        # priority); that was slower (docs/benchmarks.md "rucio").
        body = {"dids": [d.record() for d in dids], "schemes": list(schemes), "rse_expression": rse,
                "ignore_availability": True, "sort": "random"}
        return [doc async for doc in self._stream("POST", "/replicas/list", f"{len(dids)} datasets", json=body)
                if isinstance(doc, dict)]


class _Call:
    """An aiohttp request whose connection errors and timeouts become RucioUnavailable."""

    def __init__(self, ctx: Any, url: str) -> None:
        self.ctx = ctx
        self.url = url

    async def __aenter__(self) -> aiohttp.ClientResponse:
        try:
            return await self.ctx.__aenter__()
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise RucioUnavailable(_origin(self.url), f"cannot reach ({_why(exc)})") from None

    async def __aexit__(self, *exc: object) -> None:
        await self.ctx.__aexit__(*exc)


async def _json_lines(resp: aiohttp.ClientResponse, url: str) -> AsyncIterator[Any]:
    buf = b""
    try:
        async for chunk in resp.content.iter_chunked(1 << 16):
            buf += chunk
            *lines, buf = buf.split(b"\n")
            if len(buf) > MAX_LINE:
                raise RucioError(url, f"a line of the answer is longer than {MAX_LINE} bytes")
            for line in lines:
                if line.strip():
                    yield _parse(line, url)
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        raise RucioUnavailable(_origin(url), f"answer cut off ({_why(exc)})") from None
    if buf.strip():
        yield _parse(buf, url)


def _parse(line: bytes, url: str) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        raise RucioError(url, f"not a JSON stream (line starts {line[:60]!r})") from None


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _why(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "no answer in time"
    return f"{exc.__class__.__name__}: {exc}" if str(exc) else exc.__class__.__name__


def _expiry(header: str | None) -> float:
    """X-Rucio-Auth-Token-Expires ('Tue, 01 Dec 2026 08:58:22 UTC') → epoch; unknown: one hour from now."""
    if header:
        try:
            return email.utils.parsedate_to_datetime(header).timestamp()
        except (TypeError, ValueError):
            pass
    return time.time() + 3600

