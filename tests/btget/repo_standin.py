"""A stand-in for bt-repo's read API (docs/contracts.md), served from files, for bt-get tests.

DIR holds NAME.json (the dataset record: SUMMARY + files) and NAME.torrent
for each dataset. Only the routes bt-get uses: search, record, .torrent.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

DIR = web.AppKey("dir", Path)


async def search(request: web.Request) -> web.Response:
    q = request.query.get("q", "").lower()
    names = sorted(p.stem for p in request.app[DIR].glob("*.json"))
    hits = [n for n in names if q in n.lower()]
    return web.json_response({"total": len(hits), "page": 1, "per_page": 50,
                              "datasets": [{"name": n} for n in hits]})


async def record(request: web.Request) -> web.Response:
    path = request.app[DIR] / f"{request.match_info['name']}.json"
    if not path.is_file():
        return web.json_response({"error": f"{request.match_info['name']}: no such dataset"}, status=404)
    return web.Response(body=path.read_bytes(), content_type="application/json")


async def torrent(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    path = request.app[DIR] / f"{name}.torrent"
    if not path.is_file():
        return web.json_response({"error": f"{name}: no such dataset"}, status=404)
    return web.Response(body=path.read_bytes(), content_type="application/x-bittorrent",
                        headers={"Content-Disposition": f'attachment; filename="{name}.torrent"'})


def create_app(directory: Path) -> web.Application:
    app = web.Application()
    app[DIR] = directory
    app.router.add_get("/api/datasets", search)
    app.router.add_get("/api/datasets/{name}", record)
    app.router.add_get("/datasets/{name}.torrent", torrent)
    return app
