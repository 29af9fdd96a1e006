"""Who reads what: members-only datasets (torrents/access.py) in the repository's answers.

A restricted dataset's record, .torrent and page go only to a request whose
`Authorization: Bearer` token may read it (401 without one, 403 for another
scope; RFC 6750), checked before the catalog is asked, so that a non-member
cannot even learn whether such a name exists. Listings, search and the pages
leave out what the reader may not read; everything else is as without [access].
"""

from __future__ import annotations

import dataclasses

from aiohttp import web

from torrents import access
from btrepo import catalog, keys


async def check_read(request: web.Request, name: str) -> None:
    await request.app[keys.ISSUERS].check_read(request.headers.get("Authorization"), name)


async def visible(request: web.Request, params: catalog.SearchParams) -> catalog.SearchParams:
    """The search narrowed to what the request's token (if any) may see."""
    policy = request.app[keys.ACCESS]
    if not policy.restrictions:
        return params
    paths = await request.app[keys.ISSUERS].read_paths(request.headers.get("Authorization"))
    return dataclasses.replace(params, hidden=tuple(r.glob() for r in policy.restrictions),
                               granted=access.granted_globs(paths))


async def may_see(request: web.Request, names: dict[str, str]) -> dict[str, str]:
    """Of `names` (info-hash → dataset name), those the request may see."""
    policy = request.app[keys.ACCESS]
    if not policy.restrictions:
        return names
    paths = await request.app[keys.ISSUERS].read_paths(request.headers.get("Authorization"))
    return {h: n for h, n in names.items() if access.visible(policy, paths, n)}
