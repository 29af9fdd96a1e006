"""The swarms and sites over the last day: the tracker's sampled into the catalog, for the dataset and site pages.

Every `[repo] swarm_sample_interval` (default 5 min; 0: never) one
`GET /api/swarms` and one `GET /api/sites` of the tracker; each listed
swarm of a version in the catalog is kept with its time and the bytes of it
each site says it sent, each site of the catalog with the bytes it sent in
all, and samples older than a day go; the pages draw them
(btrepo/swarmchart.py). A tracker that does not answer is asked again at
the next round.
Each round is one catalog commit, which also renews the repository's
cache (btrepo/cache.py): once per interval, not per request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import AsyncIterator

from aiohttp import web

from btrepo import keys

log = logging.getLogger("btswarm.repo.swarmlog")

KEEP = 24 * 3600.0  # seconds of history kept and drawn


async def sample_once(app: web.Application, now: float | None = None) -> int | None:
    """One round: the tracker's swarms and sites into the catalog; how many swarms were kept (None: no answer)."""
    tracker = app[keys.TRACKER]
    swarms, sites = await asyncio.gather(tracker.swarms(), tracker.sites())
    if swarms is None and sites is None:
        return None
    at = time.time() if now is None else now
    rows = [(h, s.seeds, s.leechers, s.completed, dict(s.uploaded_by_site)) for h, s in swarms or ()]
    return await app[keys.DB].record_swarms(at, rows, at - KEEP, [(s.name, s.uploaded) for s in sites or ()])


async def sampler(app: web.Application) -> AsyncIterator[None]:
    """cleanup_ctx: sample at the configured interval until the app stops."""
    every = app[keys.CONFIG].swarm_sample_interval
    task = asyncio.create_task(_forever(app, every)) if every > 0 else None
    yield
    if task is not None:
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass


async def _forever(app: web.Application, every: float) -> None:
    while True:
        try:
            await sample_once(app)
        except Exception:  # a full disk, a locked catalog: the next round tries again
            log.exception("sampling the tracker's swarms failed")
        await asyncio.sleep(every)
