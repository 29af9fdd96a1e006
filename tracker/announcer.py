"""The tracker's decisions, without HTTP: an announce or scrape in, the bencoded answer out.

The app parses nothing and decides nothing; it hands the raw query and
the connection's address here. Which info-hashes are known (published by
a site's heartbeat or by the repository, or anything when open), what the
peer store records, whether seeds must be started, and whom to hand out
are decided in this one place.
"""

from __future__ import annotations

import random
from typing import Any, Coroutine, Iterable

from tracker.config import TrackerConfig
from tracker import handout, protocol
from tracker.metrics import TrackerMetrics
from tracker.peerstore import PeerStore, SwarmCounts
from tracker.protocol import AnnounceError
from tracker.seeding import SeedStarter
from tracker.sites import Site, SiteRegistry

MAX_FULL_SCRAPE = 1000  # swarms in a scrape without info_hash


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
        self._jitter = max(1, config.interval // 10)

    def set_published(self, hashes: Iterable[bytes]) -> None:
        self.published = frozenset(hashes)

    def known(self, info_hash: bytes) -> bool:
        return self.config.open or info_hash in self.sites.holders or info_hash in self.published

    async def announce(self, raw_query: str | bytes, remote_ip: str) -> bytes:
        answer = self.announce_nowait(raw_query, remote_ip)
        return answer if isinstance(answer, bytes) else await answer

    def announce_nowait(self, raw_query: str | bytes, remote_ip: str) -> bytes | Coroutine[Any, Any, bytes]:
        """The answer, or a coroutine for it when seeds may have to be started first.

        Only a leecher's announce for a swarm that sites hold can wait (on
        `SeedStarter.ensure`); every other announce is answered here without
        a task, which is what lets the fast path serve it synchronously.
        """
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
        store = self.store
        store.update(h, ann.ip, ann.port, ann.peer_id, ann.seed, ann.event)
        counts = store.counts(h)
        self.metrics.announce_ok.inc()
        # Spread re-announces so a swarm that started together does not
        # come back in lock-step.
        interval = config.interval + self.rng.randint(0, self._jitter)
        if ann.event == "stopped":
            return protocol.compact_answer(interval, config.min_interval, counts.complete, counts.incomplete,
                                           b"", b"")
        if not ann.seed and h in self.sites.holders:
            return self._answer_after_seeds(ann, counts, interval)
        return self._answer(ann, counts, interval)

    async def _answer_after_seeds(self, ann: protocol.Announce, counts: SwarmCounts, interval: int) -> bytes:
        if await self.starter.ensure(ann.info_hash, counts):
            counts = self.store.counts(ann.info_hash)
        return self._answer(ann, counts, interval)

    def _answer(self, ann: protocol.Announce, counts: SwarmCounts, interval: int) -> bytes:
        h = ann.info_hash
        config = self.config
        requester_site = self.sites.site_of(ann.ip) if self.sites.holders else None
        chosen = handout.select(self.store.peers(h), (ann.ip, ann.port), ann.numwant, site_of=self.sites.site_of,
                                requester_site=requester_site, rng=self.rng)
        if not ann.compact:
            return protocol.list_answer(interval, config.min_interval, counts.complete, counts.incomplete,
                                        [(p.ip, p.port, p.peer_id) for p in chosen], ann.no_peer_id)
        peers4 = b"".join([p.compact for p in chosen if not p.ipv6])
        peers6 = b"".join([p.compact for p in chosen if p.ipv6])
        return protocol.compact_answer(interval, config.min_interval, counts.complete, counts.incomplete,
                                       peers4, peers6)

    def scrape(self, raw_query: str | bytes) -> bytes:
        try:
            hashes = protocol.parse_scrape(raw_query)
        except AnnounceError as exc:
            return protocol.failure_answer(str(exc))
        self.metrics.scrapes.inc()
        if not hashes:
            hashes = [h for _, h in zip(range(MAX_FULL_SCRAPE), self.store.swarms())]
        files = {}
        for h in hashes:
            if self.known(h) or self.store.has(h):
                c = self.store.counts(h)
                files[h] = (c.complete, c.downloaded, c.incomplete)
        return protocol.scrape_answer(files)

    def site_beat(self, site: Site) -> None:
        """Record a site's heartbeat; forget its seeds of swarms it says it no longer seeds.

        A site announces `stopped` when it drops an idle seed, but if that
        announce is lost the swarm keeps a seed that turns peers away, and no
        start is asked of any site until the entry expires (two intervals).
        The heartbeat that follows the stop, sent at once, settles it.
        """
        before = self.sites.get(site.name)
        self.sites.beat(site)
        if before is None:
            return
        for info_hash in before.seeding - site.seeding:
            for endpoint in site.peers:
                host, _, port = endpoint.rpartition(":")
                self.store.update(info_hash, host.strip("[]"), int(port), b"", True, "stopped")

    def seeding_sites(self, info_hash: bytes) -> list[str]:
        """Sites seeding H: by their heartbeat, or with a seed of theirs in the swarm."""
        names = {s.name for s in self.sites.all() if info_hash in s.seeding}
        for p in self.store.peers(info_hash):
            if p.seed:
                name = p.site or self.sites.site_of(p.ip)
                if name:
                    names.add(name)
        return sorted(names)
