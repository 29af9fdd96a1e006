"""The bt-repo application factory."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import AsyncIterator

from aiohttp import web

from torrents import access as access_policy, auth
from torrents.access import AccessConfig
from torrents.servicekit.issuers import Issuers
from torrents.servicekit import tls
from torrents.servicekit import web as tweb
from btrepo.config import RepoConfig
from btrepo import keys, peercerts
from btrepo.api import MAX_PUBLISH_BODY
from btrepo.cache import CatalogCache
from btrepo.db import Database
from btrepo.metrics import Metrics
from btrepo.routes import setup_routes
from btrepo.swarmlog import sampler
from btrepo.tracker_client import SwarmSource, TrackerClient
from btrepo.views import page_errors

DB_FILE = "repo.sqlite3"


def open_catalog(config: RepoConfig) -> Database:
    """The catalog under config.state, its schema migrated and the configured site kinds applied."""
    kinds = {site: config.kind_of(site) for site in config.site_secrets}
    return Database(Path(config.state) / DB_FILE, kinds=kinds)


def create_app(config: RepoConfig, *, db: Database | None = None, tracker_client: SwarmSource | None = None,
               access: AccessConfig = access_policy.NONE) -> web.Application:
    """Build the repository app. A `db` or `tracker_client` passed in stays the caller's to close;
    the ones built here (SQLite under config.state, the tracker at config.tracker) are closed on cleanup.
    `access`: the [access] section (members-only datasets, docs/deploy-site.md); none restricted by default."""
    # torrents.servicekit.web.error_middleware turns errors into JSON for /api; page_errors,
    # inside it, answers pages with HTML first.
    app = web.Application(middlewares=[tweb.error_middleware, page_errors, tweb.url_limit], client_max_size=MAX_PUBLISH_BODY)
    app[keys.CONFIG] = config
    app[keys.VERIFIER] = auth.Verifier(config.site_secrets)
    app[keys.ACCESS] = access
    peer_ca = peercerts.load_peer_ca(config.peer_ca, config.peer_ca_key)
    if peer_ca is not None:
        app[peercerts.PEER_CA] = peer_ca
    metrics = Metrics()
    app[keys.METRICS] = metrics
    tweb.add_metrics_route(app, metrics.registry)
    setup_routes(app)

    async def database(app: web.Application) -> AsyncIterator[None]:
        owned = db is None
        if owned:
            # Opening migrates the schema: file work, so not on the loop.
            app[keys.DB] = await asyncio.get_running_loop().run_in_executor(None, open_catalog, config)
        else:
            app[keys.DB] = db
        app[keys.CACHE] = CatalogCache(app[keys.DB].generation)
        metrics.datasets.set(await app[keys.DB].count())
        yield
        if owned:
            await asyncio.get_running_loop().run_in_executor(None, app[keys.DB].close)

    async def tracker(app: web.Application) -> AsyncIterator[None]:
        client = tracker_client or TrackerClient(config.tracker, ca=tls.ca_file(config.ca_file))
        app[keys.TRACKER] = client
        yield
        if tracker_client is None:
            await client.close()  # type: ignore[attr-defined]

    async def issuers(app: web.Application) -> AsyncIterator[None]:
        app[keys.ISSUERS] = Issuers(access)
        yield
        await app[keys.ISSUERS].close()

    app.cleanup_ctx.extend([database, tracker, issuers, sampler])
    return app
