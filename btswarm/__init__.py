"""btswarm."""
