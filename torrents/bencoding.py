"""Bencoding (BEP 3) over bencode.py, with limits that make hostile input safe.

bencode.py decodes recursively and without bounds, so a 1 MB run of `l`
would exhaust the stack and a crafted file could make millions of objects.
`decode` first walks the input once, iteratively, enforcing size, depth and
token limits; only input that passes is handed to bencode.py. Strings stay
bytes: a .torrent's `pieces` is binary and names are decoded where needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bencodepy import Bencode, BencodeDecodeError

from torrents.errors import BencodeError

_CODEC = Bencode(encoding=None, dict_ordered=True, dict_ordered_sort=True)
_DIGITS = frozenset(b"0123456789")


@dataclass(frozen=True)
class Limits:
    max_size: int = 64 * 1024 * 1024
    max_depth: int = 32
    max_tokens: int = 2_000_000


DEFAULT_LIMITS = Limits()


def scan(data: bytes, limits: Limits = DEFAULT_LIMITS, subject: str = "bencode") -> None:
    """Check that `data` is one well-formed bencoded value within `limits`.

    Raises BencodeError naming the offset of the first problem.
    """
    n = len(data)
    if n > limits.max_size:
        raise BencodeError(subject, f"{n} bytes is over the limit of {limits.max_size}")
    if n == 0:
        raise BencodeError(subject, "empty input")
    pos = 0
    depth = 0
    tokens = 0
    while True:
        if pos >= n:
            raise BencodeError(subject, f"truncated at byte {pos}")
        tokens += 1
        if tokens > limits.max_tokens:
            raise BencodeError(subject, f"more than {limits.max_tokens} values")
        c = data[pos]
        if c in (0x6C, 0x64):  # 'l', 'd'
            depth += 1
            if depth > limits.max_depth:
                raise BencodeError(subject, f"nested deeper than {limits.max_depth} at byte {pos}")
            pos += 1
            continue
        if c == 0x65:  # 'e' closes a list or dict
            if depth == 0:
                raise BencodeError(subject, f"unexpected 'e' at byte {pos}")
            depth -= 1
            pos += 1
        elif c == 0x69:  # 'i'
            end = data.find(b"e", pos + 1)
            if end < 0:
                raise BencodeError(subject, f"unterminated integer at byte {pos}")
            digits = data[pos + 1:end]
            body = digits[1:] if digits[:1] == b"-" else digits
            if (not body or not set(body) <= _DIGITS or (body[:1] == b"0" and len(body) > 1)
                    or digits == b"-0" or len(body) > 64):
                raise BencodeError(subject, f"bad integer at byte {pos}")
            pos = end + 1
        elif c in _DIGITS:
            colon = data.find(b":", pos, pos + 21)
            if colon < 0 or not set(data[pos:colon]) <= _DIGITS:
                raise BencodeError(subject, f"bad string length at byte {pos}")
            if data[pos] == 0x30 and colon - pos > 1:
                raise BencodeError(subject, f"bad string length at byte {pos}")
            length = int(data[pos:colon])
            pos = colon + 1 + length
            if pos > n:
                raise BencodeError(subject, f"string at byte {colon + 1} runs past the end")
        else:
            raise BencodeError(subject, f"unexpected byte 0x{c:02x} at byte {pos}")
        if depth == 0:
            break
    if pos != n:
        raise BencodeError(subject, f"{n - pos} bytes of trailing data after byte {pos}")


def decode(data: bytes, limits: Limits = DEFAULT_LIMITS, subject: str = "bencode") -> Any:
    """Decode one bencoded value; strings come back as bytes, dicts keyed by bytes."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise BencodeError(subject, f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    scan(data, limits, subject)
    try:
        return _CODEC.decode(data)
    except (BencodeDecodeError, ValueError, TypeError) as exc:
        raise BencodeError(subject, f"not valid bencoding ({exc})") from None


def encode(value: Any) -> bytes:
    """Encode a value: int, bytes, str (as UTF-8), list/tuple, dict with str or bytes keys."""
    try:
        return _CODEC.encode(value)
    except (BencodeDecodeError, ValueError, TypeError) as exc:
        raise BencodeError("bencode", f"cannot encode {type(value).__name__} ({exc})") from None


def dict_value_span(data: bytes, key: bytes) -> tuple[int, int] | None:
    """Byte span of `key`'s value in the top-level dict of already-scanned `data`.

    The info-hash is the SHA1 of the info dict exactly as it appears in the
    file, so it must be sliced from the input, not re-encoded.
    """
    if data[:1] != b"d":
        return None
    pos = 1
    while data[pos:pos + 1] != b"e":
        colon = data.index(b":", pos)
        kend = colon + 1 + int(data[pos:colon])
        k = data[colon + 1:kend]
        vend = _skip(data, kend)
        if k == key:
            return kend, vend
        pos = vend
    return None


def _skip(data: bytes, pos: int) -> int:
    """End offset of the value starting at `pos` in scanned (well-formed) data."""
    depth = 0
    while True:
        c = data[pos]
        if c in (0x6C, 0x64):
            depth += 1
            pos += 1
            continue
        if c == 0x65:
            depth -= 1
            pos += 1
        elif c == 0x69:
            pos = data.index(b"e", pos) + 1
        else:
            colon = data.index(b":", pos)
            pos = colon + 1 + int(data[pos:colon])
        if depth == 0:
            return pos
