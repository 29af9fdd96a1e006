"""Who reads what: members-only datasets (torrents/access.py) in the repository's answers.

A restricted dataset's record, .torrent and page go only to a request whose
`Authorization: Bearer` token may read it (401 without one, 403 for another
scope; RFC 6750), checked before the catalog is asked, so that a non-member
cannot even learn whether such a name exists. Listings, search and the pages
leave out what the reader may not read; everything else is as without [access].
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from typing import Iterator

from aiohttp import web

from torrents import access
from torrents.errors import TokenRefused
from btrepo import catalog, keys

log = logging.getLogger("btswarm.repo.readers")


@contextlib.contextmanager
def _counted(request: web.Request) -> Iterator[None]:
    """A refusal counted (btswarm_repo_token_refusals_total) and logged with the request, then raised on."""
    try:
        yield
    except TokenRefused as exc:
        request.app[keys.METRICS].token_refusals.labels(code=str(exc.status)).inc()
        log.info("%s %s: %s", request.method, request.path, exc)
        raise


async def check_read(request: web.Request, name: str) -> None:
    with _counted(request):
        await request.app[keys.ISSUERS].check_read(request.headers.get("Authorization"), name)


async def _read_paths(request: web.Request) -> tuple[str, ...]:
    with _counted(request):
        return await request.app[keys.ISSUERS].read_paths(request.headers.get("Authorization"))


async def visible(request: web.Request, params: catalog.SearchParams) -> catalog.SearchParams:
    """The search narrowed to what the request's token (if any) may see."""
    policy = request.app[keys.ACCESS]
    if not policy.restrictions:
        return params
    paths = await _read_paths(request)
    return dataclasses.replace(params, hidden=tuple(r.glob() for r in policy.restrictions),
                               granted=access.granted_globs(paths))


async def may_see(request: web.Request, names: dict[str, str]) -> dict[str, str]:
    """Of `names` (info-hash → dataset name), those the request may see."""
    policy = request.app[keys.ACCESS]
    if not policy.restrictions:
        return names
    paths = await _read_paths(request)
    return {h: n for h, n in names.items() if access.visible(policy, paths, n)}
