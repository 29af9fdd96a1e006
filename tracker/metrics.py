"""The tracker's Prometheus metrics, on a registry of its own (one per app, so tests don't share counters)."""

from __future__ import annotations

from typing import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


SAMPLE_EVERY = 8


class TrackerMetrics:
    def __init__(self, swarms: Callable[[], float], peers: Callable[[], float]) -> None:
        self.registry = CollectorRegistry()
        self.announces = Counter("btswarm_tracker_announces_total", "Announces answered, by result",
                                 ["result"], registry=self.registry)
        self.scrapes = Counter("btswarm_tracker_scrapes_total", "Scrapes answered", registry=self.registry)
        self.starts_withheld = Counter("btswarm_tracker_starts_withheld_total",
                                       "Seed starts not asked for: the leecher took seeds before and never "
                                       "downloaded (tracker/churn.py)", registry=self.registry)
        self.seed_starts = Counter("btswarm_tracker_seed_starts_total",
                                   "Seed start requests sent to sites, by outcome", ["outcome"], registry=self.registry)
        self.start_latency = Histogram("btswarm_tracker_seed_start_seconds", "Time for a site to answer a seed start",
                                       buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10), registry=self.registry)
        # One announce in SAMPLE_EVERY, from its query to its answer (the store's round trip and any
        # seed start included; the kernel's and the event loop's queues not).
        self.announce_latency = Histogram(
            "btswarm_tracker_announce_seconds", f"Time to answer an announce (1 in {SAMPLE_EVERY} sampled)",
            buckets=(0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 2, 10),
            registry=self.registry)
        Gauge("btswarm_tracker_swarms", "Swarms with peers", registry=self.registry).set_function(swarms)
        Gauge("btswarm_tracker_peers", "Peers over all swarms", registry=self.registry).set_function(peers)
        # Children resolved once: labels() costs a lock and a dict lookup per call on the hot path.
        self.announce_ok = self.announces.labels("ok")
        self.announce_unknown = self.announces.labels("unknown")
        self.announce_invalid = self.announces.labels("invalid")
        # A restricted dataset's swarm, and no proof of membership (tracker/membership.py).
        self.announce_refused = self.announces.labels("not_member")
        # Answered with a failure reason because the shared store (Redis) was unreachable or slow.
        self.announce_store_down = self.announces.labels("store_down")

    def seed_start(self, outcome: str, seconds: float) -> None:
        self.seed_starts.labels(outcome).inc()
        self.start_latency.observe(seconds)
