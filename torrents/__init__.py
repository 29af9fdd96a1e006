"""btswarm's shared library: what every part needs, and nothing that needs a part.

The pure core (errors, bencoding, metainfo, build, dataset, config, auth, ...)
imports neither aiohttp nor libtorrent. The service kit, `torrents.servicekit`
(aiohttp helpers, Prometheus, libtorrent session settings), is what the
deployables share on top of it; only services import it.
"""

__version__ = "0.1.0"
