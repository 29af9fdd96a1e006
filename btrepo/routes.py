"""URL map of the repository: pages, the JSON API, downloads, and service endpoints."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from btrepo import api, peercerts, views

STATIC = Path(__file__).parent / "static"
# Dataset names may hold any character but '/', braces included.
NAME = "{name:[^/]+}"


def setup_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/", views.home, name="home")
    r.add_get("/search", views.search, name="search")
    r.add_get("/sites", views.sites, name="sites")
    r.add_get(f"/sites/{NAME}", views.site, name="site")
    # The .torrent route comes first: /datasets/X.torrent is the download, not a page for "X.torrent".
    r.add_get(f"/datasets/{NAME}.torrent", api.get_torrent, name="torrent")
    r.add_get(f"/datasets/{NAME}", views.dataset, name="dataset")
    r.add_static("/static/", STATIC, name="static", append_version=False)

    r.add_get("/api/datasets", api.list_datasets)
    r.add_get(f"/api/datasets/{NAME}", api.get_dataset)
    r.add_put(f"/api/datasets/{NAME}", api.publish)
    r.add_put(f"/api/containers/{NAME}", api.put_container)
    r.add_get(f"/api/dids/{NAME}", api.get_did)
    r.add_get("/api/info-hashes", api.info_hashes)
    r.add_get("/api/sites", api.sites)
    r.add_post("/api/peer-certificate", peercerts.issue)
    r.add_get("/healthz", api.healthz)
