"""Human units: sizes and durations, parsed and shown."""

from __future__ import annotations

import re

from torrents.errors import BtswarmError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h|d)?\s*$")
_SCALE = {"ms": 0.001, "s": 1, None: 1, "m": 60, "min": 60, "h": 3600, "d": 86400}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:([kmgtp])(?:ib?|b)?|b)?\s*$", re.I)


def parse_duration(text: str | int | float) -> float:
    """'90', '90s', '10m', '1.5h', '2d' → seconds."""
    if isinstance(text, (int, float)):
        if not text >= 0:  # also refuses NaN
            raise BtswarmError(text, "duration is negative" if text < 0 else "not a duration")
        return float(text)
    m = _DURATION.match(text)
    if not m:
        if _DURATION.match(text.strip().lstrip("-")):
            raise BtswarmError(text, "duration is negative")
        raise BtswarmError(text, "not a duration (examples: 30, 30s, 10m, 2h)")
    return float(m.group(1)) * _SCALE[m.group(2)]


def parse_size(text: str | int) -> int:
    """'512', '4k', '16MiB', '2G' → bytes (binary multiples)."""
    if isinstance(text, int):
        if text < 0:
            raise BtswarmError(text, "size is negative")
        return text
    m = _SIZE.match(text)
    if not m:
        raise BtswarmError(text, "not a size (examples: 512, 256K, 16MiB, 4G)")
    unit = (m.group(2) or "").lower()
    power = " kmgtp".index(unit) if unit else 0
    return int(float(m.group(1)) * 1024 ** power)


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:([kmgt])?(bit|bps|b/s|ib/s|ib|b|/s)?)\s*$", re.I)


def parse_byte_rate(text: str | int) -> int:
    """A transfer rate → bytes per second. Bits as tc and network people write them, in powers
    of 1000 ('400mbit', '1gbit', '100mbps'); bytes as sizes are written here, in powers of 1024
    ('50MB/s', '50MiB/s', '50M', '512k'); a bare number is bytes per second."""
    if isinstance(text, int):
        if text < 0:
            raise BtswarmError(text, "rate is negative")
        return text
    m = _RATE.match(text)
    if not m:
        raise BtswarmError(text, "not a rate (examples: 50MB/s, 400mbit, 2G, 0 for no limit)")
    number, prefix, unit = float(m.group(1)), (m.group(2) or "").lower(), (m.group(3) or "").lower()
    power = " kmgt".index(prefix) if prefix else 0
    if unit in ("bit", "bps"):
        return int(number * 1000 ** power / 8)
    return int(number * 1024 ** power)


def human_size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"


def human_rate(bytes_per_s: float) -> str:
    return human_size(bytes_per_s) + "/s"


def human_duration(seconds: float) -> str:
    if seconds != seconds or seconds == float("inf"):
        return "--:--"
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"
