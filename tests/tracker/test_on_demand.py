"""A real libtorrent client announces a hash nobody seeds; the tracker starts a seed at a stand-in site
(a real aiohttp app driving a real libtorrent seeding session), and the client's first answer has it."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import libtorrent as lt
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from torrents import auth, sample
from torrents.servicekit import ltsession
from torrents.build import build_torrent
from tracker.config import TrackerConfig

from tests.tracker.helpers import SECRETS, beat_body, heartbeat

CLIENT = Path(__file__).with_name("lt_client.py")
SITE_IP, CLIENT_IP = "127.0.0.2", "127.0.0.3"


class SeedingSite:
    """POST /api/seeds: add the torrent to a libtorrent session in seed mode, answer its endpoint."""

    def __init__(self, torrents: dict[str, tuple[bytes, Path]]) -> None:
        self.torrents = torrents  # hex → (.torrent bytes, save path)
        self.posts: list[str] = []
        self.session = ltsession.session(SITE_IP, seeding=True)
        self.verifier = auth.Verifier({"site1": SECRETS["site1"]})
        app = web.Application()
        app.router.add_post("/api/seeds", self.seeds)
        self.server = TestServer(app, host=SITE_IP, port=0)

    def _add(self, data: bytes, save: Path) -> None:
        params = lt.add_torrent_params()
        params.ti = lt.torrent_info(lt.bdecode(data))
        params.save_path = str(save)
        params.flags |= lt.torrent_flags.seed_mode
        self.session.add_torrent(params)

    async def seeds(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.verifier.verify(request.method, request.path_qs, request.headers, body)
        info_hash = json.loads(body)["info_hash"]
        self.posts.append(info_hash)
        if info_hash not in self.torrents:
            return web.json_response({"error": f"{info_hash}: unknown"}, status=404)
        await asyncio.get_running_loop().run_in_executor(None, self._add, *self.torrents[info_hash])
        return web.json_response({"state": "seeding", "info_hash": info_hash,
                                  "peers": [f"{SITE_IP}:{self.session.listen_port()}"]})


@pytest.mark.slow
async def test_client_first_answer_has_the_started_seed_and_download_completes(make_client, procs, tmp_path):
    data_dir = sample.generate(tmp_path / "site", name="ds", files=3, total_size=3 * 2**20)
    tracker = await make_client(TrackerConfig(site_secrets=SECRETS, start_wait=3.0))
    announce_url = str(tracker.make_url("/announce"))
    torrent, meta = build_torrent("ds", [(p.name, p) for p in sorted(data_dir.iterdir())], announce=announce_url)
    (tmp_path / "ds.torrent").write_bytes(torrent)

    site = SeedingSite({meta.info_hash: (torrent, tmp_path / "site")})
    await site.server.start_server()
    try:
        body = beat_body("site1", f"http://{SITE_IP}:{site.server.port}", [f"{SITE_IP}:{site.session.listen_port()}"],
                         [bytes.fromhex(meta.info_hash)])
        assert await heartbeat(tracker, "site1", body) == 200
        out = tmp_path / "client"
        client = procs.start("lt-client", [sys.executable, str(CLIENT), str(tmp_path / "ds.torrent"), str(out),
                                           CLIENT_IP, "40"])
        rc = await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(None, client.popen.wait), 60)
        events = [json.loads(line) for line in client.log().splitlines() if line.startswith("{")]
        assert rc == 0, client.log()
        assert events[0] == {"event": "tracker_reply", "num_peers": 1}, events
        assert events[-1]["event"] == "finished"
        assert site.posts == [meta.info_hash]
        for f in sorted(data_dir.iterdir()):
            assert (out / "ds" / f.name).read_bytes() == f.read_bytes()
    finally:
        await site.server.close()
        del site.session
