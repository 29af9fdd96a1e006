"""Rucio data identifiers (DIDs): `scope:name`, and how one names a btswarm dataset.

A dataset read from Rucio is named `scope:name` everywhere in btswarm: the
site's farm, the .torrent's name, the repository's dataset name, and what a
physicist types (`bt-get scope:name`, as `rucio download` takes it). Two
scopes may hold the same name; the scope in the name keeps them apart. The
DID also travels as its two parts in the dataset record (`"did": {"scope",
"name"}`), so a reader never has to split a name to know it came from Rucio.

Accepted: what Rucio's generic schema accepts (scope: letters, digits,
`_ - .`, at most 25 characters; name: letters, digits, `. - _`, starting
with a letter or digit), without '/', which a one-component dataset name
cannot hold, and at most 255 characters together. Pure.
"""

from __future__ import annotations

import fnmatch
import re
from typing import NamedTuple

from torrents.errors import DatasetError

MAX_SCOPE = 25
_SCOPE = re.compile(r"^[A-Za-z0-9_.\-]{1,25}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]*$")
_PATTERN = re.compile(r"^[A-Za-z0-9._\-*]+$")


class DID(NamedTuple):
    scope: str
    name: str

    def __str__(self) -> str:
        return f"{self.scope}:{self.name}"

    def record(self) -> dict[str, str]:
        return {"scope": self.scope, "name": self.name}


def _split(text: str, what: str) -> tuple[str, str]:
    if not isinstance(text, str):
        raise DatasetError(repr(text), f"{what} is not a string")
    scope, sep, name = text.partition(":")
    if not sep:
        raise DatasetError(text, f"not a {what} (expected SCOPE:NAME)")
    if not _SCOPE.match(scope):
        raise DatasetError(text, f"bad scope {scope!r} (letters, digits, '_', '-', '.'; at most {MAX_SCOPE})")
    return scope, name


def parse_did(text: str) -> DID:
    """'scope:name' → DID, or DatasetError naming what is wrong."""
    scope, name = _split(text, "DID")
    if "/" in name:
        raise DatasetError(text, "a DID name with '/' cannot name a btswarm dataset")
    if not _NAME.match(name):
        raise DatasetError(text, f"bad DID name {name!r} (letters, digits, '.', '-', '_', starting with a "
                                 "letter or digit)")
    if len(text) > 255:
        raise DatasetError(text[:40] + "…", "DID longer than 255 characters (the longest dataset name)")
    return DID(scope, name)


def from_record(value: object) -> DID | None:
    """The `did` of a dataset record ({"scope", "name"}), checked; None when absent."""
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("scope"), str) or not isinstance(value.get("name"), str):
        raise DatasetError("did", f"expected {{\"scope\": ..., \"name\": ...}}, got {value!r}")
    return parse_did(f"{value['scope']}:{value['name']}")


def as_did(text: str) -> DID | None:
    """The DID a dataset name spells, or None when it is not one."""
    try:
        return parse_did(text)
    except DatasetError:
        return None


class DIDPattern(NamedTuple):
    """`scope:pattern` with `*` wildcards in the name, as Rucio's DID search takes them."""

    scope: str
    pattern: str

    @property
    def wildcard(self) -> bool:
        return "*" in self.pattern

    def matches(self, did: DID) -> bool:
        # Rucio's search runs SQL LIKE, where '_' matches any character too:
        # its answer is checked again here.
        return did.scope == self.scope and fnmatch.fnmatchcase(did.name, self.pattern)

    def __str__(self) -> str:
        return f"{self.scope}:{self.pattern}"


def parse_pattern(text: str) -> DIDPattern:
    """A DID, or a DID pattern like `data18_13TeV:data18_13TeV.00348895.*`."""
    scope, pattern = _split(text, "DID or DID pattern")
    if not pattern or not _PATTERN.match(pattern):
        raise DatasetError(text, f"bad name pattern {pattern!r} (letters, digits, '.', '-', '_', '*')")
    if "*" not in pattern:
        parse_did(text)
    return DIDPattern(scope, pattern)
