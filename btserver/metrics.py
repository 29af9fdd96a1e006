"""bt-server's Prometheus metrics, on a registry of their own (one per app)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.seeds_active = Gauge("btserver_seeds_active", "Seeds currently running", registry=r)
        self.datasets = Gauge("btserver_datasets", "Datasets ready to seed", registry=r)
        self.uploaded = Counter("btserver_uploaded_bytes", "Payload bytes uploaded", ["dataset"], registry=r)
        self.start_latency = Histogram("btserver_seed_start_seconds", "Time to add a seed and answer",
                                       buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, 5),
                                       registry=r)
        self.hash_failures = Counter("btserver_hash_failures", "Pieces that failed their SHA1 check when sent",
                                     registry=r)
        self.read_errors = Counter("btserver_read_errors", "Files of a seeded replica that could not be read",
                                   registry=r)
        self.seed_requests = Counter("btserver_seed_requests", "POST /api/seeds answers", ["result"], registry=r)
        self.publishes = Counter("btserver_publish_attempts", "PUTs to the repository", ["result"], registry=r)
        self.heartbeats = Counter("btserver_heartbeats", "Heartbeats to the tracker", ["result"], registry=r)
        # [server.rucio]: what to watch (docs/deploy-site.md)
        self.rucio_refreshes = Counter("btserver_rucio_refreshes", "Refreshes from Rucio by outcome "
                                       "(ok, unreachable, refused, error)", ["result"], registry=r)
        self.rucio_refresh_seconds = Histogram("btserver_rucio_refresh_seconds", "Time to read the catalog "
                                               "from Rucio", buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
                                               registry=r)
        self.rucio_last_success = Gauge("btserver_rucio_last_success_timestamp_seconds",
                                        "When Rucio last answered a whole refresh", registry=r)
        self.rucio_datasets = Gauge("btserver_rucio_datasets", "Datasets Rucio offers complete at this RSE",
                                    registry=r)
        self.rucio_withheld = Gauge("btserver_rucio_withheld", "Datasets kept back by a file problem",
                                    registry=r)
        self.web_requests = Counter("btserver_web_requests", "Web seed requests answered", ["code"], registry=r)
        self.web_sent = Counter("btserver_web_sent_bytes", "Payload bytes sent by the web seed", ["dataset"],
                                registry=r)
        self.web_active = Gauge("btserver_web_requests_active", "Web seed requests being answered", registry=r)
        self.web_queue = Histogram("btserver_web_queue_seconds", "Time a web seed request waited for a slot",
                                   buckets=(0.001, 0.01, 0.1, 0.5, 1, 2, 5, 10), registry=r)
