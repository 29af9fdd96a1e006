"""Which datasets are members-only: `[access] restricted`, a list of Rucio scopes (docs/deploy-site.md).

Minimal on purpose (the peer wire needs only this question answered, in one place): the token side of
issue 45 owns the rest of this module (issuers, audiences, token checks). A dataset named `scope:name`
is restricted when its scope is listed; a name without a scope (a directory dataset) is public. Pure.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from torrents.config import load_section
from torrents.errors import ConfigError


@dataclass(frozen=True)
class AccessConfig:
    restricted: tuple[str, ...] = ()  # Rucio scopes whose datasets are for members only

    def __post_init__(self) -> None:
        parse_restricted(self.restricted)

    def is_restricted(self, did: str) -> bool:
        return is_restricted(did, self.restricted)


def load(explicit: str | os.PathLike | None = None, *, overrides: Mapping[str, Any] | None = None) -> AccessConfig:
    """[access] of the configuration file ($BTSWARM_ACCESS_RESTRICTED: a comma list)."""
    return load_section("access", AccessConfig, explicit, overrides=overrides)


def parse_restricted(value: str | Iterable[str]) -> frozenset[str]:
    """`[access] restricted` as a set of scopes: a TOML list or a comma-separated string (the environment)."""
    items = value.split(",") if isinstance(value, str) else list(value)
    scopes = frozenset(s.strip() for s in items if s.strip())
    for s in scopes:
        if ":" in s or "/" in s or " " in s:
            raise ConfigError("restricted", f"{s!r} is not a Rucio scope")
    return scopes


def is_restricted(did: str, restricted_scopes: Iterable[str]) -> bool:
    """True when dataset `did` (`scope:name`) is in a restricted scope."""
    scope, sep, _ = did.partition(":")
    return bool(sep) and scope in set(restricted_scopes)
