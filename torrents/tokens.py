"""WLCG bearer tokens (WLCG Common JWT Profile 1.0): whether one is genuine and what it reads. Pure.

A token is a JWT signed by an issuer of `[access] issuers` (torrents/access.py)
with RS256 or ES256 only: `alg: none` (unsigned) and the HMAC algorithms (HS*,
which would let anyone holding a published public key forge a token with it)
are refused before any key is looked at. It must carry `iss` (trusted), `aud`
(that issuer's audience for this federation; a list may hold it), `exp` (not
past, `nbf`/`iat` not in the future, each with `[access] leeway`),
`wlcg.ver`, and a `scope` whose `storage.read:PATH` items cover the dataset
(access.covers). Each refusal says which check failed, and the services
answer it as RFC 6750 says: 401 for a missing or bad token, 403 for a good
token of another scope, with `WWW-Authenticate: Bearer`.

The checks here take the issuer's keys as an argument; fetching them (the
issuer's `/.well-known/openid-configuration` and JWKS over https) is
torrents/servicekit/issuers.py's.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from typing import Any, Mapping

import jwt

from torrents import access
from torrents.access import AccessConfig
from torrents.errors import TokenRefused

ALGORITHMS = ("RS256", "ES256")  # the WLCG profile's; RS256 is the one every issuer must support
WLCG_VERSIONS = ("1.0",)
REALM = "btswarm"


def missing(name: str) -> TokenRefused:
    """A restricted dataset asked for without a token (401, no `error` per RFC 6750 3.1)."""
    return TokenRefused(name, f"restricted to members: a bearer token with {access.required_scope(name)} is needed",
                        status=401, scope=access.required_scope(name))


def invalid(problem: str) -> TokenRefused:
    return TokenRefused("token", problem, status=401, error="invalid_token")


@dataclass(frozen=True)
class Unverified:
    """A token's header and claims, read before its signature is checked: only to choose the key."""

    alg: str
    kid: str | None
    issuer: str


@dataclass(frozen=True)
class Grant:
    """What a verified token lets its holder read."""

    issuer: str
    subject: str
    paths: tuple[str, ...]  # storage.read paths (access.read_paths)
    expires: float

    def check_reads(self, name: str) -> None:
        """403 unless this token reads dataset `name`."""
        if not access.covers(self.paths, name):
            has = " ".join(f"{access.READ}:{p}" for p in self.paths) or f"no {access.READ} scope"
            need = access.required_scope(name)
            raise TokenRefused(name, f"the token may not read it: it needs {need} (the token has {has})",
                               status=403, error="insufficient_scope", scope=need)


def when(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ago(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds} s" if seconds < 120 else f"{seconds // 60} min" if seconds < 7200 else f"{seconds // 3600} h"


def inspect(token: str, config: AccessConfig) -> Unverified:
    """The header's algorithm and key id, and the issuer, refused early when no key could make them good."""
    try:
        header = jwt.get_unverified_header(token)
        claims = jwt.decode(token, options={"verify_signature": False})
    except (jwt.DecodeError, json.JSONDecodeError, UnicodeDecodeError, ValueError, TypeError):
        raise invalid("not a JWT (three base64url parts: header, claims, signature)") from None
    alg = header.get("alg")
    if not isinstance(alg, str) or alg.lower() == "none":
        raise invalid("unsigned (alg: none): only tokens signed with RS256 or ES256 are accepted")
    if alg not in ALGORITHMS:
        raise invalid(f"signed with {alg}: only RS256 and ES256 are accepted")
    issuer = claims.get("iss")
    if not isinstance(issuer, str) or not issuer:
        raise invalid("no issuer (iss)")
    if issuer not in config.issuers:
        trusted = ", ".join(sorted(config.issuers)) or "none"
        raise invalid(f"issuer {issuer} is not trusted here (trusted: {trusted})")
    kid = header.get("kid")
    return Unverified(alg, kid if isinstance(kid, str) else None, issuer)


def verify_signature(token: str, seen: Unverified, keys: Mapping[str | None, Any]) -> dict:
    """The claims, once the signature checks with the issuer's key (`keys`: kid → PyJWK)."""
    if seen.kid is None and len(keys) != 1:
        raise invalid(f"no key id (kid) in its header, and issuer {seen.issuer} publishes {len(keys)} keys")
    key = keys.get(seen.kid) if seen.kid is not None else next(iter(keys.values()))
    if key is None:
        raise invalid(f"signed with key {seen.kid!r}, which issuer {seen.issuer} does not publish "
                      "(withdrawn, or not its key)")
    try:
        return jwt.decode(token, key=key, algorithms=[seen.alg],
                          options={"verify_exp": False, "verify_nbf": False, "verify_iat": False,
                                   "verify_aud": False, "verify_iss": False})
    except jwt.InvalidSignatureError:
        raise invalid(f"bad signature: not signed by issuer {seen.issuer}'s key {seen.kid!r}") from None
    except jwt.PyJWTError as exc:
        raise invalid(f"cannot be verified ({exc})") from None


def check_claims(claims: Mapping[str, Any], config: AccessConfig, now: float) -> Grant:
    """The profile's claims of a token whose signature checked → what it reads."""
    issuer = claims.get("iss")
    exp = claims.get("exp")
    if not isinstance(exp, (int, float)) or isinstance(exp, bool):
        raise invalid("no expiry (exp)")
    if now > exp + config.leeway:
        raise invalid(f"expired at {when(exp)} ({_ago(now - exp)} ago)")
    for claim in ("nbf", "iat"):
        t = claims.get(claim)
        if isinstance(t, (int, float)) and not isinstance(t, bool) and t > now + config.leeway:
            raise invalid(f"not valid before {when(t)} ({claim}; is a clock wrong?)")
    audience = config.issuers[issuer]  # type: ignore[index]  # inspect() checked it is trusted
    aud = claims.get("aud")
    auds = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    if audience not in auds and "https://wlcg.cern.ch/jwt/v1/any" not in auds:
        raise invalid(f"audience {aud!r} is not this federation's ({audience})")
    if str(claims.get("wlcg.ver")) not in WLCG_VERSIONS:
        raise invalid(f"not a WLCG token (wlcg.ver {claims.get('wlcg.ver')!r}; expected 1.0)")
    scope = claims.get("scope")
    items = scope.split() if isinstance(scope, str) else []
    sub = claims.get("sub")
    return Grant(issuer=str(issuer), subject=sub if isinstance(sub, str) else "", paths=access.read_paths(items),
                 expires=float(exp))


def www_authenticate(refused: TokenRefused) -> str:
    """The RFC 6750 challenge that goes with a refusal."""
    parts = [f'realm="{REALM}"']
    if refused.error:
        parts.append(f'error="{refused.error}"')
        parts.append('error_description="' + refused.problem.replace("\\", "\\\\").replace('"', "'") + '"')
    if refused.scope:
        parts.append(f'scope="{refused.scope}"')
    return "Bearer " + ", ".join(parts)


def bearer(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer TOKEN` header, or None (none, or another scheme)."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None
