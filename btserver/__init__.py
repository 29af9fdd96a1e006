"""btserver."""
