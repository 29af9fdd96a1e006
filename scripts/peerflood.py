#!/usr/bin/env python3
"""Flood a BitTorrent peer port (a site's) with what a hostile or broken peer sends. Loopback only.

    python scripts/peerflood.py 127.0.0.2:6881 [--connects 1000] [--idle 200] [--handshakes 5000]
                                [--rate 1000] [--hold 10] [--deadline 60]

At once: `--idle` connections opened and held without a byte sent (a
peer that connects and never says hello) for `--hold` seconds, or until
the port closes them; `--connects` connections opened and closed at once;
`--handshakes` BitTorrent handshakes, half with a random info-hash (no
such torrent), half 68 random bytes (garbage), each followed by a read
until the port hangs up, for at most 0.2 s: libtorrent hangs up at once on
an unknown info-hash, but takes garbage for the start of an encrypted
handshake and waits for the rest until its handshake timeout; a flooder
does not wait for that. Connects and handshakes are paced at `--rate` per
second, 128 at a time, so the flood lasts seconds, not milliseconds.
Prints {"flooding": true} once the idle connections are up, then one JSON
document of counts. Every loop is bounded in count and by `--deadline`.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import sys
import time

PROTOCOL = b"\x13BitTorrent protocol"
CONCURRENCY = 128  # with 200 idle: 328 connections at most, under a site's connections_limit (500)
READ_TIMEOUT = 0.2


def handshake(kind: int) -> bytes:
    """A handshake for a torrent the peer does not have (even kind), or as many random bytes (odd)."""
    if kind % 2 == 0:
        return PROTOCOL + bytes(8) + os.urandom(20) + b"-FL0001-" + os.urandom(12)
    return os.urandom(68)


async def _open(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    try:
        return await asyncio.wait_for(asyncio.open_connection(host, port), 5)
    except (OSError, asyncio.TimeoutError):
        return None


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    try:
        await asyncio.wait_for(writer.wait_closed(), 2)
    except (OSError, asyncio.TimeoutError):
        pass


async def flood(host: str, port: int, *, connects: int, idle: int, handshakes: int, rate: float, hold: float,
                deadline: float) -> dict:
    end = time.monotonic() + deadline
    counts = {"connects": 0, "connect_failures": 0, "idle_opened": 0, "idle_closed_by_peer": 0,
              "handshakes": 0, "handshake_answers": 0, "handshakes_hung_up_on": 0, "handshake_failures": 0}
    gate = asyncio.Semaphore(CONCURRENCY)

    async def hold_idle() -> None:
        conn = await _open(host, port)
        if conn is None:
            counts["connect_failures"] += 1
            return
        counts["idle_opened"] += 1
        reader, writer = conn
        try:
            # Nothing sent; the peer may hang up on us (a handshake timeout) before `hold` is over.
            data = await asyncio.wait_for(reader.read(1), max(0.1, min(hold, end - time.monotonic())))
            if data == b"":
                counts["idle_closed_by_peer"] += 1
        except (asyncio.TimeoutError, OSError):
            pass
        finally:
            await _close(writer)

    async def connect_once() -> None:
        async with gate:
            conn = await _open(host, port)
            if conn is None:
                counts["connect_failures"] += 1
                return
            counts["connects"] += 1
            await _close(conn[1])

    async def handshake_once(k: int) -> None:
        async with gate:
            conn = await _open(host, port)
            if conn is None:
                counts["handshake_failures"] += 1
                return
            reader, writer = conn
            try:
                writer.write(handshake(k))
                await writer.drain()
                counts["handshakes"] += 1
                if await asyncio.wait_for(reader.read(68), READ_TIMEOUT):
                    counts["handshake_answers"] += 1  # the port said anything at all
                else:
                    counts["handshakes_hung_up_on"] += 1
            except (asyncio.TimeoutError, OSError):
                pass
            finally:
                await _close(writer)

    idle_tasks = [asyncio.create_task(hold_idle()) for _ in range(idle)]
    while counts["idle_opened"] + counts["connect_failures"] < idle and time.monotonic() < end:
        await asyncio.sleep(0.01)
    print(json.dumps({"flooding": True, "idle_opened": counts["idle_opened"]}), flush=True)
    started = time.monotonic()
    jobs = [connect_once for _ in range(connects)] + [lambda k=k: handshake_once(k) for k in range(handshakes)]
    tasks = []
    for i, job in enumerate(jobs):
        if time.monotonic() > end:
            break
        delay = started + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(job()))
    await asyncio.wait(tasks + idle_tasks, timeout=max(0.1, end - time.monotonic()))
    for t in tasks + idle_tasks:
        t.cancel()
    counts["seconds"] = round(time.monotonic() - started, 3)
    return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("target", help="IP:PORT of the peer port (a loopback address)")
    p.add_argument("--connects", type=int, default=1000)
    p.add_argument("--idle", type=int, default=200)
    p.add_argument("--handshakes", type=int, default=5000)
    p.add_argument("--rate", type=float, default=1000.0, help="connects and handshakes begun per second")
    p.add_argument("--hold", type=float, default=10.0, help="seconds the idle connections are held")
    p.add_argument("--deadline", type=float, default=60.0)
    a = p.parse_args(argv)
    host, _, port = a.target.rpartition(":")
    if not ipaddress.ip_address(host).is_loopback:
        print(f"peerflood: error: {host}: not a loopback address", file=sys.stderr)
        return 2
    counts = asyncio.run(flood(host, int(port), connects=a.connects, idle=a.idle, handshakes=a.handshakes,
                               rate=a.rate, hold=a.hold, deadline=a.deadline))
    print(json.dumps(counts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
