"""A T3's shares: the dataset directories its users fetched whole and asked to share.

`bt-get --share` (through `bt-server share`) adds the verified directory
`DIR/NAME` here, with the info-hash it was fetched as; the daemon reads the
list at each scan beside its roots and manifests, so a share is prepared,
published and seeded on demand by the same code as a T2's datasets. Only
what is listed is shared: a T3's download directory also holds datasets
still arriving, or fetched in part, which must never be published.

The list is `<state>/shares.json`, rewritten whole (atomically, under a
lock: two bt-get may finish at once).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from torrents.dataset import validate_name
from torrents.errors import BtswarmError, DatasetError
from torrents.infohash import is_info_hash

FILE = "shares.json"


@dataclass(frozen=True)
class Share:
    name: str
    path: str  # absolute: DIR/NAME as bt-get wrote it
    info_hash: str | None = None  # as fetched: the site's build must give the same, or it is not published

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "info_hash": self.info_hash}


def parse(doc: Any, subject: str) -> list[Share]:
    """The shares document → Share list; anything malformed is an error naming the file."""
    entries = doc.get("shares") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise BtswarmError(subject, 'expected {"shares": [{"name", "path", "info_hash"}, ...]}')
    out = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not isinstance(e.get("name"), str) or not isinstance(e.get("path"), str):
            raise BtswarmError(subject, f"share {i}: expected an object with name and path")
        h = e.get("info_hash")
        if h is not None and not (isinstance(h, str) and is_info_hash(h)):
            raise BtswarmError(subject, f"share {i}: info_hash {str(h)[:60]!r} is not 40 hex characters")
        if not os.path.isabs(e["path"]):
            raise BtswarmError(subject, f"share {i}: path {e['path'][:200]!r} is not absolute")
        out.append(Share(e["name"], e["path"], h.lower() if h else None))
    return out


def with_share(shares: Sequence[Share], new: Share) -> list[Share]:
    """The list with `new` in it: a share of the same name is replaced (a newer version fetched)."""
    return sorted([s for s in shares if s.name != new.name] + [new], key=lambda s: s.name)


def check(new: Share) -> None:
    """A share must be a dataset directory with a dataset's name."""
    try:
        validate_name(new.name)
    except DatasetError as exc:
        raise BtswarmError(new.path, f"not a dataset directory ({exc.problem})") from None
    if not Path(new.path).is_dir():
        raise BtswarmError(new.path, "no such directory")


def load(state: str | os.PathLike) -> list[Share]:
    path = Path(state) / FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise BtswarmError(path, f"cannot read ({exc.strerror})") from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise BtswarmError(path, f"not JSON ({exc})") from None
    return parse(doc, str(path))


@contextlib.contextmanager
def _locked(state: Path) -> Iterator[None]:
    state.mkdir(parents=True, exist_ok=True)
    with open(state / f".{FILE}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def add(state: str | os.PathLike, new: Share) -> list[Share]:
    """Record `new` in the state's shares (replacing one of the same name); the list as it now is."""
    check(new)
    state = Path(state)
    with _locked(state):
        shares = with_share(load(state), new)
        tmp = state / f".{FILE}.tmp"
        tmp.write_text(json.dumps({"shares": [s.to_json() for s in shares]}, indent=1), encoding="utf-8")
        os.replace(tmp, state / FILE)
    return shares
