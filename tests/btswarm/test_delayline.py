"""The delay line's decisions (pure): how long a packet is held, and the order packets leave in."""

from __future__ import annotations

import socket

import pytest

from btswarm.delayline import DelayTable, Schedule


def ipv4(src: str, dst: str, payload: bytes = b"") -> bytes:
    """A minimal IPv4 header (what the TUN device gives): version 4, addresses at 12..20."""
    return bytes([0x45]) + bytes(11) + socket.inet_aton(src) + socket.inet_aton(dst) + payload


TABLE = DelayTable({"127.0.0.2": 0.040, "127.0.0.3": 0.100})


@pytest.mark.parametrize("src, dst, held", [
    ("127.0.0.2", "127.0.0.101", 0.020),  # half of site1's round trip each way: 40 ms there and back
    ("127.0.0.101", "127.0.0.2", 0.020),
    ("127.0.0.2", "127.0.0.3", 0.070),  # both delayed: (40 + 100) / 2, a round trip of 140 ms
    ("127.0.0.1", "127.0.0.101", 0.0),  # neither: not held
])
def test_a_packet_is_held_half_the_sum_of_both_ends_round_trips(src, dst, held):
    assert TABLE.one_way(src, dst) == pytest.approx(held)
    assert TABLE.of_packet(ipv4(src, dst, b"x" * 100)) == pytest.approx(held)


@pytest.mark.parametrize("packet", [bytes([0x60]) + bytes(39), b"\x45" * 10, b""])
def test_what_is_not_ipv4_is_not_held_but_dropped(packet):
    assert TABLE.of_packet(packet) is None


def test_packets_leave_when_due_and_in_order_within_a_delay():
    s = Schedule()
    s.push(0.000, 0.020, b"a1")
    s.push(0.001, 0.070, b"b1")
    s.push(0.002, 0.020, b"a2")
    s.push(0.030, 0.020, b"a3")  # due at 0.050, before b1 (0.071) although pushed after it
    assert s.held == 4 and s.held_bytes == 8
    assert s.next_due() == pytest.approx(0.020)
    assert s.pop_due(0.010) == []
    assert [p for _, p in s.pop_due(0.0221, early=0)] == [b"a1", b"a2"]
    assert s.next_due() == pytest.approx(0.050)
    assert [p for _, p in s.pop_due(1.0)] == [b"a3", b"b1"]
    assert s.next_due() is None and s.held == 0 and s.held_bytes == 0


def test_a_packet_due_within_half_a_millisecond_leaves_now():
    """The loop sleeps in whole milliseconds, rounded up: it wakes EARLY before the due time and sends."""
    s = Schedule()
    s.push(0.0, 0.020, b"p")
    assert s.pop_due(0.0194) == [] and [p for _, p in s.pop_due(0.0196)] == [b"p"]


def test_equal_due_times_keep_each_lines_order():
    s = Schedule()
    for i in range(5):
        s.push(0.0, 0.010, bytes([i]))
    assert [p for _, p in s.pop_due(1.0)] == [bytes([i]) for i in range(5)]
