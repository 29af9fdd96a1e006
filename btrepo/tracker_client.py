"""Live swarm and site state from the tracker, for the dataset and site pages and the samples of the day.

The tracker is another process that may be down, slow or not yet started;
a dataset page must still render. So every failure (refused, timeout,
5xx, a body that is not a swarm) is None, shown as "unknown", never a 500.
A 404 is an answer: the tracker knows no swarm for that info-hash yet.

Questions about one swarm asked while one is on its way share its answer
(never an older one): a batch start's 1,000 requests for a record and a
.torrent need a few tracker round trips, not 2,000.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from torrents.servicekit import tls
from torrents.servicekit.web import client_session

log = logging.getLogger("btswarm.repo.tracker")

DEFAULT_TIMEOUT = 1.5


@dataclass(frozen=True)
class Swarm:
    seeds: int
    leechers: int
    completed: int
    sites: tuple[str, ...]  # sites seeding it now
    holders: tuple[str, ...] | None = None  # sites up and holding it; None: the tracker does not say
    site_uploaded: int = 0  # bytes of it all sites say they sent (each counting since its daemon started)
    uploaded_by_site: tuple[tuple[str, int], ...] = ()  # (site, its count): the sites holding it or that sent some

    def to_json(self) -> dict:
        return {"seeds": self.seeds, "leechers": self.leechers, "completed": self.completed,
                "sites": list(self.sites)}


@dataclass(frozen=True)
class TrackerSite:
    """A site as the tracker's GET /api/sites lists it."""

    name: str
    up: bool
    seeding: tuple[str, ...]  # info-hashes it seeds now
    uploaded: int  # bytes it says it sent, of every dataset, since its daemon started


EMPTY = Swarm(0, 0, 0, (), ())  # the tracker knows no swarm: no site holds it


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def swarm_from_json(doc: Any) -> Swarm | None:
    """A tracker SWARM document (docs/contracts.md) → Swarm; None when it is not one. The sites' bytes are
    optional (an older tracker): none said is 0, and a malformed entry is left out."""
    if not isinstance(doc, dict):
        return None
    counts = [doc.get(k) for k in ("seeds", "leechers", "completed")]
    if not all(_is_count(c) for c in counts):
        return None
    sites = doc.get("sites") or []
    holders = doc.get("holders")
    if not isinstance(sites, list) or not isinstance(holders, (list, type(None))):
        return None
    by_site = doc.get("uploaded_by_site")
    uploaded = doc.get("site_uploaded")
    return Swarm(counts[0], counts[1], counts[2], tuple(sorted(str(s) for s in sites)),
                 None if holders is None else tuple(sorted(str(s) for s in holders)),
                 site_uploaded=uploaded if _is_count(uploaded) else 0,
                 uploaded_by_site=tuple(sorted((str(site), n) for site, n in by_site.items() if _is_count(n)))
                 if isinstance(by_site, dict) else ())


def site_from_json(doc: Any) -> TrackerSite | None:
    """A site of the tracker's /api/sites (docs/contracts.md) → TrackerSite; None when it is not one."""
    if not isinstance(doc, dict) or not isinstance(doc.get("name"), str) or not isinstance(doc.get("seeding"), list):
        return None
    uploaded = doc.get("uploaded")
    return TrackerSite(doc["name"], doc.get("up") is True, tuple(str(h).lower() for h in doc["seeding"]),
                       uploaded if _is_count(uploaded) else 0)


class SwarmSource(Protocol):
    async def swarm(self, info_hash: str) -> Swarm | None: ...

    async def swarms(self) -> list[tuple[str, Swarm]] | None: ...

    async def sites(self) -> list[TrackerSite] | None: ...


class TrackerClient:
    """GET {tracker}/api/swarms/{hex} with a short timeout; owns its HTTP session."""

    def __init__(self, base_url: str, *, timeout: float = DEFAULT_TIMEOUT, ca: str = "") -> None:
        self.base_url = base_url.rstrip("/")
        self.ca = ca  # an https tracker is verified against the system's CAs and this bundle
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._asking: dict[str, asyncio.Future[Swarm | None]] = {}

    async def swarm(self, info_hash: str) -> Swarm | None:
        if not self.base_url:
            return None
        asking = self._asking.get(info_hash)
        if asking is None:
            asking = asyncio.ensure_future(self._ask(info_hash))
            self._asking[info_hash] = asking
            asking.add_done_callback(lambda _: self._asking.pop(info_hash, None))
        # Shielded: one caller going away (its client hung up) must not cancel the others' answer.
        return await asyncio.shield(asking)

    async def _ask(self, info_hash: str) -> Swarm | None:
        got = await self._get(f"/api/swarms/{info_hash}", info_hash)
        if got is None:
            return None
        return EMPTY if got[0] == 404 else swarm_from_json(got[1])

    async def swarms(self) -> list[tuple[str, Swarm]] | None:
        """Every swarm the tracker lists (GET /api/swarms), as (info-hash, Swarm); None when it did not answer."""
        got = await self._get("/api/swarms", "its swarms") if self.base_url else None
        listed = got[1].get("swarms") if got is not None and isinstance(got[1], dict) else None
        if not isinstance(listed, list):
            return None
        out = []
        for item in listed:
            swarm = swarm_from_json(item)
            h = item.get("info_hash") if isinstance(item, dict) else None
            if swarm is not None and isinstance(h, str):
                out.append((h.lower(), swarm))
        return out

    async def sites(self) -> list[TrackerSite] | None:
        """Every site the tracker knows (GET /api/sites); None when it did not answer."""
        got = await self._get("/api/sites", "its sites") if self.base_url else None
        listed = got[1].get("sites") if got is not None and isinstance(got[1], dict) else None
        if not isinstance(listed, list):
            return None
        return [site for site in map(site_from_json, listed) if site is not None]

    async def _get(self, path: str, what: str) -> tuple[int, Any] | None:
        """(status, the JSON body; None but for a 200) of GET {tracker}{path}; None when it failed."""
        if self._session is None:
            self._session = client_session(self.ca, timeout=self.timeout)
        try:
            async with self._session.get(self.base_url + path) as resp:
                if resp.status == 200:
                    return 200, await resp.json(content_type=None)
                if resp.status != 404:
                    log.info("tracker %s: HTTP %d for %s", self.base_url, resp.status, what)
                return resp.status, None
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            log.info("tracker %s: unreachable for %s (%s)", self.base_url, what,
                     tls.certificate_problem(exc, tls.hint("repo")) or exc.__class__.__name__)
            return None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
