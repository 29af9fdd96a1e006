"""POST /api/peer-certificate: a T3's peer certificate for restricted datasets (issue 45, the peer wire).

The T3 makes its key and sends only a certificate request (CSR, PEM) naming the datasets it wants to
fetch or share; the repository, which holds the federation's peer CA key (`[repo] peer_ca`, `peer_ca_key`),
signs it for those names, for `peer_cert_lifetime` (hours: a stolen key is worth no more). Every name must
be a dataset the repository knows, and the requester must be allowed to read every one: `may_read` below
is the ONE place that decides that.
"""

from __future__ import annotations

import datetime as dt
from typing import Sequence

from aiohttp import web

from torrents import peerca
from torrents.errors import AuthError, ConfigError, Forbidden, NotFound

from btrepo import keys, readers

MAX_CSR = 64 * 1024
PEM = "application/x-pem-file"
PEER_CA = web.AppKey("peer_ca", tuple)  # (CA key PEM, CA certificate PEM), read once at start


def load_peer_ca(ca_path: str, key_path: str) -> tuple[bytes, bytes] | None:
    """The peer CA `[repo] peer_ca` and `peer_ca_key` name (None: this repository signs nothing)."""
    if not ca_path and not key_path:
        return None
    if not ca_path or not key_path:
        raise ConfigError("[repo] peer_ca" if not ca_path else "[repo] peer_ca_key",
                          "needed with the other: the peer CA's certificate and its key, PEM")
    key, ca = peerca.read_files("[repo]", (("peer_ca_key", key_path), ("peer_ca", ca_path)))
    return key, ca


async def may_read(request: web.Request, names: Sequence[str]) -> None:
    """Raise unless the requester may read every dataset in `names`: each is members-only by the
    repository's `[access] restricted`, and the request's bearer token reads it (btrepo/readers.py: 401
    without one, 403 for another scope). A public dataset needs no certificate (403: its swarm is plain).
    `[repo] peer_cert_anyone = true`, a test bed's setting, lets anyone who reaches the repository in."""
    if request.app[keys.CONFIG].peer_cert_anyone:
        return
    policy = request.app[keys.ACCESS]
    for name in names:
        if not policy.is_restricted(name):
            raise Forbidden(name, "a public dataset: its swarm takes peers without a certificate")
        await readers.check_read(request, name)


async def issue(request: web.Request) -> web.Response:
    ca = request.app.get(PEER_CA)
    if ca is None:
        raise NotFound("peer certificate", "this repository issues none ([repo] peer_ca, peer_ca_key unset)")
    if request.content_length is not None and request.content_length > MAX_CSR:
        raise web.HTTPRequestEntityTooLarge(max_size=MAX_CSR, actual_size=request.content_length)
    csr = await request.content.read(MAX_CSR + 1)
    if len(csr) > MAX_CSR:
        raise web.HTTPRequestEntityTooLarge(max_size=MAX_CSR, actual_size=len(csr))
    names = peerca.csr_names(csr)  # PeerCertError: a 400 naming the problem
    db = request.app[keys.DB]
    for name in names:
        if name == peerca.EVERY_DATASET:
            raise AuthError(name, "a T3's certificate names datasets, never every one")
        if await db.detail(name) is None:
            raise NotFound(name, "no such dataset")
    await may_read(request, names)
    config = request.app[keys.CONFIG]
    issued = peerca.issue(ca[0], ca[1], csr, dt.datetime.now(dt.timezone.utc),
                          dt.timedelta(seconds=config.peer_cert_lifetime))
    return web.Response(body=issued.cert, content_type=PEM)
