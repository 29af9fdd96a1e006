"""Reading from the swarm without downloading first: `bt-get --serve` and `btswarm://` for fsspec."""
