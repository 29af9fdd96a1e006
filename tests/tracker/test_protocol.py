"""Announce and scrape against the real app on a real socket."""

from __future__ import annotations

import asyncio
import hashlib
from urllib.parse import quote, quote_from_bytes

from hypothesis import HealthCheck, given, settings, strategies as st

from torrents import bencoding
from tracker.config import TrackerConfig
from tracker.peerstore import LocalPeerStore

from tests.tracker.helpers import SECRETS, announce, get_raw, query

OPEN = TrackerConfig(open=True, site_secrets=SECRETS)
H_FF = b"\xff" * 20
H_FE = b"\xff" * 19 + b"\xfe"  # decodes to the same replacement characters as H_FF in request.query
H_PLUS = b"+" * 20


async def test_binary_info_hashes_and_plus_do_not_collide(make_client):
    client = await make_client(OPEN)
    await announce(client, query(H_FF, port=7001))
    await announce(client, query(H_FE, port=7002))
    # '+' sent raw: a literal plus, not a space.
    raw_plus = query(H_PLUS, port=7003).replace(f"info_hash={'%2B' * 20}", "info_hash=" + "+" * 20)
    await announce(client, raw_plus)
    for h, port in ((H_FF, 7001), (H_FE, 7002), (H_PLUS, 7003)):
        answer = await announce(client, query(h, b"-TT0001-000000000099", port=7100, numwant=10))
        assert answer[b"complete"] + answer[b"incomplete"] == 2, h
        assert answer[b"peers"] == bytes([127, 0, 0, 1]) + port.to_bytes(2, "big")


async def test_compact_and_non_compact(make_client):
    client = await make_client(OPEN)
    h = hashlib.sha1(b"x").digest()
    await announce(client, query(h, b"-TT0001-aaaaaaaaaaaa", port=7001, left=0))
    compact = await announce(client, query(h, b"-TT0001-bbbbbbbbbbbb", port=7002))
    assert compact[b"peers"] == b"\x7f\x00\x00\x01" + (7001).to_bytes(2, "big")
    assert compact[b"complete"] == 1 and compact[b"incomplete"] == 1
    assert compact[b"min interval"] == OPEN.min_interval
    assert OPEN.interval <= compact[b"interval"] <= OPEN.interval * 1.1 + 1
    listed = await announce(client, query(h, b"-TT0001-bbbbbbbbbbbb", port=7002, compact=0))
    assert listed[b"peers"] == [{b"ip": b"127.0.0.1", b"peer id": b"-TT0001-aaaaaaaaaaaa", b"port": 7001}]
    no_id = await announce(client, query(h, b"-TT0001-bbbbbbbbbbbb", port=7002, compact=0, no_peer_id=1))
    assert no_id[b"peers"] == [{b"ip": b"127.0.0.1", b"port": 7001}]


async def test_ipv6_peers_go_in_peers6(make_client):
    client = await make_client(TrackerConfig(open=True, trust_ip=True, site_secrets=SECRETS))
    h = hashlib.sha1(b"v6").digest()
    await announce(client, query(h, b"-TT0001-aaaaaaaaaaaa", port=7001, ip="%3A%3A1"))
    answer = await announce(client, query(h, b"-TT0001-bbbbbbbbbbbb", port=7002))
    assert answer[b"peers"] == b""
    assert answer[b"peers6"] == b"\x00" * 15 + b"\x01" + (7001).to_bytes(2, "big")


async def test_failures_are_bencoded_200(make_client):
    client = await make_client(TrackerConfig(site_secrets=SECRETS))  # closed: nothing published
    h = hashlib.sha1(b"f").digest()
    cases = {
        query(h): b"unknown info_hash: not published in this federation",
        query(h[:19]): b"info_hash: must be 20 bytes, got 19",
        query(h, peer_id=b"short"): b"peer_id: must be 20 bytes, got 5",
        query(h, port=0): b"port: 0 is out of range 1\xe2\x80\x9365535",
        query(h, port=70000): b"port: 70000 is out of range 1\xe2\x80\x9365535",
        query(h).replace("left=1", "left=x"): b"left: not a whole number",
        query(h, event="bogus"): b"event: unknown event 'bogus'",
        query(h) + "&info_hash=" + "%00" * 20: b"info_hash: given 2 times, expected once",
        "peer_id=" + "a" * 20 + "&port=1": b"info_hash: missing",
    }
    for q, reason in cases.items():
        status, body = await get_raw(client, "/announce?" + q)
        assert status == 200
        assert bencoding.decode(body) == {b"failure reason": reason}, q


async def test_numwant_is_capped_and_negative_means_default(make_client):
    client = await make_client(OPEN)
    h = hashlib.sha1(b"many").digest()
    for i in range(260):
        await announce(client, query(h, b"-TT0001-%012d" % i, port=10000 + i, numwant=0))
    big = await announce(client, query(h, b"-TT0001-requester000", port=9000, numwant=100000))
    assert len(big[b"peers"]) == 200 * 6
    negative = await announce(client, query(h, b"-TT0001-requester000", port=9000, numwant=-1))
    assert len(negative[b"peers"]) == OPEN.default_numwant * 6
    assert big[b"incomplete"] == 261


