"""The site's datasets from Rucio: one refresh (`fetch`) and the daemon's loop (`RucioSync`).

A refresh resolves the configured DIDs and DID patterns (a container named
stands for its datasets), reads each dataset's content and its replicas at
the site's RSE, and the datasets of every container named or matched
(published to the repository apart from the datasets: PUT
/api/containers/DID), and hands the
resulting Catalog (datasets ready to serve, problems of the others) to the
inventory, which prepares it like any other: farms, torrents (hashed only
when the fingerprint changed), publishing. The last good Catalog is kept
in STATE/rucio-snapshot.json.

When Rucio is out of reach or refuses the credentials, the refresh fails
as a whole: the previous Catalog stays (what was seeding keeps seeding),
the error is logged and shown in /api/status, and the next attempt backs
off (retry_min, doubling, up to the refresh interval).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable

import aiohttp

from torrents.dataset import Dataset
from torrents.did import DID, DIDPattern, parse_did, parse_pattern
from torrents.errors import BtswarmError

from btserver import rucio_map
from btserver.holdings import Catalog, Problem
from btserver.config import RucioConfig
from btserver.metrics import Metrics
from btserver.publisher import Retry
from btserver.rucio_client import RucioClient, RucioError, RucioNotFound, RucioRefused, RucioUnavailable

log = logging.getLogger("btswarm.server.rucio")

BATCH = 100  # datasets per bulk call
CONCURRENCY = 2  # bulk calls at once
MAX_NESTING = 8  # containers within a container followed this deep (real ones nest one or two)
SNAPSHOT = "rucio-snapshot.json"


async def fetch(client: RucioClient, cfg: RucioConfig) -> Catalog:
    """One refresh: every configured dataset at cfg.rse, and every dataset of a configured container.
    Raises RucioUnavailable / RucioRefused / RucioError when Rucio cannot be asked; a DID Rucio does
    not know is a problem, not a failure."""
    problems: list[Problem] = []
    dids: dict[DID, None] = {}
    patterns = [parse_pattern(text) for text in cfg.datasets]
    named = [DID(p.scope, p.pattern) for p in patterns if not p.wildcard]
    kinds = await types(client, named)
    named_containers = [d for d in named if kinds.get(d) == "CONTAINER"]
    dids.update((d, None) for d in named if kinds.get(d) != "CONTAINER")
    searched: dict[DID, None] = {}
    for pattern in patterns:
        if pattern.wildcard:
            await _search(client, pattern, dids, searched, problems)
    held = await containers(client, [*named_containers, *searched], problems)
    for box in named_containers:  # a container named in `datasets` is served whole
        dids.update((parse_did(d), None) for d in held.get(str(box), ()))
    gate = asyncio.Semaphore(CONCURRENCY)
    order = list(dids)
    datasets = []
    for results in await asyncio.gather(*(_batch(client, cfg, order[i:i + BATCH], gate)
                                          for i in range(0, len(order), BATCH))):
        for ds, probs in results:
            problems.extend(probs)
            if ds is not None:
                datasets.append(ds)
    return Catalog(tuple(sorted(datasets, key=lambda d: d.name)), tuple(problems), containers=held)


async def _search(client: RucioClient, pattern: DIDPattern, dids: dict[DID, None], searched: dict[DID, None],
                  problems: list[Problem]) -> None:
    """A wildcard pattern's datasets into `dids`, its containers into `searched`; what is wrong into `problems`."""
    try:
        found = await client.search_datasets(pattern.scope, pattern.pattern)
        boxes = [d for d in await client.search(pattern.scope, pattern.pattern, "container") if pattern.matches(d)]
    except RucioNotFound as exc:
        problems.append(Problem("", str(pattern), exc.problem))
        return
    searched.update((d, None) for d in boxes)
    if not found and not boxes:  # Rucio answers an unknown scope with an empty list, too
        problems.append(Problem("", str(pattern), "matches no dataset in Rucio"))
    for did in found:
        try:
            did = parse_did(str(did))
        except BtswarmError as exc:
            problems.append(Problem(str(did), str(did), f"{exc.problem}; not served"))
            continue
        if pattern.matches(did):
            dids[did] = None


