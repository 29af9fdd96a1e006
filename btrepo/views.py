"""HTML pages: home, search, dataset, sites, a site, and the error pages.

Server-rendered with Jinja2, autoescape on: every dataset name, file name
and description is text, never markup. The only script is the copy button's,
inline and allowed by hash in the Content-Security-Policy, so even a markup
bug could not run injected script. Pages work without JavaScript.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import shlex
import time
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import urlencode

import jinja2
from aiohttp import web
from markupsafe import Markup

from torrents import units, urls
from torrents.errors import BtswarmError, TokenRefused
from torrents.servicekit import web as tweb

from btrepo import api, catalog, identity, keys, readers, swarmchart, swarmlog

log = logging.getLogger("btswarm.repo.views")

_HERE = Path(__file__).parent
COPY_JS = (_HERE / "templates" / "copy.js").read_text(encoding="utf-8")
_COPY_JS_HASH = base64.b64encode(hashlib.sha256(COPY_JS.encode()).digest()).decode()
CSP = ("default-src 'none'; style-src 'self'; img-src 'self' data:; "
       f"script-src 'sha256-{_COPY_JS_HASH}'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
PAGE_SIZE = 25
RECENT = 10
SORT_LABELS = {"relevance": "relevance", "name": "name", "size": "size", "date": "date"}


def _when(stamp: str | None) -> str:
    """'2024-05-01T12:03:04.123Z' → '2024-05-01 12:03 UTC'."""
    return f"{stamp[:10]} {stamp[11:16]} UTC" if stamp else "—"


def _urlname(name: str) -> str:
    return urls.quoted(name)


ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(_HERE / "templates"),
    autoescape=True,  # everything, whatever the template's extension
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
ENV.filters.update(human_size=units.human_size, when=_when, urlname=_urlname)
ENV.globals.update(copy_js=Markup(COPY_JS))


def render(template: str, context: dict[str, Any], *, status: int = 200) -> web.Response:
    html = ENV.get_template(template).render(**context)
    return web.Response(text=html, status=status, content_type="text/html", charset="utf-8",
                        headers={"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                                 "Referrer-Policy": "same-origin"})


def base_url(request: web.Request) -> str:
    """As users reach us: the configured public URL, else this request's own scheme and host."""
    configured = request.app[keys.CONFIG].public_url.rstrip("/")
    return configured or f"{request.scheme}://{request.host}"


def bt_get_command(name: str, repo_url: str) -> str:
    # shlex.quote leaves ordinary dataset names as they are and makes odd ones safe to paste.
    return f"bt-get {shlex.quote(name)} --repo {shlex.quote(repo_url)}"


async def home(request: web.Request) -> web.Response:
    db = request.app[keys.DB]
    total, recent = await db.search(await readers.visible(request, catalog.SearchParams(per_page=RECENT,
                                                                                         sort="date")))
    return render("home.html", {"q": "", "recent": recent, "total": total, "nav": "home"})


async def search(request: web.Request) -> web.Response:
    params = await readers.visible(request, catalog.parse_search(request.query, default_per_page=PAGE_SIZE))
    total, rows = await request.app[keys.DB].search(params)

    def link(**changes: Any) -> str:
        values = {"q": params.q, "site": params.site, "scope": params.scope, "sort": params.sort, "page": params.page,
                  "per_page": params.per_page, **changes}
        if values["page"] == 1:
            del values["page"]
        if values["per_page"] == PAGE_SIZE:
            del values["per_page"]
        return "/search?" + urlencode({k: v for k, v in values.items() if v != ""})

    sorts = [s for s in catalog.SORTS if s != "relevance" or catalog.fts_query(params.q)]
    return render("search.html", {"q": params.q, "params": params, "rows": rows, "total": total,
                                  "pages": params.pages(total), "link": link, "sorts": sorts, "nav": "search"})


