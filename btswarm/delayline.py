"""The delay line's decisions: how long each packet is held, and in which order packets leave. Pure.

The model (btswarm.shaping): each delayed address's link adds `rtt[A]` to
every round trip through it, half each way, so a packet from A to B is
held `(rtt[A] + rtt[B]) / 2`; an address without a delay adds nothing.
Every packet of a conversation, either way, is held the same time, so a
first-in first-out queue per delay value keeps each flow in order (TCP
would take a reordered packet for a loss), and the queues' heads are all
that need comparing to find the next packet due.

The I/O side (the TUN device, the loop) is btswarm.tundelay.
"""

from __future__ import annotations

import socket
from collections import deque
from collections.abc import Mapping

IPV4 = 4
# Packets due within this much of now leave now: the loop's poll sleeps in
# whole milliseconds (rounded up), so waking half a millisecond early makes
# the error on a packet's delay ±0.5 ms instead of 0 to +1 ms.
EARLY = 0.0005


class DelayTable:
    """(source, destination) of an IPv4 packet → the time it is held, from each address's round trip."""

    def __init__(self, rtts: Mapping[str, float]) -> None:
        self._rtt = {socket.inet_aton(address): rtt for address, rtt in rtts.items()}
        self._pairs: dict[bytes, float] = {}

    def one_way(self, src: str, dst: str) -> float:
        return self._of(socket.inet_aton(src) + socket.inet_aton(dst))

    def _of(self, pair: bytes) -> float:
        held = self._pairs.get(pair)
        if held is None:
            held = self._pairs[pair] = (self._rtt.get(pair[:4], 0.0) + self._rtt.get(pair[4:], 0.0)) / 2
        return held

    def of_packet(self, packet: bytes, offset: int = 0) -> float | None:
        """How long to hold `packet` (an IP packet as a TUN device gives it, from `offset`: after its
        virtio-net header); None: not IPv4, drop it."""
        if len(packet) < offset + 20 or packet[offset] >> 4 != IPV4:
            return None
        return self._of(packet[offset + 12:offset + 20])


class Schedule:
    """Packets held until due: first in, first out per delay value."""

    def __init__(self) -> None:
        self._lines: dict[float, deque[tuple[float, bytes]]] = {}
        self.held = 0  # packets
        self.held_bytes = 0

    def push(self, now: float, delay: float, packet: bytes) -> None:
        line = self._lines.get(delay)
        if line is None:
            line = self._lines[delay] = deque()
        line.append((now + delay, packet))
        self.held += 1
        self.held_bytes += len(packet)

    def next_due(self) -> float | None:
        """When the next packet is due; None when nothing is held."""
        heads = [line[0][0] for line in self._lines.values() if line]
        return min(heads) if heads else None

    def pop_due(self, now: float, early: float = EARLY) -> list[tuple[float, bytes]]:
        """(due, packet) for the packets due by `now + early`, in the order they are due (a line's own
        order kept)."""
        out: list[tuple[float, bytes]] = []
        for line in self._lines.values():
            while line and line[0][0] <= now + early:
                out.append(line.popleft())
        if len(out) > 1:
            out.sort(key=lambda item: item[0])  # stable: equal due times keep their line's order
        self.held -= len(out)
        self.held_bytes -= sum(len(p) for _, p in out)
        return out
