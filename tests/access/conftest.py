"""Fixtures for the token tests: the federation's test CA and real issuers over https on loopback."""

from __future__ import annotations

import pytest

from btswarm.testbed.issuer import Issuer
from tests.deploy.deployment import Pki, make_pki


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
