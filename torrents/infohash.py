"""Info-hashes as text: parsed and written the one way every part uses (40 lowercase hex, v1 SHA1)."""

from __future__ import annotations

import re

from torrents.errors import BtswarmError

_HEX40 = re.compile(r"[0-9a-fA-F]{40}")


def is_info_hash(text: object) -> bool:
    """Whether `text` is 40 hexadecimal characters (either case)."""
    return isinstance(text, str) and _HEX40.fullmatch(text) is not None


def parse_info_hash(text: object, subject: str = "info_hash") -> str:
    """40 hex characters → the lowercase form; BtswarmError naming `subject` otherwise."""
    if not is_info_hash(text):
        shown = text[:60] if isinstance(text, str) else text
        raise BtswarmError(subject, f"expected 40 hexadecimal characters, got {shown!r}")
    return text.lower()  # type: ignore[union-attr]
