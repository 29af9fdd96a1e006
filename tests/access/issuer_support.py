"""Helpers for the token tests: [access] for the test issuer, and tokens as an attacker would make them.

The fixtures (the test CA, the issuers) are in tests/access/conftest.py.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

from btswarm.testbed.issuer import AUDIENCE, Issuer
from tests.deploy.deployment import Pki
from torrents.access import AccessConfig


def access_for(issuer: Issuer, pki: Pki, *restricted: str, **more) -> AccessConfig:
    return AccessConfig(restricted=restricted or ("atlas",), issuers={issuer.url: AUDIENCE}, ca_file=str(pki.ca),
                        **more)


def _b64(doc: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).rstrip(b"=").decode()


def unsigned(token: str) -> str:
    """The same claims with `alg: none` and no signature, as an attacker would send them."""
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    return f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(claims)}."


def forged(token: str, **changes) -> str:
    """The token's claims changed (e.g. a wider scope), its signature kept: no longer the issuer's."""
    header, body, sig = token.split(".")
    claims = {**json.loads(base64.urlsafe_b64decode(body + "==")), **changes}
    return f"{header}.{_b64(claims)}.{sig}"


def hmac_signed(token: str, secret: bytes) -> str:
    """The claims signed with HS256 (a secret an attacker knows, such as the issuer's public key)."""
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    head = f"{_b64({'alg': 'HS256', 'typ': 'JWT'})}.{_b64(claims)}"
    sig = base64.urlsafe_b64encode(hmac.new(secret, head.encode(), hashlib.sha256).digest()).rstrip(b"=").decode()
    return f"{head}.{sig}"
