"""Publish each prepared dataset to the repository: signed PUT, retried with backoff.

Runs as background tasks: a repository that is down delays publishing,
never seeding. Retries are bounded (attempts and a capped backoff); 400,
403 (this site's role does not allow it: btrepo/rights.py) and 409 are
answers, not outages, and are not retried. The repository's
answer says where this replica stands against the version it serves
(a conflict or a partial replica is published, and said so).
"""

from __future__ import annotations

import asyncio
import base64
import logging
from dataclasses import dataclass

import aiohttp

from torrents import urls
from torrents.servicekit import tls
from torrents.servicekit.web import PeerClock, client_error, signed_request

from btserver.metrics import Metrics

log = logging.getLogger("btswarm.server.publisher")

PERMANENT = (400, 403, 409)


@dataclass(frozen=True)
class Retry:
    first: float = 0.5
    factor: float = 2.0
    cap: float = 60.0
    attempts: int = 40  # with the cap, about half an hour of trying

    def delay(self, attempt: int) -> float:
        return min(self.cap, self.first * self.factor ** attempt)


def publish_body(site: str, torrent: bytes, record: dict, kind: str = "T2") -> dict:
    return {"site": site, "kind": kind, "torrent": base64.b64encode(torrent).decode("ascii"), "record": record}


async def publish_once(http: aiohttp.ClientSession, repo: str, site: str, secret: str, torrent: bytes,
                       record: dict, timeout: float = 30.0, kind: str = "T2",
                       clock: PeerClock | None = None) -> tuple[int, object]:
    url = f"{repo.rstrip('/')}{urls.dataset_api(record['name'])}"
    return await signed_request(http, "PUT", url, site=site, secret=secret,
                                payload=publish_body(site, torrent, record, kind), timeout=timeout, clock=clock)


def container_changes(sent: dict[str, tuple[str, ...]], now: dict[str, tuple[str, ...]]
                      ) -> dict[str, tuple[str, ...]]:
    """The containers whose datasets the repository must be told again: new or changed ones, and
    those no longer found (an empty list withdraws this site's word). Pure."""
    changes = {c: ds for c, ds in now.items() if sent.get(c) != ds}
    changes.update({c: () for c in sent if c not in now and sent[c]})
    return changes


async def publish_containers(http: aiohttp.ClientSession, repo: str, site: str, secret: str,
                             changes: dict[str, tuple[str, ...]], *, clock: PeerClock | None = None,
                             timeout: float = 30.0) -> dict[str, tuple[str, ...]]:
    """PUT each changed container's datasets (once: the next Rucio refresh tries again what failed);
    returns those the repository took."""
    taken = {}
    for container, datasets in sorted(changes.items()):
        url = f"{repo.rstrip('/')}/api/containers/{urls.quoted(container)}"
        try:
            status, answer = await signed_request(http, "PUT", url, site=site, secret=secret, timeout=timeout,
                                                  payload={"site": site, "datasets": list(datasets)}, clock=clock)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            log.info("container %s: %s; tried again after the next refresh", container,
                     client_error(exc, tls.hint("server")))
            continue
        if status == 200:
            taken[container] = datasets
            log.info("container %s: %d datasets published to %s", container, len(datasets), repo)
        else:
            log.warning("container %s: the repository answered %s (%s)", container, status, answer)
    return taken


@dataclass(frozen=True)
class Answer:
    """How a publication ended: the repository's answer, or why there is none."""

    ok: bool
    result: str = ""  # created, new_version, conflict, partial, site_added, unchanged
    state: str = ""  # where this replica stands against the version the repository serves
    problem: str = ""  # a sentence when it disagrees, or why publishing failed
    status: int = 0  # the repository's HTTP status when it refused (403: this site's role does not allow it)

    @property
    def forbidden(self) -> bool:
        return self.status == 403

    @classmethod
    def of(cls, status: int, doc: object) -> "Answer":
        if status in (200, 201) and isinstance(doc, dict):
            return cls(True, str(doc.get("result", "")), str(doc.get("state", "current")),
                       str(doc.get("problem") or ""))
        reason = doc.get("error") if isinstance(doc, dict) else doc
        return cls(False, problem=f"HTTP {status}: {reason}" if status else str(reason), status=status)

    def to_json(self) -> dict:
        return {"published": self.ok, "result": self.result, "state": self.state, "problem": self.problem or None}


async def publish(http: aiohttp.ClientSession, repo: str, site: str, secret: str, torrent: bytes, record: dict,
                  *, retry: Retry = Retry(), metrics: Metrics | None = None, kind: str = "T2",
                  clock: PeerClock | None = None) -> Answer:
    """PUT until the repository answers 200/201, or refuses for good, or attempts run out.
    `clock`: this host's clock against the repository's (a refusal for it is said there, once)."""
    name = record["name"]
    answer: object = None
    for attempt in range(retry.attempts):
        try:
            status, answer = await publish_once(http, repo, site, secret, torrent, record, kind=kind, clock=clock)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            status, answer = 0, f"{repo}: {client_error(exc, tls.hint('server'))}"
        if metrics:
            metrics.publishes.labels(result=str(status or "error")).inc()
        if status in (200, 201):
            done = Answer.of(status, answer)
            if done.problem:
                # Published, but the repository does not serve this replica as the dataset.
                log.warning("publish %s (%s): %s, %s: %s", name, record["info_hash"], done.result, done.state,
                            done.problem)
            else:
                log.info("publish %s (%s): %s by %s", name, record["info_hash"], done.result or status, repo)
            return done
        if status == 401 and attempt == 0 and not (clock and clock.refused):
            # Not an outage: this site's secret is not the one the repository holds (retried all the
            # same, for a repository whose site_secrets are being corrected).
            log.warning("publish %s: %s refused our signature (%s): is this site's secret the one the repository "
                        "holds for %s in [repo] site_secrets?", name, repo, Answer.of(status, answer).problem, site)
        if status in PERMANENT:
            refused = Answer.of(status, answer)
            log.error("publish %s: %s refused it: %s", name, repo, refused.problem)
            return refused
        # First failure at INFO, the rest at DEBUG: a repository that is
        # down is normal at start-up and must not flood the log.
        level = logging.INFO if attempt == 0 else logging.DEBUG
        log.log(level, "publish %s: attempt %d failed (%s); retrying", name, attempt + 1,
                status or answer)
        await asyncio.sleep(retry.delay(attempt))
    log.error("publish %s: gave up after %d attempts", name, retry.attempts)
    return Answer(False, problem=f"gave up after {retry.attempts} attempts (last: {answer})")
