"""torrents.units: sizes and durations, parsed and shown."""

from __future__ import annotations

import math

import pytest

from torrents.errors import BtswarmError
from torrents.units import human_duration, human_rate, human_size, parse_duration, parse_size


@pytest.mark.parametrize("text, seconds", [
    ("90", 90.0), ("90s", 90.0), (" 90 s ", 90.0), ("10m", 600.0), ("10min", 600.0), ("1.5h", 5400.0),
    ("2d", 172800.0), ("250ms", 0.25), ("0", 0.0), (30, 30.0), (2.5, 2.5),
])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)
    assert isinstance(parse_duration(text), float)


@pytest.mark.parametrize("text, expected", [
    ("", ": not a duration (examples: 30, 30s, 10m, 2h)"),
    ("ten", "ten: not a duration (examples: 30, 30s, 10m, 2h)"),
    ("-5s", "-5s: duration is negative"),
    ("5 weeks", "5 weeks: not a duration (examples: 30, 30s, 10m, 2h)"),
    ("1e3", "1e3: not a duration (examples: 30, 30s, 10m, 2h)"),
    (-1, "-1: duration is negative"),
    (math.nan, "nan: not a duration"),
])
def test_bad_durations(text, expected):
    with pytest.raises(BtswarmError) as info:
        parse_duration(text)
    assert str(info.value) == expected


@pytest.mark.parametrize("text, size", [
    ("512", 512), ("512b", 512), ("4k", 4096), ("4K", 4096), ("256KiB", 256 << 10), ("16MiB", 16 << 20),
    ("16 mb", 16 << 20), ("2G", 2 << 30), ("1.5K", 1536), ("1t", 1 << 40), ("1PiB", 1 << 50), (0, 0), (123, 123),
])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text, expected", [
    ("", ": not a size (examples: 512, 256K, 16MiB, 4G)"),
    ("big", "big: not a size (examples: 512, 256K, 16MiB, 4G)"),
    ("3i", "3i: not a size (examples: 512, 256K, 16MiB, 4G)"),
    ("4x", "4x: not a size (examples: 512, 256K, 16MiB, 4G)"),
    ("-4k", "-4k: not a size (examples: 512, 256K, 16MiB, 4G)"),
    ("4 EiB", "4 EiB: not a size (examples: 512, 256K, 16MiB, 4G)"),
    (-1, "-1: size is negative"),
])
def test_bad_sizes(text, expected):
    with pytest.raises(BtswarmError) as info:
        parse_size(text)
    assert str(info.value) == expected


@pytest.mark.parametrize("n, text", [
    (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (300 << 20, "300.0 MiB"),
    (25 << 30, "25.0 GiB"), (3 << 40, "3.0 TiB"), (2048 << 40, "2048.0 TiB"),
])
def test_human_size(n, text):
    assert human_size(n) == text


def test_human_rate():
    assert human_rate(5 << 20) == "5.0 MiB/s"
    assert human_rate(0) == "0 B/s"


@pytest.mark.parametrize("seconds, text", [
    (0, "0:00"), (59.4, "0:59"), (61, "1:01"), (3599, "59:59"), (3600, "1:00:00"), (90061, "25:01:01"),
    (math.inf, "--:--"), (math.nan, "--:--"),
])
def test_human_duration(seconds, text):
    assert human_duration(seconds) == text


def test_sizes_round_trip_through_human_form():
    for n in (1 << 10, 256 << 10, 16 << 20, 4 << 30):
        value, unit = human_size(n).split()
        assert parse_size(value + unit) == n