async def test_stopped_removes_at_once(make_client):
    client = await make_client(OPEN)
    h = hashlib.sha1(b"stop").digest()
    await announce(client, query(h, b"-TT0001-aaaaaaaaaaaa", port=7001))
    await announce(client, query(h, b"-TT0001-aaaaaaaaaaaa", port=7001, event="stopped"))
    answer = await announce(client, query(h, b"-TT0001-bbbbbbbbbbbb", port=7002))
    assert answer[b"peers"] == b"" and answer[b"incomplete"] == 1


async def test_peers_expire_after_two_intervals(make_client):
    now = [1000.0]
    store = LocalPeerStore(ttl=2 * OPEN.interval, clock=lambda: now[0])
    client = await make_client(OPEN, peerstore=store)
    h = hashlib.sha1(b"expire").digest()
    await announce(client, query(h, b"-TT0001-aaaaaaaaaaaa", port=7001))
    now[0] += 2 * OPEN.interval - 1
    assert len((await announce(client, query(h, b"-TT0001-bbbbbbbbbbbb", port=7002)))[b"peers"]) == 6
    now[0] += 2
    answer = await announce(client, query(h, b"-TT0001-cccccccccccc", port=7003))
    # 7001 is gone, 7002 (announced one second later) is still there
    assert answer[b"peers"] == b"\x7f\x00\x00\x01" + (7002).to_bytes(2, "big")
    now[0] += 10 * OPEN.interval
    assert store.expire() == 2 and store.peer_total() == 0


async def test_scrape_several_info_hashes(make_client):
    client = await make_client(OPEN)
    h1, h2, h3 = (hashlib.sha1(bytes([i])).digest() for i in range(3))
    await announce(client, query(h1, b"-TT0001-aaaaaaaaaaaa", port=7001, left=0))
    await announce(client, query(h1, b"-TT0001-bbbbbbbbbbbb", port=7002))
    await announce(client, query(h2, b"-TT0001-aaaaaaaaaaaa", port=7001, event="completed", left=0))
    status, body = await get_raw(client, "/scrape?" + "&".join(f"info_hash={quote_from_bytes(h)}" for h in (h1, h2, h3)))
    assert status == 200
    files = bencoding.decode(body)[b"files"]
    assert files[h1] == {b"complete": 1, b"downloaded": 0, b"incomplete": 1}
    assert files[h2] == {b"complete": 1, b"downloaded": 1, b"incomplete": 0}
    assert files[h3] == {b"complete": 0, b"downloaded": 0, b"incomplete": 0}


_raw_query = st.one_of(
    st.binary(max_size=600).map(lambda b: b.decode("latin-1")),
    st.lists(st.tuples(st.sampled_from(["info_hash", "peer_id", "port", "left", "numwant", "event", "compact",
                                        "ip", "%", "%zz", "", "uploaded"]),
                       st.one_of(st.text(max_size=80), st.sampled_from(["%", "%zz", "%ff" * 20, "-1", "99999999999999999999999", "1" * 5000]))),
             max_size=12).map(lambda kv: "&".join(f"{k}={v}" for k, v in kv)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=_raw_query)
async def test_no_query_string_gets_a_5xx(make_client, raw):
    # One server for all examples: the fixture lives as long as the test function.
    client = getattr(make_client, "client", None)
    if client is None:
        client = make_client.client = await make_client(OPEN)
    # Keep what a request line can carry: escape only the bytes HTTP forbids there.
    target = quote(raw, safe="".join(chr(c) for c in range(33, 127) if chr(c) not in "#"), encoding="utf-8",
                   errors="surrogateescape")
    for path in ("/announce?", "/scrape?"):
        status, body = await get_raw(client, path + target)
        assert status < 500
        if status == 200:
            bencoding.decode(body)


async def test_unescaped_binary_bytes_in_the_request_line(make_client):
    """Bytes ≥ 0x80 sent raw (not percent-encoded): aiohttp's parser refuses them with a 400, never a 5xx."""
    client = await make_client(OPEN)
    h = bytes(range(0x80, 0x94))
    request = (b"GET /announce?info_hash=" + h + b"&peer_id=-TT0001-rawrawrawraw&port=7001&left=1 HTTP/1.1\r\n"
               b"Host: 127.0.0.1\r\nConnection: close\r\n\r\n")
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    writer.write(request)
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    assert data.split(b" ", 2)[1] == b"400"
    answer = await announce(client, query(h, b"-TT0001-bbbbbbbbbbbb", port=7002))
    assert answer[b"peers"] == b"" and answer[b"incomplete"] == 1
