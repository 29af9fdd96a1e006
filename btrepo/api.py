"""JSON API handlers (docs/contracts.md, "bt-server → bt-repo" and "bt-repo read API").

Errors are raised as BtswarmError subclasses and become `{"error": ...}`
answers in torrents.servicekit.web.error_middleware, nowhere else.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Awaitable, Callable, Hashable, TypeVar
from urllib.parse import quote

from aiohttp import web

from torrents.servicekit import web as tweb
from torrents import did as dids
from torrents import metainfo, urls
from torrents.errors import BtswarmError, Conflict, NotFound
from torrents.infohash import parse_info_hash
from btrepo import catalog, keys, readers
from btrepo.cache import CatalogCache
from btrepo.db import Database, Detail

log = logging.getLogger("btswarm.repo.api")
T = TypeVar("T")

# A publish carries the whole .torrent in base64 (4/3 of its size); the
# metainfo reader refuses torrents over 64 MiB anyway.
MAX_PUBLISH_BODY = 64 * 1024 * 1024
_RESULT_BY_STATUS = {400: "invalid", 401: "unauthorized", 403: "forbidden", 409: "refused"}


async def publish(request: web.Request) -> web.Response:
    metrics = request.app[keys.METRICS]
    name = request.match_info["name"]
    try:
        site, body = await tweb.read_signed(request, request.app[keys.VERIFIER], MAX_PUBLISH_BODY)
        doc = tweb.parse_json_body(body, subject=f"publish {name}")
        # The site's kind is the configuration's word, never the body's (btrepo/rights.py).
        config = request.app[keys.CONFIG]
        kind = config.kind_of(site)
        # Parsing a large .torrent is CPU work: keep it off the event loop.
        pub = await asyncio.get_running_loop().run_in_executor(None, catalog.parse_publish, doc, name, site, kind)
        result = await request.app[keys.DB].publish(pub, config.curators)
    except BtswarmError as exc:
        status = tweb.status_for(exc)
        metrics.publishes.labels(result=_RESULT_BY_STATUS.get(status, "invalid")).inc()
        # A site doing what its role does not allow is the operators' business: said at WARNING.
        log.log(logging.WARNING if status == 403 else logging.INFO, "publish %s refused: %s", name, exc)
        raise
    db = request.app[keys.DB]
    metrics.publishes.labels(result=result.outcome.value).inc()
    metrics.datasets.set(await db.count())
    conflicting, disputed = await db.conflicts()
    metrics.in_conflict.set(conflicting)
    metrics.disputed.set(disputed)
    answer = result.to_json()
    if "problem" in answer:
        log.warning("publish %s %s from %s: %s (%s); %s", name, pub.info_hash, site, result.outcome.value,
                    answer["state"], answer["problem"])
    else:
        log.info("publish %s %s from %s: %s", name, pub.info_hash, site, result.outcome.value)
    return web.json_response(answer, status=result.outcome.status)


async def put_container(request: web.Request) -> web.Response:
    """A site's word of which datasets a Rucio container holds (docs/contracts.md)."""
    name = request.match_info["name"]
    site, body = await tweb.read_signed(request, request.app[keys.VERIFIER])
    config = request.app[keys.CONFIG]
    member = catalog.parse_container(tweb.parse_json_body(body, subject=f"container {name}"), name, site,
                                     config.kind_of(site))
    total = await request.app[keys.DB].set_container(member.site, config.kind_of(site), member.container,
                                                     member.datasets)
    log.info("container %s from %s: %d datasets (%d by every site)", member.container, site,
             len(member.datasets), total)
    return web.json_response({"container": member.container, "site": site, "datasets": len(member.datasets),
                              "total": total})


async def get_did(request: web.Request) -> web.Response:
    """What a Rucio DID names here: a dataset, a container (its datasets) or a file (the datasets holding it)."""
    name = request.match_info["name"]
    did = str(dids.parse_did(name))
    found = await request.app[keys.DB].did(did)
    if found is None:
        raise NotFound(did, "no such DID (no dataset, container or file of that name)")
    return web.json_response(found)


async def list_datasets(request: web.Request) -> web.Response:
    params = await readers.visible(request, catalog.parse_search(request.query))
    total, rows = await request.app[keys.DB].search(params)
    docs = [r.to_json() for r in rows]
    if request.query.get("swarm") in ("1", "true", "yes"):
        # Live seeds beside each row (bt-get --search): one tracker question per row, all at once,
        # each bounded by the tracker client's timeout; null where the tracker did not answer.
        tracker = request.app[keys.TRACKER]
        swarms = await asyncio.gather(*(tracker.swarm(r.info_hash) for r in rows))
        for doc, swarm in zip(docs, swarms):
            doc["swarm"] = swarm.to_json() if swarm else None
    return web.json_response({"total": total, "page": params.page, "per_page": params.per_page,
                              "sort": params.sort, "datasets": docs})


