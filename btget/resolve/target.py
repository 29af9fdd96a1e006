"""What the user asked for: a dataset NAME, a FILE.torrent, an http(s) URL or a magnet (pure).

`classify` decides from the text alone, plus a predicate saying whether a
path names an existing file (passed in so this module does no I/O): a
local file wins over a dataset name of the same spelling, because a
physicist who typed `./x.torrent` or `x.torrent` means the file.
"""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from dataclasses import dataclass
from typing import Callable, Literal
from urllib.parse import parse_qs, urljoin, urlsplit

from torrents import did as dids
from torrents.dataset import validate_name
from torrents.errors import DatasetError
from torrents.infohash import is_info_hash

from torrents.errors import UsageError

Kind = Literal["name", "file", "url", "magnet"]
_BASE32 = re.compile(r"^[A-Za-z2-7]{32}$")


@dataclass(frozen=True)
class Target:
    kind: Kind
    value: str  # the name, the path, the URL or the magnet URI as typed
    info_hash: str | None = None  # magnets: 40 lowercase hex
    display_name: str | None = None  # magnets: the dn= parameter
    peers: tuple[str, ...] = ()  # magnets: x.pe= parameters (BEP 9)


def classify(text: str, is_file: Callable[[str], bool] = lambda _p: False) -> Target:
    """Classify TARGET; raise UsageError when it is none of the four kinds."""
    if not text or not text.strip():
        raise UsageError("TARGET", "is empty")
    lowered = text.lower()
    if lowered.startswith("magnet:"):
        return parse_magnet(text)
    if lowered.startswith(("http://", "https://")):
        parts = urlsplit(text)
        if not parts.hostname:
            raise UsageError(text, "URL has no host")
        return Target("url", text)
    if is_file(text):
        return Target("file", text)
    if lowered.endswith(".torrent") or "/" in text:
        raise UsageError(text, "no such .torrent file")
    try:
        validate_name(text)
    except DatasetError as exc:
        raise UsageError(text, f"not a dataset name ({exc.problem})") from None
    return Target("name", text)


def parse_magnet(uri: str) -> Target:
    """A BitTorrent v1 magnet URI → Target with its info-hash, name, trackers and peers."""
    query = uri.split("?", 1)[1] if "?" in uri else ""
    params = parse_qs(query, keep_blank_values=False)
    info_hash = None
    for xt in params.get("xt", []):
        if xt.lower().startswith("urn:btih:"):
            info_hash = _btih(xt[len("urn:btih:"):], uri)
            break
    if info_hash is None:
        raise UsageError("magnet", "no xt=urn:btih: info-hash (only BitTorrent v1 magnets are supported)")
    names = params.get("dn", [])
    return Target("magnet", uri, info_hash=info_hash, display_name=names[0] if names else None,
                  peers=tuple(params.get("x.pe", [])))


def _btih(text: str, uri: str) -> str:
    if is_info_hash(text):
        return text.lower()
    if _BASE32.match(text):
        return base64.b32decode(text.upper()).hex()
    raise UsageError("magnet", f"bad info-hash {text!r} (expected 40 hex or 32 base32 characters)")


def placement(torrent_name: str, record: dict | None, scope_subdir: bool) -> tuple[tuple[str, ...], str]:
    """Where a dataset lands below DIR: (subdirectories, folder), as `rucio download` lays a DID out.

    A dataset the repository knows by a Rucio DID (`record["did"]`; its name
    is then `scope:name`) goes to DIR/name/, or DIR/scope/name/ with
    --scope-subdir; any other to DIR/<torrent name>/. The torrent (and its
    info-hash) is the same either way: only the directory on disk differs.
    """
    try:
        did = dids.from_record((record or {}).get("did"))
    except DatasetError as exc:
        raise UsageError(torrent_name, f"the repository gives a bad DID ({exc.problem})") from None
    if did is None or str(did) != torrent_name:
        if scope_subdir:
            raise UsageError("--scope-subdir", f"{torrent_name} is not a dataset from Rucio "
                                               "(the repository gives it no DID)")
        return (), torrent_name
    return ((did.scope,) if scope_subdir else ()), did.name


TORRENT_TYPE = "application/x-bittorrent"


def not_a_torrent(data: bytes) -> str | None:
    """Why these bytes cannot be a .torrent at a glance (None: they may be one), said as a user sees it."""
    if data.startswith(b"d"):
        return None  # a bencoded dictionary: metainfo.parse says what else may be wrong
    head = data[:512].lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html")) or b"<html" in head:
        return "an HTML page, not a .torrent"
    if not data:
        return "empty, not a .torrent"
    try:
        first = data[:200].decode("utf-8").splitlines()[0]
    except (UnicodeDecodeError, IndexError):
        return "not a .torrent (binary data that is not bencoded)"
    return f"not a .torrent (a text file starting {first[:40]!r})"


class _AlternateLink(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if self.href is None and tag == "link" and (a.get("rel") or "").lower() == "alternate" \
                and (a.get("type") or "").lower() == TORRENT_TYPE and a.get("href"):
            self.href = a["href"]


def torrent_link(page: bytes, url: str) -> str | None:
    """The .torrent an HTML page names for itself (a repository's dataset page:
    <link rel="alternate" type="application/x-bittorrent" href=...>), as an absolute URL."""
    parser = _AlternateLink()
    parser.feed(page[:1_000_000].decode("utf-8", "replace"))
    return urljoin(url, parser.href) if parser.href else None
