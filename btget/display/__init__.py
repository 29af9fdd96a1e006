"""What the user sees: the progress display, the result of a run, the catalog's tables."""
