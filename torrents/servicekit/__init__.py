"""The service kit: what the deployables share beyond the pure core.

`web` (aiohttp: errors to HTTP in one place, signed requests, Prometheus
metrics, running an app) and `ltsession` (libtorrent session settings).
Importing this package imports neither; each module is imported on use.
"""
