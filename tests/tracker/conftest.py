"""Fixtures for the tracker's tests: the real app on 127.0.0.1, port 0."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tracker.config import TrackerConfig
from tracker.app import create_app

from tests.tracker.helpers import SECRETS

async def client_factory(server_class: type = TestServer):
    """make(config, **create_app_kwargs) → a TestClient of the real app on 127.0.0.1, port 0,
    served by `server_class` (aiohttp's TestServer, or the fast path's); closed at teardown."""
    clients: list[TestClient] = []

    async def make(config: TrackerConfig | None = None, **kw: Any) -> TestClient:
        config = config or TrackerConfig(site_secrets=SECRETS, start_wait=3.0)
        client = TestClient(server_class(create_app(config, **kw), host="127.0.0.1", port=0))
        await client.start_server()
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


@pytest.fixture
async def make_client():
    async for make in client_factory():
        yield make
