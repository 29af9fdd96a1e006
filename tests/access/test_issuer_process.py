"""The test issuer as a test bed's process: READY line, tokens on request, rotation; loopback only."""

from __future__ import annotations

import sys
import time

import aiohttp
import pytest

from btswarm.testbed.issuer import AUDIENCE
from tests.support import wait_for
from torrents.access import AccessConfig
from torrents.errors import TokenRefused
from torrents.servicekit import tls
from torrents.servicekit.issuers import Issuers

pytestmark = pytest.mark.slow


async def test_the_process_mints_tokens_a_service_verifies_and_rotates(procs, pki):
    proc = procs.start("issuer", [sys.executable, "-m", "btswarm.testbed.issuer", "127.0.0.1:0", str(pki.cert),
                                  str(pki.key)])
    wait_for(lambda: "READY " in proc.log() or proc.popen.poll() is not None, timeout=20, what="the issuer")
    url = proc.log().split("READY ", 1)[1].split()[0]
    now = [time.time()]
    verifier = Issuers(AccessConfig(restricted=("atlas",), issuers={url: AUDIENCE}, ca_file=str(pki.ca),
                                    keys_lifetime=60), clock=lambda: now[0])
    connector = aiohttp.TCPConnector(ssl=tls.client_context(str(pki.ca)))
    async with aiohttp.ClientSession(connector=connector) as http:
        async with http.post(f"{url}/token", json={"scope": "storage.read:/atlas", "lifetime": 3600}) as r:
            token = (await r.json())["access_token"]
        try:
            grant = await verifier.verify(token)
            assert grant.paths == ("/atlas",) and grant.issuer == url
            async with http.post(f"{url}/rotate") as r:
                assert r.status == 200
            now[0] += 61  # the kept keys run out
            with pytest.raises(TokenRefused, match="does not publish"):
                await verifier.verify(token)
            async with http.post(f"{url}/token", json=["not", "an object"]) as r:
                assert r.status == 400 and (await r.json())["error"] == "token: expected a JSON object"
        finally:
            await verifier.close()


def test_it_listens_on_loopback_only(procs, pki):
    proc = procs.start("issuer", [sys.executable, "-m", "btswarm.testbed.issuer", "example.org:8443", str(pki.cert),
                                  str(pki.key)])
    assert proc.popen.wait(30) == 1
    assert "issuer: error: example.org:8443: the test issuer mints tokens for anyone who asks: loopback addresses " \
           "only" in proc.log()
