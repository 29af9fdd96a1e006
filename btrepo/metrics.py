"""The repository's Prometheus metrics, in its own registry (so two apps in one process do not clash)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.publishes = Counter("btswarm_repo_publishes_total", "Publish requests by result (created, new_version, "
                                 "conflict, partial, site_added, unchanged, invalid, unauthorized, refused)",
                                 ["result"], registry=self.registry)
        self.in_conflict = Gauge("btswarm_repo_datasets_in_conflict",
                                 "Datasets some site holds a replica of that disagrees with the served version",
                                 registry=self.registry)
        self.disputed = Gauge("btswarm_repo_datasets_disputed",
                              "Datasets whose replicas disagree with nothing to decide between them "
                              "(not served by name)", registry=self.registry)
        self.datasets = Gauge("btswarm_repo_datasets", "Datasets in the catalog", registry=self.registry)
        self.torrent_downloads = Counter("btswarm_repo_torrent_downloads_total", ".torrent files served",
                                         registry=self.registry)
        self.token_refusals = Counter("btswarm_repo_token_refusals_total", "Requests for members-only datasets "
                                      "refused (401: no token or a bad one, 403: another scope, 503: issuer away)",
                                      ["code"], registry=self.registry)
