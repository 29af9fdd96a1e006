"""btget."""
