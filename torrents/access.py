"""Who may read a dataset: the operators' [access] section, the one place for that policy.

Pure but for `load` and `in_use`, which read the configuration.

Every dataset is public unless the operators' `[access] restricted` names it:
an entry is a Rucio scope (`atlas`: every dataset named `atlas:NAME`) or a
DID pattern (`cms:Run2018*`, `*` wildcards in the name). A dataset whose name
is not `scope:name` (a site's directory dataset) is never restricted. With no
[access] section nothing is restricted and every part behaves as it did
before, for every client.

A restricted dataset is read with a WLCG bearer token (WLCG Common JWT
Profile) from one of `[access] issuers` (issuer URL → the audience its tokens
must carry for this federation) whose `storage.read` scope covers the
dataset's path. The path of dataset `scope:name` is `/scope/name`, as a
storage door lays out a Rucio scope: `storage.read:/atlas` reads every
dataset of scope atlas, `storage.read:/atlas/NAME` that one dataset,
`storage.read:/` everything. What a token's scope covers is decided here
(`covers`); whether a token is genuine, in torrents/tokens.py.

The repository, the tracker and bt-server read the same section (one file
for the federation's services), so they agree on what is restricted.
Restricting a scope changes no .torrent: info-hashes stay as they were.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, NamedTuple

from torrents.config import Seconds, load_section
from torrents.did import DID, parse_pattern
from torrents.errors import ConfigError, DatasetError

SECTION = "access"
READ = "storage.read"  # the WLCG scope that reads data
_SCOPE = re.compile(r"^[A-Za-z0-9_.\-]{1,25}$")  # a Rucio scope (torrents/did.py)


class Restriction(NamedTuple):
    """One `[access] restricted` entry: a scope and a name pattern (`*` for the whole scope)."""

    scope: str
    pattern: str

    def matches(self, name: str) -> bool:
        scope, sep, rest = name.partition(":")
        return bool(sep) and scope == self.scope and fnmatch.fnmatchcase(rest, self.pattern)

    def glob(self) -> str:
        """The same rule as an SQLite GLOB over the dataset's name (scope and pattern hold no GLOB specials
        but `*`)."""
        return f"{self.scope}:{self.pattern}"

    def __str__(self) -> str:
        return self.scope if self.pattern == "*" else f"{self.scope}:{self.pattern}"


def parse_restriction(text: str) -> Restriction:
    """`scope` or `scope:pattern` → Restriction; DatasetError naming what is wrong."""
    text = text.strip()
    if ":" not in text:
        if not _SCOPE.match(text):
            raise DatasetError(text, "not a Rucio scope (letters, digits, '_', '-', '.'; at most 25) "
                                     "nor a DID pattern (scope:name*)")
        return Restriction(text, "*")
    pattern = parse_pattern(text)
    return Restriction(pattern.scope, pattern.pattern)


@dataclass(frozen=True)
class AccessConfig:
    # Scopes (`atlas`) and DID patterns (`cms:Run2018*`) whose datasets only a token may read; none: all public.
    restricted: tuple[str, ...] = ()
    # Trusted token issuers: issuer URL (the tokens' `iss`, https) → the audience (`aud`) its tokens must carry
    # for this federation. A token from any other issuer is refused.
    issuers: Mapping[str, str] = field(default_factory=dict)
    # A PEM bundle trusted, besides the system's CAs, for the issuers' https (their keys are fetched there).
    ca_file: str = ""
    # Clock difference forgiven on `exp`, `nbf` and `iat`: the issuer's and the service's clocks are NTP-synced.
    leeway: Seconds = Seconds(60.0)
    # How long an issuer's keys (JWKS) are kept before they are fetched again: a key the issuer withdrew
    # (rotated after a leak) stops verifying tokens at most this long after.
    keys_lifetime: Seconds = Seconds(300.0)

    def __post_init__(self) -> None:
        for entry in self.restricted:
            try:
                parse_restriction(entry)
            except DatasetError as exc:
                raise ConfigError("restricted", str(exc)) from None
        for issuer, audience in self.issuers.items():
            if not issuer.startswith("https://"):
                raise ConfigError("issuers", f"{issuer}: an issuer is an https:// URL (its keys are fetched there)")
            if not audience:
                raise ConfigError("issuers", f"{issuer}: needs the audience its tokens carry for this federation")
        if self.keys_lifetime > 86400:
            raise ConfigError("keys_lifetime", "at most 1d: a withdrawn key must stop working")

    def unreadable(self) -> str | None:
        """What a service warns of when restricted datasets have no issuer (the peer wire's certificates may
        still serve them; the repository and the web seeds then refuse every token)."""
        if self.restricted and not self.issuers:
            return ("[access] restricted names datasets but [access] issuers is empty: no token can read them "
                    "from the repository or a web seed")
        return None

    @functools.cached_property
    def restrictions(self) -> tuple[Restriction, ...]:
        return tuple(parse_restriction(e) for e in self.restricted)

    def is_restricted(self, did: DID | str) -> bool:
        name = str(did)
        return any(r.matches(name) for r in self.restrictions)


NONE = AccessConfig()  # the default: nothing restricted


def load(explicit: str | os.PathLike | None = None, *, overrides: Mapping[str, Any] | None = None,
         environ: Mapping[str, str] | None = None) -> AccessConfig:
    """The [access] section of the configuration (file, then $BTSWARM_ACCESS_*, then `overrides`)."""
    return load_section(SECTION, AccessConfig, explicit, overrides=overrides, environ=environ)


_in_use: list[AccessConfig] = []  # this process's policy, set by its command (use) or read once when first asked


def use(config: AccessConfig) -> AccessConfig:
    """Make `config` this process's policy (a service's command calls it with what it read from its --config)."""
    _in_use[:] = [config]
    return config


def in_use() -> AccessConfig:
    """This process's policy: the one its command set, else [access] of the default config file and environment."""
    return _in_use[0] if _in_use else use(load())


