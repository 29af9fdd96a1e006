"""Logging set-up for entry points (libraries only get named loggers)."""

from __future__ import annotations

import logging
import sys


NOTICE = "btswarm.notice"  # lines for the operator at any verbosity: a daemon's start, its readiness


def notice() -> logging.Logger:
    return logging.getLogger(NOTICE)


def setup(verbosity: int = 0, name: str = "btswarm") -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    if verbosity < 2:
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    logging.getLogger(NOTICE).setLevel(logging.INFO)
