"""The parent's run: the workers started, every event through runstate.step, its decisions carried out,
the dataset finished and handed over."""
