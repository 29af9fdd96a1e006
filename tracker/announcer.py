"""The tracker's decisions, without HTTP: an announce or scrape in, the bencoded answer out.

The app parses nothing and decides nothing; it hands the raw query and
the connection's address here. Which info-hashes are known (published by
a site's heartbeat or by the repository, or anything when open), what the
peer store records, whether seeds must be started, and whom to hand out
are decided in this one place.

An answer is bytes when it could be decided at once (the memory store,
nothing to start), else an awaitable: a Future settled by callbacks when
the store's reply is one (Redis, connected: no task per announce), or a
coroutine (a seed start to wait for), for which the fast path makes a task.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Any, Awaitable, Coroutine, Iterable

from tracker import membership, protocol, siteseeds
from tracker.churn import ChurnGuard
from tracker.config import TrackerConfig
from tracker.fallback import Fallback
from tracker.metrics import SAMPLE_EVERY, TrackerMetrics
from tracker.peerstore import PeerStore, SwarmView, record, resolve
from tracker.protocol import AnnounceError
from tracker.resp import StoreUnavailable
from tracker.seeding import SeedStarter
from tracker.sites import Site, SiteRegistry

log = logging.getLogger("btswarm.tracker.announcer")

MAX_FULL_SCRAPE = 1000  # swarms in a scrape without info_hash
# While a start is in flight and the swarm has no seed yet, the answer asks
# the client back soon (libtorrent waits at least its min_announce_interval, 5 s here).
RETRY_INTERVAL = 5
STORE_DOWN = "tracker: swarm store unavailable, retry later"


class Announcer:
    def __init__(self, config: TrackerConfig, store: PeerStore, sites: SiteRegistry, starter: SeedStarter,
                 metrics: TrackerMetrics, *, rng: random.Random | None = None) -> None:
        self.config = config
        self.store = store
        self.sites = sites
        self.starter = starter
        self.metrics = metrics
        self.rng = rng or random.Random()
        self.published: frozenset[bytes] = frozenset()  # from the repository
        self._failure_unknown = protocol.failure_answer(config.failure_reason)
        self._failure_store = protocol.failure_answer(STORE_DOWN)
        self._jitter = protocol.interval_jitter(config.interval)
        self._sampled = 0  # announces since the last one timed
        self.churn = ChurnGuard()
        self.fallback = Fallback(protocol.peer_ttl(config.interval), sites)
        self._warned_no_peer_ca = False

    def set_published(self, hashes: Iterable[bytes]) -> None:
        self.published = frozenset(hashes)
        self.sites.forget_released()

    def known(self, info_hash: bytes) -> bool:
        return self.config.open or info_hash in self.sites.held or info_hash in self.published

    async def announce(self, raw_query: str | bytes, remote_ip: str, member: frozenset[str] = frozenset()
                       ) -> bytes:
        answer = self.announce_nowait(raw_query, remote_ip, member)
        return answer if isinstance(answer, bytes) else await answer

    def announce_nowait(self, raw_query: str | bytes, remote_ip: str, member: frozenset[str] = frozenset()
                        ) -> bytes | Awaitable[bytes]:
        """The answer, or an awaitable of it when the store or a seed start must be waited for. `member`: the
        datasets the announcing peer proved it may trade (tracker/membership.py)."""
        self._sampled += 1
        if self._sampled < SAMPLE_EVERY:
            return self._announce(raw_query, remote_ip, member)
        self._sampled = 0
        t0 = time.perf_counter()
        answer = self._announce(raw_query, remote_ip, member)
        observe = self.metrics.announce_latency.observe
        if isinstance(answer, bytes):
            observe(time.perf_counter() - t0)
            return answer
        if not isinstance(answer, asyncio.Future):
            answer = asyncio.ensure_future(answer)
        answer.add_done_callback(lambda _: observe(time.perf_counter() - t0))
        return answer

    def _announce(self, raw_query: str | bytes, remote_ip: str, member: frozenset[str]) -> bytes | Awaitable[bytes]:
        config = self.config
        try:
            ann = protocol.parse_announce(raw_query, remote_ip, trust_ip=config.trust_ip,
                                          default_numwant=config.default_numwant)
        except AnnounceError as exc:
            self.metrics.announce_invalid.inc()
            return protocol.failure_answer(str(exc))
        h = ann.info_hash
        if not self.known(h):
            self.metrics.announce_unknown.inc()
            return self._failure_unknown
        restricted = self.sites.restricted.get(h) if self.sites.restricted else None
        if restricted is not None and (why := membership.refusal(restricted, member)):
            # Neither stored nor answered with peers: a non-member learns nobody's address.
            self.metrics.announce_refused.inc()
            return protocol.failure_answer(why)
        if self.sites.stuck and (ann.ip, ann.port) in self.sites.stuck.get(h, ()):
            # A site's own seed whose storage hangs, announcing: out of the swarm, whatever it says,
            # until its site says it recovered (site_beat puts it back).
            ann = ann._replace(event="stopped")
        site = self.sites.site_of(ann.ip) if self.sites.holders else None
        try:
            view = record(self.store, ann, site)
        except StoreUnavailable:
            return self._store_down(ann, site)
        if isinstance(view, SwarmView):
            return self._decide(ann, site, view)
        if isinstance(view, asyncio.Future):
            return self._decide_on(ann, site, view)
        return self._decide_later(ann, site, view)

    def _decide_on(self, ann: protocol.Announce, site: str | None, pending: asyncio.Future) -> asyncio.Future:
        """The answer as a Future settled from `pending`'s callback: no task unless a seed start is waited for."""
        answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

        def done(f: asyncio.Future) -> None:
            if answer.done():
                return
            try:
                result = self._decide(ann, site, f.result())
            except StoreUnavailable:
                answer.set_result(self._store_down(ann, site))
                return
            except BaseException as exc:  # noqa: BLE001 - settles the answer; the caller logs it
                answer.set_exception(exc)
                return
            if isinstance(result, bytes):
                answer.set_result(result)
            else:
                asyncio.ensure_future(result).add_done_callback(
                    lambda t: answer.done() or (answer.cancel() if t.cancelled() else
                                                answer.set_exception(t.exception()) if t.exception() else
                                                answer.set_result(t.result())))

        pending.add_done_callback(done)
        return answer

    async def _decide_later(self, ann: protocol.Announce, site: str | None, pending: Awaitable[SwarmView]) -> bytes:
        try:
            answer = self._decide(ann, site, await pending)
            return answer if isinstance(answer, bytes) else await answer
        except StoreUnavailable:
            return self._store_down(ann, site)

    def _decide(self, ann: protocol.Announce, site: str | None, view: SwarmView) -> bytes | Coroutine[Any, Any, bytes]:
        self.metrics.announce_ok.inc()
        h = ann.info_hash
        if ann.closed and not ann.seed and ann.event != "stopped":
            view = view._replace(incomplete=view.incomplete + 1)  # unlisted, it still wants the sites' seeds
        if ann.event == "stopped" or ann.seed or h not in self.sites.holders:
            return self._answer(ann, view)
        # Only the sites' seeds count (tracker/siteseeds.py): a peer that says left=0 never keeps them away.
        seeding = siteseeds.said_seeding(self.sites, h)
        if self.starter.short(h, view.counts, siteseeds.at_once(len(seeding), view.complete)):
            if self.churn.may_start(h, ann.ip, ann.port, ann.downloaded):
                return self._answer_after_seeds(ann, site, view)
            self.metrics.starts_withheld.inc()
        return self._answer(ann, siteseeds.with_site_seed(self.sites, ann, view, seeding, self.rng))

    async def _answer_after_seeds(self, ann: protocol.Announce, site: str | None, view: SwarmView) -> bytes:
        try:
            if await self.starter.ensure(ann.info_hash, view.counts):
                view = await resolve(self.store.handout(ann.info_hash, ann.ip, ann.port, numwant=ann.numwant,
                                                        site=site, listed=not ann.compact))
            seeding = await self.starter.seeding_sites(ann.info_hash)
        except StoreUnavailable:
            return self._store_down(ann, site)
        # No site seeds H yet: come back soon, a start may be landing (another seed may be a liar).
        return self._answer(ann, siteseeds.with_site_seed(self.sites, ann, view, seeding, self.rng), retry=not seeding)

    def _answer(self, ann: protocol.Announce, view: SwarmView, *, retry: bool = False) -> bytes:
        config = self.config
        # A closed peer (inbound=0) is asked back soon too: nobody can find it, so it must find the peers
        # that arrive after it.
        if retry or ann.closed:
            interval = min_interval = min(RETRY_INTERVAL, config.interval)
        else:
            # Spread re-announces so a swarm that started together does not
            # come back in lock-step.
            interval, min_interval = config.interval + self.rng.randint(0, self._jitter), config.min_interval
        if ann.event == "stopped":
            return protocol.compact_answer(interval, min_interval, view.complete, view.incomplete, b"", b"")
        if not ann.compact:
            return protocol.list_answer(interval, min_interval, view.complete, view.incomplete,
                                        view.listed or [], ann.no_peer_id)
        return protocol.compact_answer(interval, min_interval, view.complete, view.incomplete, view.peers4,
                                       view.peers6)

    def _store_down(self, ann: protocol.Announce | None = None, site: str | None = None) -> bytes:
        """The store is unavailable: an announce is answered from this process's memory (tracker/fallback.py),
        asked back soon; a scrape gets the failure reason."""
        self.metrics.announce_store_down.inc()
        if ann is None:
            return self._failure_store
        return self._answer(ann, self.fallback.announce(ann, site), retry=True)

    def scrape(self, raw_query: str | bytes) -> bytes | Coroutine[Any, Any, bytes]:
        try:
            hashes = protocol.parse_scrape(raw_query)
        except AnnounceError as exc:
            return protocol.failure_answer(str(exc))
        self.metrics.scrapes.inc()
        if not hashes:
            return self._full_scrape()
        counts = self.store.counts(hashes)
        if isinstance(counts, list):
            return self._scrape_answer(hashes, counts)
        return self._scrape_later(hashes, counts)

    async def _full_scrape(self) -> bytes:
        try:
            hashes = await resolve(self.store.swarms(MAX_FULL_SCRAPE))
            return self._scrape_answer(hashes, await resolve(self.store.counts(hashes)))
        except StoreUnavailable:
            return self._store_down()

    async def _scrape_later(self, hashes: list[bytes], pending: Awaitable[list]) -> bytes:
        try:
            return self._scrape_answer(hashes, await pending)
        except StoreUnavailable:
            return self._store_down()

    def _scrape_answer(self, hashes: list[bytes], counts: list) -> bytes:
        files = {}
        for h, c in zip(hashes, counts):
            if self.known(h) or c.complete or c.incomplete or c.downloaded:
                files[h] = (c.complete, c.downloaded, c.incomplete)
        return protocol.scrape_answer(files)

    async def site_beat(self, site: Site) -> None:
        """Record a site's heartbeat; forget its seeds of swarms it says it no longer seeds.

        A site announces `stopped` when it drops an idle seed, but if that
        announce is lost the swarm keeps a seed that turns peers away, and no
        start is asked of any site until the entry expires (two intervals).
        The heartbeat that follows the stop, sent at once, settles it.

        A seed the site says is stuck (its storage hangs) is taken out of the
        swarm at every beat (another tracker process may have recorded its
        announce meanwhile), so announces neither get it nor count it and a
        start is asked of another site; once the site says it recovered, it
        is a seed of the swarm again at once.
        """
        before = self.sites.get(site.name)
        if site.restricted and not self.config.peer_ca and not self._warned_no_peer_ca:
            self._warned_no_peer_ca = True
            log.warning("%s holds restricted datasets, and this tracker has no [tracker] peer_ca (with tls_cert): "
                        "no peer can prove membership, every announce in their swarms is refused", site.name)
        await resolve(self.sites.beat(site))
        # A heartbeat may arrive after a seed start it was built before (it went out just before the
        # site answered the start): it says nothing about that seed, so the store keeps a seed whose
        # start the site stamped after site.built (without it, two trackers' first announces lost
        # the new seed now and then, and asked the site again).
        for info_hash in site.stuck:
            for host, port in site.seed_endpoints(info_hash):
                await resolve(self.store.remove(info_hash, host, port, site.name, built=site.built))
        for info_hash in (before.seeding - site.seeding) if before is not None else ():
            for host, port in before.seed_endpoints(info_hash):
                await resolve(self.store.remove(info_hash, host, port, site.name, built=site.built))
        # Every seed the site lists (and not stuck) is in the swarm again from this beat: one whose site said it
        # recovered, and one whose entry expired while its announces could not reach the store (a Redis
        # failover: a seed that lost one announce expires 0.5 intervals later, and each new leecher then
        # asked its site for a seed it runs). A start is then never asked of a site for a seed it runs.
        for info_hash in site.seeding - site.stuck:
            for ep in site.seed_endpoints(info_hash):
                await resolve(self.store.add_seed(info_hash, ep[0], ep[1], siteseeds.site_peer_id(site.name, ep),
                                                  site.name, started=site.built))

    def holding_sites(self, info_hash: bytes) -> list[str]:
        """Sites that hold H now: up, and listing it in their last heartbeat (the repository lists
        their web seeds, and only theirs)."""
        return siteseeds.holding_sites(self.sites, info_hash)

    async def seeding_sites(self, info_hash: bytes) -> list[str]:
        """Sites seeding H: by their heartbeat, or with a seed of theirs in the swarm (tracker/siteseeds.py)."""
        return sorted(siteseeds.said_seeding(self.sites, info_hash) | await self.starter.seeding_sites(info_hash))