def is_restricted(did: DID | str, config: AccessConfig | None = None) -> bool:
    """Whether only a token may read dataset `did` (a DID or a dataset name), by `config` or this process's
    policy (`in_use`)."""
    return (config or in_use()).is_restricted(did)


def dataset_path(did: DID | str) -> str:
    """The storage path a dataset is read at: `/scope/name` (a name that is no DID: `/name`)."""
    scope, sep, name = str(did).partition(":")
    return f"/{scope}/{name}" if sep else f"/{scope}"


def required_scope(did: DID | str) -> str:
    """The WLCG scope that reads a restricted dataset, as a refusal names it: `storage.read:/scope`."""
    scope, sep, _ = str(did).partition(":")
    return f"{READ}:/{scope}" if sep else f"{READ}:{dataset_path(did)}"


def read_paths(scopes: Iterable[str]) -> tuple[str, ...]:
    """The paths a token's `scope` claim (its space-separated items) lets it read, normalised
    (`storage.read:/atlas/` → `/atlas`; `storage.read` alone is `/`)."""
    paths = []
    for item in scopes:
        kind, sep, path = item.partition(":")
        if kind != READ:
            continue
        path = path if sep and path else "/"
        if not path.startswith("/") or any(p in ("..", ".") for p in path.split("/")):
            continue  # not a path a storage system would take: reads nothing
        paths.append("/" + path.strip("/") if path.strip("/") else "/")
    return tuple(paths)


def covers(paths: Iterable[str], did: DID | str) -> bool:
    """Whether read access to `paths` includes the dataset (a path covers itself and what lies under it)."""
    want = dataset_path(did)
    return any(p == "/" or want == p or want.startswith(p + "/") for p in paths)


def visible(config: AccessConfig, paths: Iterable[str], did: DID | str) -> bool:
    """Whether a reader holding `paths` (none without a token) may see the dataset at all."""
    return not config.is_restricted(did) or covers(paths, did)


def granted_globs(paths: Iterable[str]) -> tuple[str, ...]:
    """The dataset names `paths` read, as SQLite GLOBs over the name (for listings filtered in SQL):
    `/` → `*`, `/atlas` → `atlas:*`, `/atlas/NAME` → the name itself when it holds no GLOB special."""
    globs = []
    for p in paths:
        parts = p.strip("/").split("/")
        if p == "/":
            globs.append("*")
        elif len(parts) == 1 and _SCOPE.match(parts[0]):
            globs.append(f"{parts[0]}:*")
        elif len(parts) == 2 and _SCOPE.match(parts[0]) and not re.search(r"[*?\[\]]", parts[1]):
            globs.append(f"{parts[0]}:{parts[1]}")
    return tuple(globs)


def discovery_files(runtime_dir: str | None, uid: int) -> list[str]:
    """The token files WLCG Bearer Token Discovery reads when no variable names one, in order:
    `$XDG_RUNTIME_DIR/bt_u$UID` (`runtime_dir`, when set), then `/tmp/bt_u$UID`."""
    return ([f"{runtime_dir}/bt_u{uid}"] if runtime_dir else []) + [f"/tmp/bt_u{uid}"]
