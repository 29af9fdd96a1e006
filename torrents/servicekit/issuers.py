"""The trusted token issuers' keys, fetched over https and kept a bounded time; a token verified with them.

An issuer of `[access] issuers` publishes `ISSUER/.well-known/openid-configuration`,
whose `jwks_uri` (https) lists its public keys (JWKS). Both are fetched with
TLS verified against the system's CAs and `[access] ca_file`, and the keys are
kept for `[access] keys_lifetime`: a key the issuer withdrew (rotated after a
leak) verifies nothing once that lifetime has run out. A token signed with a
key id not in the kept set makes one fetch at once (a key the issuer has just
added), at most one per issuer every MIN_REFETCH seconds, so that tokens with
made-up key ids cannot make the service hammer the issuer. An issuer that did
not answer is not asked again for MIN_REFETCH seconds either: meanwhile its
kept keys serve until their lifetime ends, and after that its tokens are
refused at once (503) rather than each waiting for a timeout.

The checks themselves are torrents/tokens.py's (pure).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

import aiohttp
import jwt

from torrents import tokens
from torrents.access import AccessConfig
from torrents.servicekit.httpclient import client_error, client_session
from torrents.servicekit.tls import hint

log = logging.getLogger("btswarm.issuers")

MIN_REFETCH = 10.0  # seconds between two fetches of one issuer's keys caused by unknown key ids
TIMEOUT = aiohttp.ClientTimeout(total=10)
MAX_DOCUMENT = 1024 * 1024


@dataclass
class _Kept:
    keys: dict[str | None, Any]
    fetched: float


class Issuers:
    """Verifies bearer tokens for a service: `await issuers.verify(token)` → tokens.Grant, or TokenRefused.
    With access.NONE (no [access] section) nothing is restricted and no issuer is ever asked."""

    def __init__(self, config: AccessConfig, *, clock: Callable[[], float] = time.time) -> None:
        self.config, self.clock = config, clock
        self._kept: dict[str, _Kept] = {}
        self._failed: dict[str, tuple[float, tokens.TokenRefused]] = {}  # issuer → its last failed fetch
        self._locks: dict[str, asyncio.Lock] = {}
        self._session: aiohttp.ClientSession | None = None

    async def verify(self, token: str) -> tokens.Grant:
        seen = tokens.inspect(token, self.config)
        keys = await self._keys(seen.issuer, want=seen.kid)
        claims = tokens.verify_signature(token, seen, keys)
        return tokens.check_claims(claims, self.config, self.clock())

    async def check_read(self, authorization: str | None, name: str) -> None:
        """Nothing for a public dataset; for a restricted one, TokenRefused unless the request's
        `Authorization: Bearer` token may read it (a token sent for a public one is not looked at)."""
        if not self.config.is_restricted(name):
            return
        token = tokens.bearer(authorization)
        if token is None:
            raise tokens.missing(name)
        (await self.verify(token)).check_reads(name)

    async def read_paths(self, authorization: str | None) -> tuple[str, ...]:
        """What the request's token reads, for a listing: () without a token, or when nothing is restricted
        (then the token is not looked at); a bad token is refused, so its holder learns why."""
        token = tokens.bearer(authorization)
        if token is None or not self.config.restrictions:
            return ()
        return (await self.verify(token)).paths

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _keys(self, issuer: str, want: str | None) -> dict[str | None, Any]:
        lock = self._locks.setdefault(issuer, asyncio.Lock())
        async with lock:  # one fetch per issuer in flight; the others wait for its keys
            kept, now = self._kept.get(issuer), self.clock()
            stale = kept is None or now - kept.fetched >= self.config.keys_lifetime
            unknown = kept is not None and want is not None and want not in kept.keys
            if not (stale or (unknown and now - kept.fetched >= MIN_REFETCH)):  # type: ignore[union-attr]
                return kept.keys  # type: ignore[union-attr]
            failed = self._failed.get(issuer)
            if failed is None or now - failed[0] >= MIN_REFETCH:  # an issuer that is away is asked again later
                try:
                    kept = _Kept(await self._fetch(issuer), now)
                except tokens.TokenRefused as exc:
                    failed = self._failed[issuer] = (now, exc)
                else:
                    self._failed.pop(issuer, None)
                    self._kept[issuer] = kept
                    return kept.keys
            if stale:  # keys past their lifetime are not used while the issuer is away
                self._kept.pop(issuer, None)
                raise failed[1]
            return kept.keys  # type: ignore[union-attr]

    async def _fetch(self, issuer: str) -> dict[str | None, Any]:
        if self._session is None:
            self._session = client_session(self.config.ca_file, timeout=TIMEOUT)
        where = f"{issuer.rstrip('/')}/.well-known/openid-configuration"
        try:
            meta = await self._get_json(where)
            jwks_uri = meta.get("jwks_uri") if isinstance(meta, dict) else None
            if not isinstance(jwks_uri, str) or not jwks_uri.startswith("https://"):
                raise ValueError(f"{where}: no https jwks_uri")
            where = jwks_uri
            found = jwt.PyJWKSet.from_dict(await self._get_json(jwks_uri))
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, jwt.PyJWTError) as exc:
            problem = client_error(exc, hint("access"))
            log.warning("issuer %s: cannot fetch its keys from %s: %s", issuer, where, problem)
            raise tokens.TokenRefused("token", f"cannot check it: issuer {issuer}'s keys are unavailable "
                                               f"({problem})", status=503) from None
        log.info("issuer %s: %d keys fetched from %s", issuer, len(found.keys), where)
        return {k.key_id: k for k in found.keys}

    async def _get_json(self, url: str) -> Any:
        assert self._session is not None
        async with self._session.get(url, allow_redirects=False) as resp:
            if resp.status != 200:
                raise ValueError(f"{url}: HTTP {resp.status}")
            body = await resp.content.read(MAX_DOCUMENT + 1)
            if len(body) > MAX_DOCUMENT:
                raise ValueError(f"{url}: larger than {MAX_DOCUMENT} bytes")
            return json.loads(body)
