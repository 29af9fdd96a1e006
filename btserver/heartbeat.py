"""Heartbeats to the tracker: who we are, what we can seed, what we seed.

Sent every `interval` and at once when something changes (a dataset is
ready, a seed starts or stops). A tracker that is down is retried at the
next beat, quietly: the daemon's job is seeding, not the tracker's uptime.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable, Mapping, Sequence

import aiohttp

from torrents.servicekit import tls
from torrents.servicekit.web import PeerClock, client_error, signed_request

from btserver.metrics import Metrics

log = logging.getLogger("btswarm.server.heartbeat")

MIN_GAP = 0.2
MIN_INTERVAL = 0.5
_last_stamp = 0


def stamp() -> int:
    """Now on this site's clock, in µs since the epoch, strictly increasing in this process: a heartbeat's
    `built` and a seed start's `started`. The tracker compares only this site's stamps with each other: a
    heartbeat built before a start says nothing about that start's seed (docs/contracts.md)."""
    global _last_stamp
    _last_stamp = max(_last_stamp + 1, time.time_ns() // 1000)
    return _last_stamp


def heartbeat_body(site: str, control_url: str, peers: list[str], can_seed: list[str], seeding: list[str],
                   capacity: int, kind: str = "T2", web_busy: Sequence[str] = (), stuck: Sequence[str] = (),
                   built: int | None = None, uploaded: Mapping[str, int] | None = None,
                   ssl_peers: Sequence[str] = (), restricted: Mapping[str, str] | None = None) -> dict:
    """`web_busy`: datasets the web seed served lately; they count in the load as seeds do. `stuck`: seeds
    whose storage hangs (btserver/stuck.py), which the tracker neither hands out nor counts. `built`: the
    stamp() taken before `seeding` was read. `uploaded`: payload bytes sent per info-hash since the daemon
    started (peer wire and web seed), of which the non-zero ones are sent. `ssl_peers`: the SSL peer sockets,
    `restricted`: info-hash → name of each restricted dataset (both only from a site that has them)."""
    return {"site": site, "kind": kind, "control_url": control_url, "peers": peers, "can_seed": sorted(can_seed),
            "seeding": sorted(seeding), "stuck": sorted(stuck), "load": len(set(seeding) | set(web_busy)),
            "capacity": capacity, "uploaded": {h: n for h, n in sorted((uploaded or {}).items()) if n > 0},
            **({"built": built} if built is not None else {}),
            **({"ssl_peers": list(ssl_peers)} if ssl_peers else {}),
            **({"restricted": dict(sorted(restricted.items()))} if restricted else {})}


async def beat_all(http: aiohttp.ClientSession, trackers: Sequence[str], site: str, secret: str,
                   body: Callable[[], dict], changed: asyncio.Event, interval: float,
                   metrics: Metrics | None = None, clocks: Mapping[str, PeerClock] | None = None) -> None:
    """`beat_forever` to every tracker of the federation, each on its own (one down delays no other).
    `clocks`: by tracker URL, this host's clock against each (said in the log, shown in /api/status)."""
    clocks = clocks or {}
    if len(trackers) == 1:
        return await beat_forever(http, trackers[0], site, secret, body, changed, interval, metrics,
                                  clocks.get(trackers[0]))
    events = [asyncio.Event() for _ in trackers]

    async def fan_out() -> None:
        while True:
            await changed.wait()
            changed.clear()
            for e in events:
                e.set()

    await asyncio.gather(fan_out(), *(beat_forever(http, t, site, secret, body, e, interval, metrics, clocks.get(t))
                                      for t, e in zip(trackers, events)))


def _kind(status: int, answer: object) -> str:
    """A failed beat's kind: its HTTP status, or the error's name (client_error's text before its colon)."""
    return f"HTTP {status}" if status else str(answer).split(":", 1)[0]


def _said(answer: object) -> str:
    """What a JSON error answer says, as a sentence (not a Python dict)."""
    if isinstance(answer, dict) and isinstance(answer.get("error"), str):
        return answer["error"]
    return str(answer) if answer else "no reason given"


async def beat_forever(http: aiohttp.ClientSession, tracker: str, site: str, secret: str,
                       body: Callable[[], dict], changed: asyncio.Event, interval: float,
                       metrics: Metrics | None = None, clock: PeerClock | None = None) -> None:
    """One POST per interval, or sooner on `changed`; runs until cancelled."""
    url = f"{tracker.rstrip('/')}/api/sites/{site}/heartbeat"
    failing = ""  # the kind of the last beat's failure (_kind); "" while beats are answered
    every = interval
    while True:
        changed.clear()
        try:
            status, answer = await signed_request(http, "POST", url, site=site, secret=secret, payload=body(),
                                                  timeout=max(1.0, min(every, 10.0)), clock=clock)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            status, answer = 0, client_error(exc, tls.hint("server"))
        if metrics:
            metrics.heartbeats.labels(result=str(status or "error")).inc()
        if status == 200:
            # The tracker marks a site down after a few missed beats of
            # *its* interval: never beat slower than it asks.
            asked = answer.get("interval") if isinstance(answer, dict) else None
            if isinstance(asked, (int, float)) and not isinstance(asked, bool) and asked > 0:
                every = max(MIN_INTERVAL, min(interval, float(asked)))
            if failing:
                log.info("heartbeat: tracker %s reachable again", tracker)
            failing = ""
        else:
            if status == 401 and clock is not None and clock.refused:
                pass  # this host's clock, not the secret: the clock said so, once
            elif status == 401:
                log.warning("heartbeat: tracker %s refused our signature (%s): is this site's secret the one the "
                            "tracker holds for %s in [tracker] site_secrets?", tracker, _said(answer), site)
            elif status == 403 and not failing:  # signed right, but not the kind the tracker's configuration says
                log.warning("heartbeat: tracker %s refused this site: %s", tracker, _said(answer))
            elif _kind(status, answer) != failing:
                # Said again when the failure changes kind: a beat in flight as the tracker stopped ends
                # 'disconnected', the next ones 'cannot connect', which is what tells the admin it is down.
                log.info("heartbeat: tracker %s not answering (%s); will keep trying", tracker,
                         f"HTTP {status}: {_said(answer)}" if status else answer)
            failing = _kind(status, answer)
        try:
            await asyncio.wait_for(changed.wait(), timeout=every)
            # A burst of changes (many seeds starting) becomes one beat, not one each.
            await asyncio.sleep(min(MIN_GAP, every))
        except asyncio.TimeoutError:
            pass
