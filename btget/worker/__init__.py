"""One worker process: a libtorrent session fetching one share, and its parts (the steering core among them)."""
