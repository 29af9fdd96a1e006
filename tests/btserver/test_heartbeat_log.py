"""btserver/heartbeat.beat_forever's log when the tracker goes away: said once per kind of failure, so a beat
in flight as the tracker stopped ('disconnected') does not hide that it is now down ('cannot connect')."""

from __future__ import annotations

import asyncio
import logging

import aiohttp

from btserver import heartbeat
from tests.support import free_port


async def test_a_tracker_that_drops_then_refuses_is_said_twice_then_quiet(caplog):
    port = free_port("127.0.0.1")

    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        writer.transport.abort()  # the request arrived, the tracker went away: no answer

    server = await asyncio.start_server(drop, "127.0.0.1", port)
    url = f"http://127.0.0.1:{port}"
    lines = lambda: [r.getMessage() for r in caplog.records if "not answering" in r.getMessage()]  # noqa: E731
    caplog.set_level(logging.INFO, logger="btswarm")
    async with aiohttp.ClientSession() as http:
        beats: list[int] = []

        def body() -> dict:
            beats.append(1)
            return {}

        beat = asyncio.create_task(heartbeat.beat_forever(http, url, "site1", "s" * 32, body, asyncio.Event(), 0.05))
        try:
            for _ in range(200):  # bounded: 10 s
                if lines():
                    break
                await asyncio.sleep(0.05)
            server.close()
            await server.wait_closed()
            for _ in range(200):
                if len(lines()) >= 2:
                    break
                await asyncio.sleep(0.05)
            # Five more beats, all refused (counted as each is built): nothing more is said.
            later = len(beats) + 5
            for _ in range(200):
                if len(beats) >= later:
                    break
                await asyncio.sleep(0.05)
            assert len(beats) >= later
        finally:
            beat.cancel()
            await asyncio.gather(beat, return_exceptions=True)
    said = lines()
    assert len(said) == 2, said
    assert "ServerDisconnectedError" in said[0] and f"tracker {url} not answering" in said[0], said
    assert "ClientConnectorError: Cannot connect to host" in said[1], said
