"""Announces answered from this process's memory while the shared store (Redis) is unavailable.

While Redis fails over (a hung master: the sentinels' down-after plus an
election, 3 s in tests/tracker/test_sentinel.py) or is gone, an announce
cannot reach the swarm. Answered with a `failure reason`, libtorrent backs
off (its next try is ~25 s later with the default tracker_backoff), so the
seeds' entries expire meanwhile (peer ttl: 1.5 intervals) and the swarm
looks seedless once the store is back: every new leecher then asks a site
for a seed it already runs. Answered from here, clients come back after
RETRY_INTERVAL as after any answer, and find the store again.

What this process knows: the seeds the sites' heartbeats list (the site
registry is a local view, kept while the store is down), and the peers that
announced to this process during the outage, in a bounded LocalPeerStore.
No seed is started meanwhile: a start's claim lives in the store.
"""

from __future__ import annotations

from tracker.peerstore import LocalPeerStore, SwarmView, record
from tracker.protocol import Announce
from tracker.siteseeds import site_peer_id
from tracker.sites import SiteRegistry


class Fallback:
    def __init__(self, ttl: float, sites: SiteRegistry) -> None:
        self.sites = sites
        self.store = LocalPeerStore(ttl=ttl, max_swarms=10_000, max_peers_per_swarm=1_000)

    def announce(self, ann: Announce, site: str | None) -> SwarmView:
        h = ann.info_hash
        for name in self.sites.holders.get(h, ()):
            s = self.sites.get(name)
            if s is not None and h in s.seeding and h not in s.stuck and self.sites.is_up(s):
                for ip, port in s.peer_endpoints:
                    self.store.add_seed(h, ip, port, site_peer_id(name, (ip, port)), name)
        return record(self.store, ann, site)
