"""HMAC-SHA256 signing of control requests between btswarm services.

The signature covers the method, the path with its query, a timestamp, a
nonce and the SHA256 of the body, under a per-site secret. A verifier
refuses unsigned, unknown-site, wrongly signed, stale (|skew| > 300 s) and
replayed (nonce seen within the skew window) requests. The signature is
checked before the time, so that a stale refusal (StaleRequest, with the
signer's clock offset) is only ever said of a request the site really sent:
no one without the secret can make a service warn about a site's clock.
Pure: headers in, headers out; the HTTP layers call it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets as _secrets
import time
from collections import OrderedDict
from typing import Callable, Mapping

from torrents.errors import AuthError
from torrents.clockskew import Reports

H_SITE = "X-Btswarm-Site"
H_TIME = "X-Btswarm-Timestamp"
H_NONCE = "X-Btswarm-Nonce"
H_SIG = "X-Btswarm-Signature"
MAX_SKEW = 300


def _message(method: str, path: str, timestamp: str, nonce: str, body: bytes) -> bytes:
    digest = hashlib.sha256(body).hexdigest()
    return "\n".join([method.upper(), path, timestamp, nonce, digest]).encode()


def sign(secret: str, site: str, method: str, path: str, body: bytes = b"", *,
         now: float | None = None, nonce: str | None = None) -> dict[str, str]:
    """Headers that sign this request as `site`."""
    ts = str(int(time.time() if now is None else now))
    nonce = nonce or _secrets.token_hex(16)
    sig = hmac.new(secret.encode(), _message(method, path, ts, nonce, body), hashlib.sha256).hexdigest()
    return {H_SITE: site, H_TIME: ts, H_NONCE: nonce, H_SIG: sig}


class StaleRequest(AuthError):
    """A correctly signed request whose timestamp is beyond the limit: the signer's clock is off."""

    def __init__(self, site: str, when: int, now: float, limit: int) -> None:
        super().__init__(site, f"request timestamp is {int(now - when)} s off (limit {limit} s)")
        self.site = site
        # The signer's clock minus ours, in seconds; +0.5 as the timestamp is its time truncated to the second.
        self.offset = when + 0.5 - now
        self.limit = limit


class Verifier:
    """Checks signed requests against a site → secret map, remembering nonces and the clocks it refused."""

    def __init__(self, secrets: Mapping[str, str] | Callable[[str], str | None], *,
                 max_skew: int = MAX_SKEW, max_nonces: int = 100_000,
                 clock: Callable[[], float] = time.time, signer: str = "site") -> None:
        """`signer`: who signs, as the logs name it before the site's name ("site" → "site site2")."""
        self.signer = signer
        self._lookup = secrets.get if isinstance(secrets, Mapping) else secrets
        self.max_skew = max_skew
        self.max_nonces = max_nonces
        self._clock = clock
        self._nonces: OrderedDict[str, float] = OrderedDict()
        self.clocks = Reports()  # sites refused as stale, by the offset last said (web.read_signed logs them)

    def verify(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> str:
        """Return the signing site's name, or raise AuthError."""
        site = headers.get(H_SITE)
        ts = headers.get(H_TIME)
        nonce = headers.get(H_NONCE)
        sig = headers.get(H_SIG)
        if not (site and ts and nonce and sig):
            raise AuthError(f"{method} {path}", "request is not signed")
        secret = self._lookup(site)
        if not secret:
            raise AuthError(site, "unknown site")
        try:
            when = int(ts)
        except ValueError:
            raise AuthError(site, "bad timestamp") from None
        expected = hmac.new(secret.encode(), _message(method, path, ts, nonce, body), hashlib.sha256).hexdigest()
        # compared as bytes: compare_digest raises TypeError on a str with non-ASCII characters
        if not hmac.compare_digest(expected.encode(), sig.encode("utf-8", "surrogateescape")):
            raise AuthError(site, "bad signature")
        now = self._clock()
        if abs(now - when) > self.max_skew:
            raise StaleRequest(site, when, now, self.max_skew)
        self._forget(now)
        key = f"{site}\0{nonce}"
        if key in self._nonces:
            raise AuthError(site, "replayed request")
        self._nonces[key] = now
        if len(self._nonces) > self.max_nonces:
            self._nonces.popitem(last=False)
        return site

    def _forget(self, now: float) -> None:
        horizon = now - 2 * self.max_skew
        while self._nonces:
            key, seen = next(iter(self._nonces.items()))
            if seen >= horizon:
                break
            self._nonces.popitem(last=False)
