"""Overrides for measuring a change without a release: environment variables that only the benchmarks
set (docs/benchmarks.md, "Measuring overrides"). They are not settings: no config key stands for them,
and a process that takes one says so at WARNING, once, so that one left set on a production site or T3
shows in its log."""

from __future__ import annotations

import logging
import os

from torrents.errors import ConfigError

log = logging.getLogger("btswarm.measuring")
_said: set[str] = set()

# bt-get without the site-share rules (btget/worker/siteshare.py): "off" for a benchmark's A/B run.
SITE_SHARE = "BTSWARM_BENCH_SITE_SHARE"


def override(name: str, what: str) -> str | None:
    """The value of measuring override `name` (None when unset or empty), said once at WARNING with
    `what` it changes."""
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    if name not in _said:
        _said.add(name)
        log.warning("$%s=%s %s: a benchmark's override, not for production", name, value, what)
    return value


def site_share() -> bool:
    """Whether bt-get applies the site-share rules: always, unless a benchmark turns them off."""
    value = override(SITE_SHARE, "turns the site-share rules off")
    if value not in (None, "on", "off"):
        raise ConfigError(f"${SITE_SHARE}", f"expected on or off, got {value!r}")
    return value != "off"
