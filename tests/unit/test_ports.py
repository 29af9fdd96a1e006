"""torrents/procs.PortPicker: the listeners of one `btswarm up` never get the same port."""

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
