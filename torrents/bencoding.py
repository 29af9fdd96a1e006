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

    Besides size, depth and token limits, dictionary keys must be strings,
    each with a value, and appear once per dictionary: bencode.py would keep
    the last of two `info` keys while the info-hash is taken from the first.
    Raises BencodeError naming the offset of the first problem.
    """
    n = len(data)
    if n > limits.max_size:
        raise BencodeError(subject, f"{n} bytes is over the limit of {limits.max_size}")
    if n == 0:
        raise BencodeError(subject, "empty input")
    pos = 0
    tokens = 0
    # One entry per open container: None for a list; for a dict, the keys seen
    # so far and whether the next item is a key.
    stack: list[_DictState | None] = []
    while True:
        if pos >= n:
            raise BencodeError(subject, f"truncated at byte {pos}")
        tokens += 1
        if tokens > limits.max_tokens:
            raise BencodeError(subject, f"more than {limits.max_tokens} values")
        here = pos
        c = data[pos]
        top = stack[-1] if stack else None
        wants_key = top is not None and top.wants_key
        if wants_key and c != 0x65 and c not in _DIGITS:
            raise BencodeError(subject, f"dictionary key at byte {pos} is not a string")
        if c in (0x6C, 0x64):  # 'l', 'd'
            if len(stack) >= limits.max_depth:
                raise BencodeError(subject, f"nested deeper than {limits.max_depth} at byte {pos}")
            stack.append(_DictState() if c == 0x64 else None)
            pos += 1
            continue
        if c == 0x65:  # 'e' closes a list or dict
            if not stack:
                raise BencodeError(subject, f"unexpected 'e' at byte {pos}")
            if top is not None and not top.wants_key:
                raise BencodeError(subject, f"dictionary key without a value at byte {pos}")
            stack.pop()
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
            start = colon + 1
            pos = start + length
            if pos > n:
                raise BencodeError(subject, f"string at byte {start} runs past the end")
            if wants_key:
                key = data[start:pos]
                if key in top.keys:  # type: ignore[union-attr]
                    raise BencodeError(subject, f"duplicate dictionary key {key!r} at byte {here}")
                top.keys.add(key)  # type: ignore[union-attr]
        else:
            raise BencodeError(subject, f"unexpected byte 0x{c:02x} at byte {pos}")
        if not stack:
            break
        if stack[-1] is not None:  # a key or a value of the innermost dict is complete
            stack[-1].wants_key = not stack[-1].wants_key
    if pos != n:
        raise BencodeError(subject, f"{n - pos} bytes of trailing data after byte {pos}")


class _DictState:
    __slots__ = ("keys", "wants_key")

    def __init__(self) -> None:
        self.keys: set[bytes] = set()
        self.wants_key = True


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
    except KeyError as exc:
        # bencode.py signals an unsupported type (float, None, set) with KeyError(type)
        culprit = exc.args[0] if exc.args and isinstance(exc.args[0], type) else type(value)
        raise BencodeError("bencode", f"cannot encode a value of type {culprit.__name__}") from None
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
