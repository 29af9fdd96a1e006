"""bt-repo: the federation's torrent repository (pages, search, JSON API, .torrent downloads).

A service, not part of the shared library: nothing else in `torrents`
imports it, and it imports no other service.
"""
