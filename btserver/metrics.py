"""bt-server's Prometheus metrics, on a registry of their own (one per app).

Names follow Prometheus' conventions, as every btswarm service's do:
`btswarm_server_<thing>`, counters declared with `_total` (what is exposed),
histograms in `_seconds`, sizes in `_bytes`. `btswarm_server_info{site}` is 1
and names the site, so a dashboard joins any series to its site on `instance`
(deploy/grafana/btswarm.json).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.info = Info("btswarm_server", "This site (label site)", registry=r)
        self.seeds_active = Gauge("btswarm_server_seeds_active", "Seeds currently running", registry=r)
        self.stuck_seeds = Gauge("btswarm_server_stuck_seeds", "Seeds whose peers wait for blocks while nothing "
                                 "is uploaded for [server] stuck_after (storage hanging)", registry=r)
        self.datasets = Gauge("btswarm_server_datasets", "Datasets ready to seed", registry=r)
        self.uploaded = Counter("btswarm_server_uploaded_bytes_total", "Payload bytes uploaded", ["dataset"],
                                registry=r)
        self.start_latency = Histogram("btswarm_server_seed_start_seconds", "Time to add a seed and answer",
                                       buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, 5),
                                       registry=r)
        self.hash_failures = Counter("btswarm_server_hash_failures_total",
                                     "Pieces that failed their SHA1 check when sent", registry=r)
        self.read_errors = Counter("btswarm_server_read_errors_total",
                                   "Files of a seeded replica that could not be read", registry=r)
        self.seed_requests = Counter("btswarm_server_seed_requests_total", "POST /api/seeds answers", ["result"],
                                     registry=r)
        self.publishes = Counter("btswarm_server_publish_attempts_total", "PUTs to the repository", ["result"],
                                 registry=r)
        self.heartbeats = Counter("btswarm_server_heartbeats_total", "Heartbeats to the tracker", ["result"],
                                  registry=r)
        # [server.rucio]: what to watch (docs/deploy-rucio.md)
        self.rucio_refreshes = Counter("btswarm_server_rucio_refreshes_total", "Refreshes from Rucio by outcome "
                                       "(ok, unreachable, refused, error)", ["result"], registry=r)
        self.rucio_refresh_seconds = Histogram("btswarm_server_rucio_refresh_seconds", "Time to read the catalog "
                                               "from Rucio", buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
                                               registry=r)
        self.rucio_last_success = Gauge("btswarm_server_rucio_last_success_timestamp_seconds",
                                        "When Rucio last answered a whole refresh", registry=r)
        self.rucio_datasets = Gauge("btswarm_server_rucio_datasets", "Datasets Rucio offers complete at this RSE",
                                    registry=r)
        self.rucio_withheld = Gauge("btswarm_server_rucio_withheld", "Datasets kept back by a file problem",
                                    registry=r)
        # [server] web_listen: the web seed (docs/webseeds.md)
        self.web_requests = Counter("btswarm_server_web_requests_total", "Web seed requests answered", ["code"],
                                    registry=r)
        self.web_sent = Counter("btswarm_server_web_sent_bytes_total", "Payload bytes sent by the web seed",
                                ["dataset"], registry=r)
        self.web_active = Gauge("btswarm_server_web_requests_active", "Web seed requests being answered",
                                registry=r)
        self.web_queue = Histogram("btswarm_server_web_queue_seconds", "Time a web seed request waited for a slot",
                                   buckets=(0.001, 0.01, 0.1, 0.5, 1, 2, 5, 10), registry=r)
