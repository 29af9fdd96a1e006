"""Fixtures for the token tests: the federation's test CA, a real issuer over https, [access] for it.

Not a conftest (tests/conftest.py owns that module name); test modules import the fixtures from here.
"""

from __future__ import annotations

import base64
import json

import pytest

from btswarm.testbed.issuer import AUDIENCE, Issuer
from tests.deploy.deployment import Pki, make_pki
from torrents.access import AccessConfig


@pytest.fixture
def pki(tmp_path) -> Pki:
    return make_pki(tmp_path / "pki", ["127.0.0.1"])


@pytest.fixture
async def issuer(pki):
    async with Issuer("127.0.0.1", str(pki.cert), str(pki.key)) as running:
        yield running


@pytest.fixture
async def stranger(pki):
    """Another issuer, trusted by nobody."""
    async with Issuer("127.0.0.1", str(pki.cert), str(pki.key)) as running:
        yield running


def access_for(issuer: Issuer, pki: Pki, *restricted: str, **more) -> AccessConfig:
    config = AccessConfig(restricted=restricted or ("atlas",), issuers={issuer.url: AUDIENCE}, ca_file=str(pki.ca),
                          **more)
    config.check()
    return config


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
    import hashlib
    import hmac
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    head = f"{_b64({'alg': 'HS256', 'typ': 'JWT'})}.{_b64(claims)}"
    sig = base64.urlsafe_b64encode(hmac.new(secret, head.encode(), hashlib.sha256).digest()).rstrip(b"=").decode()
    return f"{head}.{sig}"
