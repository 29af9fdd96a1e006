"""Helpers for the tracker's tests: raw announces, signed heartbeats."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote_from_bytes

import yarl
from aiohttp.test_utils import TestClient

from torrents import auth, bencoding

SECRETS = {"site1": "secret-one", "site2": "secret-two", "site3": "secret-three"}


def query(info_hash: bytes, peer_id: bytes = b"-TT0001-000000000001", port: int = 6881, left: int = 1,
          downloaded: int = 0, **extra: Any) -> str:
    """An announce query as a client sends it: binary values percent-encoded, nothing else touched."""
    parts = [f"info_hash={quote_from_bytes(info_hash)}", f"peer_id={quote_from_bytes(peer_id)}", f"port={port}",
             "uploaded=0", f"downloaded={downloaded}", f"left={left}"]
    parts += [f"{k}={v}" for k, v in extra.items()]
    return "&".join(parts)


async def get_raw(client: TestClient, path_and_query: str) -> tuple[int, bytes]:
    url = yarl.URL(str(client.make_url("")).rstrip("/") + path_and_query, encoded=True)
    async with client.session.get(url) as resp:
        return resp.status, await resp.read()


async def announce(client: TestClient, q: str) -> dict:
    status, body = await get_raw(client, "/announce?" + q)
    assert status == 200
    return bencoding.decode(body)


async def heartbeat(client: TestClient, site: str, body: dict, *, secret: str | None = None,
                    signer: str | None = None, path_site: str | None = None,
                    headers: dict | None = None) -> int:
    path = f"/api/sites/{path_site or site}/heartbeat"
    raw = json.dumps(body).encode()
    signed = headers if headers is not None else auth.sign(secret or SECRETS[signer or site], signer or site,
                                                           "POST", path, raw)
    async with client.session.post(client.make_url(path), data=raw, headers=signed) as resp:
        return resp.status


def beat_body(site: str, control_url: str, peers: list[str], can_seed: list[bytes], *, seeding: list[bytes] = (),
              load: int = 0, capacity: int = 10, built: int | None = None) -> dict:
    return {"site": site, "control_url": control_url, "peers": peers, "can_seed": [h.hex() for h in can_seed],
            "seeding": [h.hex() for h in seeding], "load": load, "capacity": capacity,
            **({"built": built} if built is not None else {})}


