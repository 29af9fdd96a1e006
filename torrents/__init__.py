"""btswarm's shared library: what every part needs, and nothing that needs a part.

Importing this package imports neither aiohttp nor libtorrent; the modules
that wrap them (`torrents.web`, `torrents.ltsession`) are imported on use.
The bt-repo service lives in `torrents.repo` and is not part of the library.
"""

__version__ = "0.1.0"
