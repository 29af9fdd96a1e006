"""Overrides for measuring a change without a release: environment variables that only the benchmarks
set (docs/benchmarks.md, "Measuring overrides"). They are not settings: no config key stands for them,
and a process that takes one says so at WARNING, once, so that one left set on a production site or T3
shows in its log."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from torrents.errors import ConfigError

log = logging.getLogger("btswarm.measuring")
_said: set[str] = set()

# bt-get without the site-share rules (btget/worker/siteshare.py): "off" for a benchmark's A/B run.
SITE_SHARE = "BTSWARM_BENCH_SITE_SHARE"
# JSON objects of libtorrent settings added to every session's pack (torrents/servicekit/ltsession.py):
# the seeds' (bt-server) and bt-get's apart.
LT_SEED, LT_GET = "BTSWARM_LT_SEED_SETTINGS", "BTSWARM_LT_GET_SETTINGS"


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


def libtorrent_settings(seeding: bool) -> dict[str, Any]:
    """The libtorrent settings a benchmark adds to a seed's session (`seeding`) or to bt-get's; {} when none."""
    name = LT_SEED if seeding else LT_GET
    text = os.environ.get(name, "").strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"${name}", f"not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ConfigError(f"${name}", "not a JSON object of libtorrent settings")
    override(name, "overrides libtorrent's settings " + ", ".join(f"{k}={v!r}" for k, v in sorted(value.items())))
    return value
