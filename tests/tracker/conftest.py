"""Fixtures for the tracker's tests: the real app on 127.0.0.1, port 0, on either store.

`make_client` is parametrized: every test that uses it runs once with the
memory store and once with the Redis store against a real redis-server
(its own key prefix per app, so tests never see each other's swarms).
"""

from __future__ import annotations

import dataclasses
import secrets
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tracker.config import TrackerConfig
from tracker.app import create_app

from tests.tracker.helpers import SECRETS

def store_config(config: TrackerConfig, store: str, redis_url: str | None) -> TrackerConfig:
    """`config` on `store`; for Redis, a key prefix no other app of the session uses."""
    if store == "memory":
        return config
    return dataclasses.replace(config, store="redis", redis_url=redis_url, redis_prefix=f"t{secrets.token_hex(6)}:")


async def client_factory(server_class: type = TestServer, store: str = "memory", redis_url: str | None = None):
    """make(config, **create_app_kwargs) → a TestClient of the real app on 127.0.0.1, port 0,
    served by `server_class` (aiohttp's TestServer, or the fast path's); closed at teardown."""
    clients: list[TestClient] = []

    async def make(config: TrackerConfig | None = None, **kw: Any) -> TestClient:
        config = store_config(config or TrackerConfig(site_secrets=SECRETS, start_wait=3.0), store, redis_url)
        client = TestClient(server_class(create_app(config, **kw), host="127.0.0.1", port=0))
        await client.start_server()
        clients.append(client)
        return client

    make.store = store  # type: ignore[attr-defined]
    yield make
    for client in clients:
        await client.close()


@pytest.fixture(params=["memory", "redis"])
def store_kind(request):
    return request.param


@pytest.fixture
def redis_url(store_kind, request):
    return request.getfixturevalue("redis_server").url if store_kind == "redis" else None


@pytest.fixture
async def make_client(store_kind, redis_url):
    async for make in client_factory(store=store_kind, redis_url=redis_url):
        yield make
