"""URL paths for a dataset and its files (the repository's, a web seed's), quoted once, the same way everywhere.

A dataset name may hold characters that mean something in a URL (`#`, `?`,
`%`, a space, non-ASCII): unquoted, `PUT .../a#b` reaches the repository as
`.../a` and the name in the path no longer matches the record's.
"""

from __future__ import annotations

from urllib.parse import quote


def quoted(name: str) -> str:
    """A dataset name as one URL path segment."""
    return quote(name, safe="")


def dataset_api(name: str) -> str:
    return f"/api/datasets/{quoted(name)}"


def dataset_page(name: str) -> str:
    return f"/datasets/{quoted(name)}"


def dataset_torrent(name: str) -> str:
    return f"/datasets/{quoted(name)}.torrent"


def lfn_path(lfn: str) -> str:
    """An LFN as URL path segments: each component quoted as a name is, '/' kept between them."""
    return "/".join(quote(part, safe="") for part in lfn.split("/"))


def web_seed_path(name: str, lfn: str) -> str:
    """A file's path under a BEP 19 base URL of a multi-file torrent: NAME/LFN, quoted."""
    return f"{quoted(name)}/{lfn_path(lfn)}"