async def _batch(client: RucioClient, cfg: RucioConfig, chunk: list[DID], gate: asyncio.Semaphore
                 ) -> list[tuple[Dataset | None, list[Problem]]]:
    """A batch of datasets as served here, or their problems. Two calls for the whole batch: their files, then
    the replicas of those files at this RSE (Rucio lists each file once)."""
    async with gate:
        content = await client.bulk_files(chunk)
        replicas = {(r.get("scope"), r.get("name")): r for r in await client.replicas(chunk, cfg.rse, cfg.schemes)}
        out = []
        for did in chunk:
            files = content.get(did)
            if files is None:  # unknown to Rucio, or empty: asked alone, a 404 tells which
                try:
                    files = await client.dataset_files(did)
                except RucioNotFound as exc:
                    out.append((None, [Problem(str(did), str(did), f"{exc.problem}; not served")]))
                    continue
            mine = [replicas[k] for k in ((f.get("scope"), f.get("name")) for f in files) if k in replicas]
            out.append(rucio_map.dataset_from_rucio(did, files, mine, cfg.rse, cfg.pfn_map,
                                                    source=f"rucio {cfg.rse}"))
        return out


async def types(client: RucioClient, dids: list[DID]) -> dict[DID, str]:
    """The type of each DID named without a wildcard (a container's datasets are served, not the
    container as one), a batch a call. A batch holding a DID Rucio does not know is asked one DID at a
    time; an unknown DID is then absent, and read as a dataset (which says it is unknown)."""
    out: dict[DID, str] = {}
    for start in range(0, len(dids), BATCH):
        chunk = dids[start:start + BATCH]
        try:
            out.update(await client.types(chunk))
        except RucioNotFound:
            for did in chunk:
                try:
                    out.update(await client.types([did]))
                except RucioNotFound:
                    pass
    return out


