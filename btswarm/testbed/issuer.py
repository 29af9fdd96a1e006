"""A real WLCG token issuer on loopback, for tests and test beds: OpenID discovery and JWKS over https, real
RS256/ES256 tokens with the claims a test chooses, and key rotation.

It serves what an issuer such as INDIGO IAM or CILogon serves to a relying
party: `/.well-known/openid-configuration` (whose `jwks_uri` is `/jwks`) and the
JWKS, over https with the certificate it is given (the federation's test CA,
tests/deploy/deployment.py `make_pki`). `mint()` signs a token with the current
key; `rotate()` makes a new key and withdraws the old one, so tokens signed
with it stop verifying once a service's kept keys run out
(`[access] keys_lifetime`). Never imported by the product.

As a process (a test bed's, `python -m btswarm.testbed.issuer HOST:PORT CERT
KEY`) it prints `READY https://HOST:PORT` once it listens, and answers two more
calls that a real issuer does not have, for whoever is on this host:
`POST /token` `{"scope": "storage.read:/atlas", "lifetime": 600, ...claims}`
→ `{"access_token": JWT}`, and `POST /rotate`. It listens on loopback only.
"""

from __future__ import annotations

import asyncio
import json
import signal
import ssl
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

import jwt
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from torrents.devsecret import is_loopback_host
from torrents.errors import BtswarmError, ConfigError
from torrents.hostport import format_hostport, parse_hostport

AUDIENCE = "https://btswarm.test"


@dataclass
class SigningKey:
    kid: str
    alg: str
    private: Any

    @classmethod
    def new(cls, alg: str) -> "SigningKey":
        private = (rsa.generate_private_key(public_exponent=65537, key_size=2048) if alg == "RS256"
                   else ec.generate_private_key(ec.SECP256R1()))
        return cls(uuid.uuid4().hex[:12], alg, private)

    def jwk(self) -> dict:
        algo = jwt.algorithms.RSAAlgorithm if self.alg == "RS256" else jwt.algorithms.ECAlgorithm
        doc = json.loads(algo.to_jwk(self.private.public_key()))
        return {**doc, "kid": self.kid, "alg": self.alg, "use": "sig"}


class Issuer:
    """`async with Issuer(host, cert, key) as issuer:` serves on https://host:PORT until the block ends."""

    def __init__(self, host: str, cert: str, key: str, *, alg: str = "RS256", port: int = 0) -> None:
        self.host, self.port = host, port
        self.ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ssl.load_cert_chain(cert, key)
        self.keys = [SigningKey.new(alg), SigningKey.new("ES256" if alg == "RS256" else "RS256")]
        self.fetches = 0  # JWKS fetches answered: what a test counts to know a service asked again
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"https://{format_hostport(self.host, self.port)}"

    def mint(self, scope: str = "storage.read:/", *, aud: str | list[str] = AUDIENCE, lifetime: float = 600,
             alg: str | None = None, key: SigningKey | None = None, iss: str | None = None,
             now: float | None = None, **claims: Any) -> str:
        """A token signed with the current key (or `key`), valid `lifetime` seconds from `now`."""
        now = time.time() if now is None else now
        signer = key or next(k for k in self.keys if alg is None or k.alg == alg)
        payload = {"iss": iss or self.url, "sub": "physicist", "aud": aud, "iat": int(now), "nbf": int(now),
                   "exp": int(now + lifetime), "jti": uuid.uuid4().hex, "wlcg.ver": "1.0", "scope": scope,
                   **claims}
        return jwt.encode({k: v for k, v in payload.items() if v is not None}, signer.private,
                          algorithm=signer.alg, headers={"kid": signer.kid})

    def rotate(self) -> None:
        """New keys in, the old ones withdrawn: tokens signed before no longer verify."""
        self.keys = [SigningKey.new(k.alg) for k in self.keys]

    async def __aenter__(self) -> "Issuer":
        return await self.start()

    async def start(self, *, minting: bool = False) -> "Issuer":
        """Serve; `minting` adds POST /token and POST /rotate (the process's)."""
        app = web.Application()
        app.router.add_get("/.well-known/openid-configuration", self._discovery)
        app.router.add_get("/jwks", self._jwks)
        if minting:
            app.router.add_post("/token", self._token)
            app.router.add_post("/rotate", self._rotate)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.ssl)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _discovery(self, request: web.Request) -> web.Response:
        return web.json_response({"issuer": self.url, "jwks_uri": f"{self.url}/jwks",
                                  "id_token_signing_alg_values_supported": ["RS256", "ES256"],
                                  "scopes_supported": ["storage.read:/", "wlcg"]})

    async def _jwks(self, request: web.Request) -> web.Response:
        self.fetches += 1
        return web.json_response({"keys": [k.jwk() for k in self.keys]})

    async def _token(self, request: web.Request) -> web.Response:
        try:
            doc = await request.json()
            if not isinstance(doc, dict):
                raise ValueError("expected a JSON object")
            scope = doc.pop("scope", "storage.read:/")
            lifetime = float(doc.pop("lifetime", 600))
            token = self.mint(str(scope), lifetime=lifetime, **doc)
        except (ValueError, TypeError) as exc:
            return web.json_response({"error": f"token: {exc}"}, status=400)
        return web.json_response({"access_token": token, "token_type": "Bearer", "expires_in": int(lifetime)})

    async def _rotate(self, request: web.Request) -> web.Response:
        self.rotate()
        return web.json_response({"kids": [k.kid for k in self.keys]})


async def serve(listen: str, cert: str, key: str) -> None:
    """Run the issuer as a test bed's process until SIGTERM or SIGINT."""
    host, port = parse_hostport(listen, "HOST:PORT")
    if not is_loopback_host(host):
        raise ConfigError(listen, "the test issuer mints tokens for anyone who asks: loopback addresses only")
    issuer = await Issuer(host, cert, key, port=port).start(minting=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    print(f"READY {issuer.url}", flush=True)
    try:
        await stop.wait()
    finally:
        await issuer.__aexit__()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or args[0].startswith("-"):
        print("usage: python -m btswarm.testbed.issuer HOST:PORT CERT KEY   (a WLCG token issuer on loopback)",
              file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(*args))
    except (BtswarmError, OSError, ssl.SSLError) as exc:
        print(f"issuer: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