async def get_dataset(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    await readers.check_read(request, name)
    db, cache = request.app[keys.DB], request.app[keys.CACHE]
    gen = cache.fresh()
    kept = await _kept(cache, gen, ("record", name), lambda: _record(db, name), lambda v: len(v[1]))
    if kept is None:
        raise NotFound(name, "no such dataset")
    info_hash, static = kept
    swarm = await request.app[keys.TRACKER].swarm(info_hash)
    seeds = catalog.live_web_seeds(await _web_seeds(db, cache, gen, info_hash), swarm.holders if swarm else None)
    live = {"swarm": swarm.to_json() if swarm else None,
            "web_seeds": [{"site": site, "url": url} for site, url in seeds],
            "restricted": request.app[keys.ACCESS].is_restricted(name)}
    # The kept object with the live fields after the others: '{...}' + ', "swarm": ...}'.
    body = static[:-1] + b", " + json.dumps(live)[1:].encode()
    return web.Response(body=body, content_type="application/json")


def record_json(name: str, detail: Detail) -> dict:
    """A dataset's record as the catalog says it: all but the live `swarm` and `web_seeds`."""
    decision = detail.decision
    return {
        **detail.summary.to_json(),
        "files": [f.to_json() for f in detail.files],
        "versions": [v.to_json() for v in detail.versions],
        "torrent_url": torrent_path(name),
        "magnet": detail.magnet,
        "replica_sites": [v.to_json() for v in decision.sites],
        "decided_by": decision.decided_by.value,
        "pinned": detail.pinned,
        "servable": decision.servable,
        "left_out": {site: {"count": doc["count"], "entries": [{"path": p, "why": w} for p, w in doc["entries"]]}
                     for site, doc in detail.left_out.items()},
        "problem": None if detail.summary.replicas == "agree" else decision.summary(name),
        "history": [c.to_json() for c in detail.history],
    }


async def _record(db: Database, name: str) -> tuple[str, bytes] | None:
    """(the served info-hash, the record's JSON without its live fields), or None: no such dataset."""
    detail = await db.detail(name)
    if detail is None:
        return None
    return detail.summary.info_hash, json.dumps(record_json(name, detail)).encode()


async def get_torrent(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    await readers.check_read(request, name)
    info_hash = request.query.get("info_hash") or None
    if info_hash is not None:
        info_hash = parse_info_hash(info_hash, f"info_hash={info_hash[:60]}")
    db, cache = request.app[keys.DB], request.app[keys.CACHE]
    gen = cache.fresh()
    found = await _kept(cache, gen, ("torrent", name, info_hash), lambda: db.torrent(name, info_hash),
                        lambda v: len(v.data))
    if found is None:
        raise NotFound(name if not info_hash else f"{name} {info_hash}", "no such dataset or version")
    decision = found.decision
    if found.info_hash in decision.contradicted:
        raise Conflict(f"{name} {found.info_hash}", "this version's bytes contradict the catalog's checksums; "
                                                    "it is not served")
    if info_hash is None and not decision.servable:
        # By name alone only a version that is decided and held whole: a tie between
        # replicas must not hand anyone the bad one. A chosen info-hash is the user's call.
        raise Conflict(name, decision.summary(name).split(": ", 1)[1] + "; choose a version with ?info_hash=")
    web_seeds = request.query.get("web_seeds", "1")
    if web_seeds not in ("0", "1"):
        raise BtswarmError(f"web_seeds={web_seeds[:20]}", "must be 1 (list the sites' web seeds, the default) or 0")
    request.app[keys.METRICS].torrent_downloads.inc()
    data = found.data
    published = await _web_seeds(db, cache, gen, found.info_hash)
    if published:
        # web_seeds=0: for a client that would use them beside the swarm from the start (docs/clients.md).
        # Else the sites' web seeds, added now from who holds this version now (docs/webseeds.md), outside
        # the info dict: the info-hash is the same.
        seeds = []
        if web_seeds == "1":
            swarm = await request.app[keys.TRACKER].swarm(found.info_hash)
            seeds = [url for _, url in catalog.live_web_seeds(published, swarm.holders if swarm else None)]
        drop = [url for _, url in published]
        data = await _kept(cache, gen, ("served", found.info_hash, tuple(seeds)),
                           lambda: asyncio.get_running_loop().run_in_executor(
                               None, metainfo.with_url_list, found.data, seeds, drop), len)
    return web.Response(body=data, content_type="application/x-bittorrent",
                        headers={"Content-Disposition": content_disposition(f"{name}.torrent")})


async def _web_seeds(db: Database, cache: CatalogCache, gen: int, info_hash: str) -> list[tuple[str, str]]:
    return await _kept(cache, gen, ("web_seeds", info_hash), lambda: db.web_seeds(info_hash),
                       lambda v: 64 + sum(len(site) + len(url) for site, url in v))


async def _kept(cache: CatalogCache, gen: int, key: Hashable, make: Callable[[], Awaitable[T]],
                size: Callable[[T], int]) -> T:
    """What the cache keeps for `key`, else `make()`'s value, kept (None, for nothing found, is not)."""
    value = cache.get(key)
    if value is None:
        value = await make()
        if value is not None:
            cache.put(gen, key, value, size(value))
    return value  # type: ignore[return-value]


async def info_hashes(request: web.Request) -> web.Response:
    return web.json_response({"info_hashes": await request.app[keys.DB].info_hashes()})


async def sites(request: web.Request) -> web.Response:
    return web.json_response({"sites": [s.to_json() for s in await request.app[keys.DB].sites()]})


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


def torrent_path(name: str) -> str:
    return urls.dataset_torrent(name)


def content_disposition(filename: str) -> str:
    # A plain-ASCII fallback for old clients, the exact name (RFC 6266/5987) for the rest;
    # quotes, backslashes and control characters never reach the header.
    fallback = re.sub(r"[^A-Za-z0-9._+-]", "_", filename)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"
