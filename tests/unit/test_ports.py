"""torrents/procs: free ports that the kernel does not hand out by itself, never the same one twice to one
`btswarm up`."""

from __future__ import annotations

import socket

from torrents import procs


def test_a_port_the_kernel_picks_twice_is_handed_out_once(monkeypatch):
    # Nothing listens on a picked port until its service starts, so the kernel may pick it again; it did
    # once for the tracker and the repository of one federation (the repository then could not listen).
    # The kernel's choice cannot be forced: the picks are given here.
    picks = iter([40000, 40000, 40000, 40001])
    monkeypatch.setattr(procs, "free_port", lambda host="127.0.0.1": next(picks))
    port = procs.PortPicker()
    assert [port(), port()] == [40000, 40001]


def test_many_picks_are_distinct_free_ports():
    port = procs.PortPicker()
    picked = [port("127.0.0.1") for _ in range(200)]
    assert len(set(picked)) == 200
    with socket.socket() as s:
        s.bind(("127.0.0.1", picked[-1]))  # still free


def test_free_ports_are_outside_the_range_the_kernel_picks_from():
    # A port the kernel gives an outgoing connection between our pick and our bind is lost to us.
    low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    picked = {procs.free_port(host) for host in ("127.0.0.1", "127.0.0.2", "::1") for _ in range(50)}
    assert not any(low <= p <= high for p in picked), sorted(p for p in picked if low <= p <= high)


def test_a_port_bound_on_every_address_is_not_picked(monkeypatch):
    with socket.socket(socket.AF_INET6) as held:
        held.bind(("::", 0))
        taken = held.getsockname()[1]
        free = procs.free_port("127.0.0.2")
        monkeypatch.setattr(procs, "_outside_ephemeral", lambda: [taken, free])
        assert {procs.free_port("127.0.0.2") for _ in range(20)} == {free}
