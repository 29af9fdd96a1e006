"""btget/worker/doorrelay.py against a door that answers one request per read, as XRootD 5.5.3 does (the real one:
tests/btget/test_door_xrootd.py): pipelined requests answered whole and in order, bad input refused."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import pytest

from btget.worker.doorrelay import PARALLEL, Relays
from tests.support import until

BODY = bytes(range(256)) * 1024  # 256 KiB


async def one_per_read(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Reads what has arrived, answers the first request in it and drops the rest: a door that
    does not pipeline (worse than XRootD, which holds them until more bytes come)."""
    while data := await reader.read(65536):
        line = data.split(b"\r\n", 1)[0].decode()
        ranged = next((h for h in data.decode().split("\r\n") if h.lower().startswith("range:")), None)
        lo, hi = (int(x) for x in ranged.split("=")[1].split("-")) if ranged else (0, len(BODY) - 1)
        status = "404 Not Found" if "missing" in line else "206 Partial Content"
        body = b"" if "missing" in line else BODY[lo:hi + 1]
        writer.write(f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        await writer.drain()
    writer.close()


@pytest.fixture
async def relay():
    server = await asyncio.start_server(one_per_read, "127.0.0.1", 0)
    relays = Relays()
    local = await asyncio.to_thread(relays.local, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/store/")
    host, port = local.split("//")[1].split("/")[0].split(":")
    yield relays, local, (host, int(port))
    await asyncio.to_thread(relays.close)
    server.close()


def ask(endpoint, *requests: bytes) -> bytes:
    """Write every request at once; read until the relay closes or goes quiet."""
    with socket.create_connection(endpoint, timeout=10) as s:
        s.sendall(b"".join(requests))
        s.shutdown(socket.SHUT_WR)
        got = b""
        while chunk := s.recv(1 << 20):
            got += chunk
        return got


def get(path: str, lo: int, hi: int) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\nRange: bytes={lo}-{hi}\r\n\r\n".encode()


async def test_pipelined_requests_are_answered_whole_and_in_order(relay):
    relays, local, endpoint = relay
    assert local.startswith("http://127.0.0.1:") and local.endswith("/store/")
    ranges = [(0, 99), (100_000, 200_000), (5, 5), (250_000, 262_143), (1, 65_536)]
    got = await asyncio.to_thread(ask, endpoint, *(get("/store/ds/f", lo, hi) for lo, hi in ranges))
    for lo, hi in ranges:
        head, _, got = got.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 206"), head
        length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
        assert length == hi - lo + 1 and got[:length] == BODY[lo:hi + 1]
        got = got[length:]
    assert got == b""
    # libtorrent's connection names the relay; the door behind it is what bt-get reports.
    assert relays.door_of(endpoint) != endpoint and relays.door_of(("10.0.0.1", 80)) == ("10.0.0.1", 80)
    assert relays.original(local) == local.replace(f":{endpoint[1]}", f":{relays.door_of(endpoint)[1]}")


async def test_a_door_answer_other_than_206_passes_through_and_the_connection_goes_on(relay):
    _, _, endpoint = relay
    got = await asyncio.to_thread(ask, endpoint, get("/store/ds/missing", 0, 9), get("/store/ds/f", 0, 9))
    assert got.startswith(b"HTTP/1.1 404") and got.endswith(BODY[:10])


async def test_a_client_that_leaves_with_more_answers_due_than_the_relay_holds_is_served_no_longer():
    """libtorrent drops a web seed's connection with requests still due (a piece done elsewhere, a web seed
    removed). With more due than PARALLEL the relay used to wait for ever for room in a line nobody read,
    until the collector took the task from whichever thread, outside its loop (a bt-get's web seed then
    failed: "Task was destroyed but it is pending!", "cannot reuse already awaited coroutine")."""
    asked, release = [], asyncio.Event()

    async def held(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A door that answers once released: the client is gone by then."""
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while await reader.readuntil(b"\r\n\r\n"):
                asked.append(1)
                await release.wait()
                writer.write(f"HTTP/1.1 200 OK\r\nContent-Length: {len(BODY)}\r\n\r\n".encode() + BODY)
                await writer.drain()
        writer.close()

    door = await asyncio.start_server(held, "127.0.0.1", 0)
    relays = Relays()
    try:
        local = await asyncio.to_thread(relays.local, f"http://127.0.0.1:{door.sockets[0].getsockname()[1]}/store/")
        endpoint = tuple(local.split("//")[1].split("/")[0].split(":"))
        with socket.create_connection((endpoint[0], int(endpoint[1])), timeout=10) as s:
            s.sendall(get("/store/ds/f", 0, len(BODY) - 1) * (PARALLEL + 3))
            # one answer with the writer, PARALLEL in line, one more asked while the relay waits for room
            await until(lambda: len(asked) >= PARALLEL + 2, what="the relay to ask the door")
        release.set()
        await until(lambda: relays.serving == 0, what="the relay to let the connection go")
        got = await asyncio.to_thread(ask, (endpoint[0], int(endpoint[1])), get("/store/ds/f", 0, 9))
        assert got.startswith(b"HTTP/1.1 200") and BODY[:10] in got  # and it serves the next one
    finally:
        await asyncio.to_thread(relays.close)
        door.close()


@pytest.mark.parametrize("bad", [b"POST /store/x HTTP/1.1\r\n\r\n", b"GET http://elsewhere/ HTTP/1.1\r\n\r\n",
                                 b"nonsense\r\n\r\n"])
async def test_a_request_the_relay_does_not_forward_gets_400_and_the_connection_ends(relay, bad):
    _, _, endpoint = relay
    got = await asyncio.to_thread(ask, endpoint, bad, get("/store/ds/f", 0, 9))
    assert got.startswith(b"HTTP/1.1 400 Bad Request\r\n") and b"206" not in got


def test_https_and_odd_urls_are_left_direct():
    relays = Relays()
    for url in ("https://door.example:2880/pnfs/", "ftp://x/", "http:///nohost/"):
        assert relays.local(url) == url
    relays.close()


class StallingDoor:
    """Answers ranges like one_per_read, except that its first connection goes silent: after the head and
    half the body (`mid`), or before the head (`head`), holding the connection open. Counts connections."""

    def __init__(self, where: str) -> None:
        self.where, self.connections, self.ranges = where, 0, []

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        first = self.connections == 1
        while data := await reader.read(65536):
            ranged = next(h for h in data.decode().split("\r\n") if h.lower().startswith("range:"))
            lo, hi = (int(x) for x in ranged.split("=")[1].split("-"))
            self.ranges.append((lo, hi))
            body = BODY[lo:hi + 1]
            head = f"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {lo}-{hi}/{len(BODY)}\r\n" \
                   f"Content-Length: {len(body)}\r\n\r\n".encode()
            if first:
                if self.where == "mid":
                    writer.write(head + body[:len(body) // 2])
                    await writer.drain()
                await asyncio.sleep(3600)  # silent, the connection open: cancelled when the test ends
            writer.write(head + body)
            await writer.drain()
        writer.close()


@pytest.mark.parametrize("where", ["mid", "head"])
async def test_a_door_that_goes_silent_is_asked_again_for_the_rest(where, monkeypatch):
    from btget.worker import doorrelay
    monkeypatch.setattr(doorrelay, "STALL", 0.3)
    door = StallingDoor(where)
    server = await asyncio.start_server(door, "127.0.0.1", 0)
    relays = Relays()
    try:
        local = await asyncio.to_thread(relays.local, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/s/")
        endpoint = local.split("//")[1].split("/")[0].split(":")
        got = await asyncio.to_thread(ask, (endpoint[0], int(endpoint[1])), get("/s/ds/f", 1000, 200_999),
                                      get("/s/ds/f", 5, 9))
    finally:
        await asyncio.to_thread(relays.close)
        server.close()
    head, _, rest = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 206") and rest[:200_000] == BODY[1000:201_000]
    next_head, _, next_body = rest[200_000:].partition(b"\r\n\r\n")
    assert next_head.startswith(b"HTTP/1.1 206") and next_body == BODY[5:10], "the answer behind it follows, whole"
    # Asked once more, for what was still due: the rest of the body, or the whole range again.
    rest = (1000 + 100_000, 200_999) if where == "mid" else (1000, 200_999)
    assert rest in door.ranges[1:] and door.connections >= 2, door.ranges
