"""Probe: several TCP flows from one shaped address, and how long each goes without a byte.

    sudo .venv/bin/python scripts/probe_lockout.py [--rate 8mbit] [--flows 4] [--size 2M] [--runs 3]
        [--mtu 65536 9000]

For each MTU, a private network namespace shaped as `btswarm up --site-link RATE --link-mtu MTU` would be
(btswarm/shaping.py: an htb class per source address, a bfifo of at least four 64 KiB packets) holds one
sender on 127.0.0.2 (the site) and FLOWS receivers on 127.0.0.101, each reading SIZE bytes at once. Printed
per run: the wall time against the link's (FLOWS x SIZE / RATE), each flow's longest silence (median and
worst) and the spread of the flows' times. A flow silent for 30 s is reported as locked out and the run
stops there.

What it showed (2026-12-04, 8 Mbit/s, 4 flows of 2 MiB, 7 runs each): lo's own MTU 65536, each flow's
longest silence 1.5-3.7 s (medians 1.6-2.2 s) and, in a first version of this probe, one flow without a
byte for 38 s; MTU 9000, 0.22-1.27 s (medians 0.26-0.32 s); the link full in both (8.4-8.5 s, link 8.39 s).
A 64 KiB loopback packet is the unit the queue drops, so a queue of a few packets holds one or two per
flow: a lost one is noticed only by a retransmission timeout, which backs off while the other flows keep
the queue full.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from btswarm import netns, shaping  # noqa: E402
from torrents.units import parse_size  # noqa: E402

SENDER, RECEIVER = "127.0.0.2", "127.0.0.101"
LOCKED_OUT = 30.0  # s without a byte: reported, and the run given up


def one_run(port: int, flows: int, size: int) -> tuple[float, list[tuple[float, float]], list[int]]:
    """(wall s, [(longest silence s, time s)] of the flows that finished, [flows silent LOCKED_OUT s])."""
    done: dict[int, tuple[float, float]] = {}
    last = [time.monotonic()] * flows

    def fetch(i: int) -> None:
        with socket.socket() as s:
            s.bind((RECEIVER, 0))
            s.connect((SENDER, port))
            t0 = time.monotonic()
            got, gap = 0, 0.0
            while got < size:
                data = s.recv(1 << 20)
                if not data:
                    break
                now = time.monotonic()
                gap, last[i], got = max(gap, now - last[i]), now, got + len(data)
            done[i] = (gap, time.monotonic() - t0)

    threads = [threading.Thread(target=fetch, args=(i,), daemon=True) for i in range(flows)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    while alive := [t for t in threads if t.is_alive()]:
        alive[0].join(0.2)
        locked = [i for i, t in enumerate(threads) if t.is_alive() and time.monotonic() - last[i] > LOCKED_OUT]
        if locked:
            return time.monotonic() - t0, list(done.values()), locked
    return time.monotonic() - t0, list(done.values()), []


def probe(rate: int, mtu: int, flows: int, size: int, runs: int) -> None:
    links = [shaping.Link(SENDER, rate, "site1"), shaping.Link(RECEIVER, 100 * 10**6, "client")]
    name = netns.unique_name("btswarm-probe")
    netns.create(name, shaping.mtu_commands(mtu) + shaping.tc_commands(links))
    payload = b"x" * size
    try:
        with netns.entered(name):  # the sockets are made in the namespace; the threads only use them
            server = socket.create_server((SENDER, 0))
            port = server.getsockname()[1]

            def serve() -> None:
                while True:
                    try:
                        conn, _ = server.accept()
                    except OSError:
                        return
                    threading.Thread(target=lambda c=conn: (c.sendall(payload), c.close()), daemon=True).start()

            threading.Thread(target=serve, daemon=True).start()
            for run in range(runs):
                wall, finished, locked = one_run(port, flows, size)
                ideal = flows * size * 8 / rate
                gaps = sorted(g for g, _ in finished)
                times = sorted(t for _, t in finished)
                if locked:
                    print(f"mtu {mtu}: run {run + 1}: flows {locked} without a byte for {LOCKED_OUT:g} s "
                          f"(locked out); {len(finished)} of {flows} done")
                    break
                print(f"mtu {mtu}: run {run + 1}: wall {wall:.2f} s (link {ideal:.2f} s); longest silence per "
                      f"flow median {statistics.median(gaps):.2f} s, worst {gaps[-1]:.2f} s; flows done "
                      f"{times[0]:.2f}-{times[-1]:.2f} s")
            server.close()
    finally:
        netns.delete(name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", default="8mbit")
    ap.add_argument("--flows", type=int, default=4)
    ap.add_argument("--size", default="2M", help="bytes each flow reads (2M, 500K)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mtu", type=int, nargs="+", default=[shaping.LO_MTU, shaping.JUMBO_MTU])
    a = ap.parse_args()
    netns.require("probe_lockout")
    for mtu in a.mtu:
        probe(shaping.parse_rate(a.rate), mtu, a.flows, parse_size(a.size), a.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
