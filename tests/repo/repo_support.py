"""Support for the bt-repo tests: real torrents, signed publishes, a tracker stand-in.

Not a conftest (tests/conftest.py owns that module name); test modules import from here.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import sqlite3
import threading
import urllib.error
import urllib.parse
import urllib.request
import zlib
from pathlib import Path
from typing import Any, Iterator, Mapping

import aiohttp
from aiohttp import web

from btrepo import schema
from tests.support import Proc, command, free_port, http_ok, wait_for
from torrents import auth, bencoding, metainfo
from torrents.servicekit import web as tweb
from torrents.build import build_dataset, build_torrent

SECRETS = {"site1": "secret-one", "site2": "secret-two", "site3": "secret-three"}
SAMPLE = "data08_cos.00091949.physics_IDCosmic.merge.DPD_IDCOMM.o4_r653_p26_tid051203"


def content(name: str, lfn: str, size: int) -> bytes:
    """Deterministic bytes for a file, so a rebuild gives the same info-hash."""
    seed = hashlib.sha256(f"{name}/{lfn}".encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def make_torrent(root: Path, name: str, files: Mapping[str, int], *,
                 announce: str = "http://127.0.0.1:6969/announce") -> tuple[bytes, metainfo.Metainfo, list[dict]]:
    """Write `files` (LFN → size) under root/name, hash them → (.torrent bytes, Metainfo, record files)."""
    base = root / hashlib.sha1(name.encode()).hexdigest()[:12]  # the name may be hostile: not a path
    entries, record = [], []
    for lfn, size in sorted(files.items()):
        path = base / lfn
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content(name, lfn, size)
        path.write_bytes(data)
        entries.append((lfn, str(path)))
        record.append({"lfn": lfn, "size": size, "adler32": f"{zlib.adler32(data):08x}"})
    data, meta = build_torrent(name, entries, announce=announce)
    return data, meta, record


def make_replica(root: Path, name: str, files: Mapping[str, int], *, flipped: set[str] = frozenset(),
                 catalog: bool = False) -> tuple[bytes, metainfo.Metainfo, list[dict]]:
    """One site's replica of `files` as bt-server would publish it: each file's xxh3 as hashed, and
    the catalog's adler32 when the site has a catalog (of the true bytes, which a site checks
    before publishing); `flipped` files have one byte flipped in the middle (bit rot)."""
    base = root / hashlib.sha1(name.encode()).hexdigest()[:12]
    entries, truth = [], {}
    for lfn, size in sorted(files.items()):
        path = base / lfn
        path.parent.mkdir(parents=True, exist_ok=True)
        data = bytearray(content(name, lfn, size))
        truth[lfn] = f"{zlib.adler32(data):08x}"
        if lfn in flipped:
            data[size // 2] ^= 0x01
        path.write_bytes(bytes(data))
        entries.append((lfn, str(path)))
    built = build_dataset(name, entries, announce="http://127.0.0.1:6969/announce", adler32=True)
    record = [{"lfn": lfn, "size": s.size, "adler32": truth[lfn] if catalog else None, "xxh3": s.xxh3}
              for lfn, s in sorted(built.sums.items())]
    return built.torrent, built.meta, record


def publish_body(torrent: bytes, meta: metainfo.Metainfo, files: list[dict], *, site: str = "site1",
                 description: str = "", **record_changes: Any) -> dict:
    record = {"name": meta.name, "info_hash": meta.info_hash, "description": description,
              "total_size": meta.total_size, "files": files, **record_changes}
    return {"site": site, "torrent": base64.b64encode(torrent).decode(), "record": record}


def hostile_torrent(name: str = "evil") -> bytes:
    """A well-formed .torrent whose file path climbs out of the download directory."""
    info = {b"name": name.encode(), b"piece length": 16384, b"pieces": b"\x00" * 20,
            b"files": [{b"length": 10, b"path": [b"..", b"..", b"etc", b"passwd"]}]}
    return bencoding.encode({b"announce": b"http://127.0.0.1:6969/announce", b"info": info})


async def publish(session: aiohttp.ClientSession, base_url: str, name: str, body: Any, *,
                  site: str = "site1", secret: str | None = None) -> tuple[int, Any]:
    """A signed PUT, as bt-server sends it (torrents.servicekit.web.signed_request)."""
    return await tweb.signed_request(session, "PUT", f"{base_url.rstrip('/')}/api/datasets/{name}", site=site,
                                     secret=secret or SECRETS[site], payload=body)


def publish_sync(base_url: str, name: str, body: Any, *, site: str = "site1") -> tuple[int, Any]:
    """The same signed PUT from synchronous code (browser tests)."""
    data = json.dumps(body).encode()
    path = "/api/datasets/" + urllib.parse.quote(name, safe="")  # signed as sent: percent-encoded
    headers = {**auth.sign(SECRETS[site], site, "PUT", path, data), "Content-Type": "application/json"}
    url = base_url.rstrip("/") + path
    req = urllib.request.Request(url, data=data, headers=headers, method="PUT")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def catalog_before(path: Path, marker: str) -> sqlite3.Connection:
    """A catalog at `path` whose schema stops before the first migration containing `marker`, as an
    older bt-repo left it."""
    conn = schema.connect(str(path))
    upto = next(i for i, m in enumerate(schema.MIGRATIONS) if marker in m)
    for version, script in enumerate(schema.MIGRATIONS[:upto]):
        for statement in schema._statements(script):
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version + 1}")
    return conn


def tracker_app(swarms: Mapping[str, dict], sites: list[dict] | None = None) -> web.Application:
    """A tracker stand-in serving GET /api/swarms/{hex} and GET /api/swarms as docs/contracts.md fixes them,
    and GET /api/sites when given `sites`."""

    async def swarm(request: web.Request) -> web.Response:
        h = request.match_info["hex"]
        if h not in swarms:
            return web.json_response({"error": f"{h}: no such swarm"}, status=404)
        return web.json_response({"info_hash": h, **swarms[h]})

    async def listed(request: web.Request) -> web.Response:
        return web.json_response({"swarms": [{"info_hash": h, **doc} for h, doc in swarms.items()]})

    async def listed_sites(request: web.Request) -> web.Response:
        return web.json_response({"sites": sites})

    app = web.Application()
    app.router.add_get("/api/swarms/{hex}", swarm)
    app.router.add_get("/api/swarms", listed)
    if sites is not None:
        app.router.add_get("/api/sites", listed_sites)
    return app


class ThreadedServer:
    """A real aiohttp app on 127.0.0.1, port 0, in a thread with its own loop (for synchronous tests)."""

    def __init__(self, app: web.Application) -> None:
        self.app = app
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="tracker-stand-in", daemon=True)
        self._runner: web.AppRunner | None = None

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self._runner = web.AppRunner(self.app)
        self.loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self._runner.cleanup())
        self.loop.close()

    def __enter__(self) -> "ThreadedServer":
        self._thread.start()
        if not self._ready.wait(10):
            raise AssertionError("tracker stand-in did not start within 10 s")
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def sized_torrent(name: str, files: Mapping[str, int], *,
                  announce: str = "http://127.0.0.1:6969/announce") -> tuple[bytes, metainfo.Metainfo, list[dict]]:
    """A .torrent for files of realistic sizes without writing them: the layout and piece count
    are real, the piece hashes are placeholders (nothing downloads from it in these tests)."""
    ordered = sorted(files.items())
    total = sum(files.values())
    plen = metainfo.piece_length_for(total)
    pieces = b"\x5a" * 20 * metainfo.piece_count(total, plen)
    data = metainfo.dump(metainfo.info_dict(name, ordered, plen, pieces), announce)
    record = [{"lfn": lfn, "size": size, "adler32": f"{zlib.adler32(lfn.encode()):08x}"} for lfn, size in ordered]
    return data, metainfo.parse(data), record


@contextlib.contextmanager
def repo_process(tmp: Path, tracker_url: str, *args: str) -> Iterator[tuple[str, Proc]]:
    """A real `bt-repo run [ARGS]` (state and log under `tmp`, SECRETS, the tracker at `tracker_url`),
    answering /healthz; yields its base URL and process; stopped at the end, which must exit 0."""
    cfg = tmp / "btswarm.toml"
    secrets = ", ".join(f'{k} = "{v}"' for k, v in SECRETS.items())
    cfg.write_text(f'[repo]\ntracker = "{tracker_url}"\nsite_secrets = {{ {secrets} }}\n')
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = Proc([command("bt-repo"), "run", "--config", str(cfg), "--listen", f"127.0.0.1:{port}",
                 "--state", str(tmp / "state"), *args], tmp / "bt-repo.log")
    try:
        wait_for(lambda: http_ok(f"{url}/healthz"), timeout=20, what="bt-repo /healthz")
        yield url, proc
    finally:
        code = proc.stop()
    assert code == 0, proc.log()