async def dataset(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    await readers.check_read(request, name)
    detail = await request.app[keys.DB].detail(name)
    if detail is None:
        raise web.HTTPNotFound(reason=f"{name}: no such dataset")
    db, info_hash = request.app[keys.DB], detail.summary.info_hash
    swarm = await request.app[keys.TRACKER].swarm(info_hash)
    now = time.time()
    picture = swarmchart.render(await db.swarm_history(info_hash, now - swarmlog.KEEP), now, name)
    served = swarmchart.render_bytes_served(await db.served_history(info_hash, now - swarmlog.KEEP),
                                            detail.summary.total_size, now, name)
    repo_url = base_url(request)
    decision = detail.decision
    disagree = [v for v in decision.sites if v.state is not identity.SiteState.CURRENT]
    return render("dataset.html", {
        "q": "", "d": detail.summary, "files": detail.files, "versions": detail.versions,
        "older": [v for v in detail.versions if v.info_hash != detail.summary.info_hash],
        "magnet": detail.magnet, "piece_length": detail.piece_length,
        "swarm": swarm, "swarm_svg": Markup(picture) if picture else None,
        "served_svg": Markup(served) if served else None,
        "torrent_url": api.torrent_path(name), "command": bt_get_command(name, repo_url),
        "decision": decision, "disagree": disagree, "problem": decision.summary(name) if disagree or
        not decision.servable else None, "pinned": detail.pinned, "left_out": detail.left_out, "nav": "search",
        "history": detail.history,
    })


async def sites(request: web.Request) -> web.Response:
    rows = await request.app[keys.DB].sites()
    return render("sites.html", {"q": "", "sites": rows, "nav": "sites"})


async def site(request: web.Request) -> web.Response:
    """A site of the catalog: its tier, datasets, egress over the last day, and what it seeds now (the
    tracker's word: unknown when the tracker does not answer)."""
    name = request.match_info["name"]
    db = request.app[keys.DB]
    row = await db.site(name)
    if row is None:
        raise web.HTTPNotFound(reason=f"{name}: no such site")
    now = time.time()
    egress = swarmchart.render_egress(await db.site_history(name, now - swarmlog.KEEP), now, name)
    listed = await request.app[keys.TRACKER].sites()
    heard = next((s for s in listed or () if s.name == name), None)
    seeding = None  # unknown: the tracker did not answer
    if listed is not None:
        hashes = list(heard.seeding) if heard else []
        names = await readers.may_see(request, await db.dataset_names(hashes))
        # (dataset name or None, info-hash): the catalog's datasets by name, then hashes it does not know
        seeding = sorted(((names.get(h), h) for h in hashes), key=lambda pair: (pair[0] is None, pair[0] or pair[1]))
    return render("site.html", {"q": "", "site": row, "egress_svg": Markup(egress) if egress else None,
                                "heard": heard, "seeding": seeding, "nav": "sites"})


def _is_page(request: web.Request) -> bool:
    path = request.path
    return not (path.startswith("/api/") or path in ("/metrics", "/healthz"))


_TITLES = {400: "Bad request", 401: "Members only", 403: "Members only", 404: "Not found", 405: "Method not allowed",
           413: "Too large", 414: "Address too long"}


@web.middleware
async def page_errors(request: web.Request,
                      handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    """Errors on pages become HTML error pages; /api errors pass on to torrents.servicekit.web.error_middleware."""
    if not _is_page(request):
        return await handler(request)
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        message = exc.reason if exc.status != 404 or ":" in exc.reason else f"{request.path}: no such page"
        return render("error.html", {"q": "", "status": exc.status, "title": _TITLES.get(exc.status, exc.reason),
                                     "message": message, "nav": ""}, status=exc.status)
    except BtswarmError as exc:
        status = tweb.status_for(exc)
        page = render("error.html", {"q": "", "status": status, "title": _TITLES.get(status, "Error"),
                                     "message": str(exc), "nav": ""}, status=status)
        return tweb.challenge(page, exc) if isinstance(exc, TokenRefused) else page
    except Exception:
        log.exception("%s %s: internal error", request.method, request.path)
        return render("error.html", {"q": "", "status": 500, "title": "Internal error",
                                     "message": "the repository failed to answer; the log has details",
                                     "nav": ""}, status=500)