async def containers(client: RucioClient, found: list[DID], problems: list[Problem]
                     ) -> dict[str, tuple[str, ...]]:
    """Each container with the datasets it holds (those in containers within it too, MAX_NESTING
    deep): what the repository answers for `bt-get scope:container`. A container's datasets are
    listed whether or not this site holds them: Rucio's membership is the same for every site, and
    the repository joins what the sites hold."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def listed(did: DID) -> list[tuple[DID, str]]:
        async with gate:
            return await client.content(did)

    async def members(top: DID) -> tuple[str, tuple[str, ...]] | None:
        datasets: dict[str, None] = {}
        seen, level = {top}, [top]
        try:
            for _ in range(MAX_NESTING):
                below: list[DID] = []
                for children in await asyncio.gather(*(listed(c) for c in level)):
                    for child, kind in children:
                        if kind == "DATASET":
                            datasets[str(child)] = None
                        elif kind == "CONTAINER" and child not in seen:
                            seen.add(child)
                            below.append(child)
                if not below:
                    break
                level = below
        except RucioNotFound as exc:  # deleted since the search
            problems.append(Problem("", str(top), exc.problem))
            return None
        return str(top), tuple(sorted(datasets))

    return dict(m for m in await asyncio.gather(*(members(d) for d in found)) if m is not None)


async def fetch_once(cfg: RucioConfig) -> Catalog:
    """A refresh with a session of its own (bt-server scan and publish)."""
    async with aiohttp.ClientSession() as http:
        return await fetch(RucioClient(http, cfg), cfg)


@dataclass
class SyncState:
    """What /api/status shows of the Rucio side."""

    server: str
    rse: str
    state: str = "starting"  # starting | ok | unreachable | refused | error
    error: str = ""
    failures: int = 0  # in a row
    last_attempt: float | None = None
    last_success: float | None = None
    next_attempt: float | None = None
    prepared_at: float | None = None  # when the last good refresh had been prepared (farms, torrents)
    duration: float | None = None  # seconds of that refresh: Rucio's answers, then the preparation
    datasets: int = 0  # served from the current catalog
    withheld: list[str] = field(default_factory=list)  # datasets kept back by problems
    snapshot_from: float | None = None  # the catalog in use was loaded from disk, saved then

    def to_json(self) -> dict:
        return {"server": self.server, "rse": self.rse, "state": self.state, "error": self.error,
                "failures": self.failures, "last_attempt": self.last_attempt, "last_success": self.last_success,
                "next_attempt": self.next_attempt, "prepared_at": self.prepared_at, "duration": self.duration,
                "datasets": self.datasets, "withheld": self.withheld,
                "snapshot_from": self.snapshot_from}

    def problem(self) -> str | None:
        """The line for /api/status problems while Rucio cannot be asked."""
        if self.state in ("unreachable", "refused", "error"):
            return f"rucio: {self.error}"
        return None


class RucioSync:
    def __init__(self, cfg: RucioConfig, http: aiohttp.ClientSession, state_dir: str | os.PathLike,
                 on_catalog: Callable[[Catalog], Awaitable[None]], metrics: Metrics | None = None) -> None:
        self.cfg = cfg
        self.client = RucioClient(http, cfg)
        self.snapshot_path = Path(state_dir) / SNAPSHOT
        self.on_catalog = on_catalog
        self.metrics = metrics
        self.retry = Retry(first=cfg.retry_min, factor=2.0, cap=cfg.refresh)
        self.state = SyncState(cfg.server, cfg.rse)
        self.wake = asyncio.Event()  # set to refresh now (SIGHUP)
        self._logged: set[str] = set()  # problems already logged: each is logged when it appears

    def load_snapshot(self) -> Catalog | None:
        try:
            doc = json.loads(self.snapshot_path.read_text(encoding="utf-8"))
            cat = rucio_map.catalog_from_json(doc)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, BtswarmError) as exc:
            log.warning("%s: ignored (%s)", self.snapshot_path, exc)
            return None
        self.state.snapshot_from = doc.get("saved_at")
        self._count(cat)
        log.info("rucio: %d datasets from the snapshot of %s", len(cat.datasets),
                 time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(doc.get("saved_at") or 0)))
        return cat

    def _save(self, cat: Catalog) -> None:
        self.snapshot_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.snapshot_path.with_name(f".{SNAPSHOT}.tmp")
        tmp.write_text(json.dumps(rucio_map.catalog_to_json(cat, time.time())), encoding="utf-8")
        os.replace(tmp, self.snapshot_path)

    def _count(self, cat: Catalog) -> None:
        self.state.datasets = len(cat.datasets)
        self.state.withheld = sorted({p.dataset for p in cat.problems if p.dataset})
        if self.metrics:
            self.metrics.rucio_datasets.set(len(cat.datasets))
            self.metrics.rucio_withheld.set(len(self.state.withheld))

    async def refresh_once(self) -> bool:
        """Ask Rucio once; on success hand the catalog on (and wait for it to be prepared)."""
        s = self.state
        s.last_attempt = time.time()
        started = time.monotonic()
        try:
            cat = await fetch(self.client, self.cfg)
        except (RucioError, BtswarmError) as exc:
            s.failures += 1
            s.state = ("unreachable" if isinstance(exc, RucioUnavailable) else
                       "refused" if isinstance(exc, RucioRefused) else "error")
            s.error = str(exc)
            if self.metrics:
                self.metrics.rucio_refreshes.labels(result=s.state).inc()
            return False
        elapsed = time.monotonic() - started
        s.state, s.error, s.failures, s.last_success, s.snapshot_from = "ok", "", 0, time.time(), None
        self._count(cat)
        if self.metrics:
            self.metrics.rucio_refreshes.labels(result="ok").inc()
            self.metrics.rucio_refresh_seconds.observe(elapsed)
            self.metrics.rucio_last_success.set(s.last_success)
        log.info("rucio: %d datasets at %s, %d withheld, in %.2f s (%d requests so far)", len(cat.datasets),
                 self.cfg.rse, len(s.withheld), elapsed, self.client.requests)
        current = {str(p) for p in cat.problems}
        new = sorted(current - self._logged)
        for text in new[:20]:
            log.warning("rucio: %s", text)
        if len(new) > 20:
            log.warning("rucio: ... and %d more problems (GET /api/status lists them all)", len(new) - 20)
        self._logged = current
        await asyncio.get_running_loop().run_in_executor(None, self._save, cat)
        await self.on_catalog(cat)
        s.prepared_at = time.time()
        s.duration = time.monotonic() - started
        return True

    def delay(self, ok: bool) -> float:
        return self.cfg.refresh if ok else self.retry.delay(self.state.failures - 1)

    async def run_forever(self) -> None:
        while True:
            started = time.monotonic()
            ok = await self.refresh_once()
            # Refreshes start every `refresh` seconds (a long one is followed at once
            # by the next); retries wait their back-off after the failure.
            wait = max(0.0, started + self.delay(ok) - time.monotonic()) if ok else self.delay(ok)
            self.state.next_attempt = time.time() + wait
            if not ok:
                log.error("rucio: %s (%d failures in a row; the datasets already known keep seeding; "
                          "next try in %.0f s)", self.state.error, self.state.failures, wait)
            try:
                await asyncio.wait_for(self.wake.wait(), wait)
            except asyncio.TimeoutError:
                pass
            self.wake.clear()
