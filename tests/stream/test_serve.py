"""bt-get --serve against a real federation: byte ranges over HTTP, pieces fetched as they are read.

Every answer is checked against the original files; the swarm counters in
GET / say what was fetched from peers.
"""

from __future__ import annotations

import email
import os
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from btget.swarmread.streaming import PieceMap
from torrents import build, metainfo
from tests.btget.getsupport import bt_get_json
from tests.stream.conftest import DATASET

pytestmark = pytest.mark.slow

BIG = "uproot-issue96.root"  # 5 MB: 20 pieces of 256 KiB


def get(url: str, headers: dict | None = None, method: str = "GET", timeout: float = 30):
    """(status, headers, body) of one request, errors included."""
    req = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def raw_get(host: str, port: int, path: str) -> tuple[int, bytes]:
    """A request line sent as written (urllib would normalise '..' away)."""
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1]), data


def test_ranges_whole_files_and_errors(root_federation, serve, tmp_path):
    fed = root_federation
    s = serve(DATASET, "--repo", fed.repo, "-o", str(tmp_path / "out"), "--no-prefetch")
    original = (fed.source / BIG).read_bytes()
    listing = s.status()
    assert {f["lfn"]: f["size"] for f in listing["files"]} == {p.name: p.stat().st_size for p in fed.source.iterdir()}
    assert s.info["dataset"] == DATASET and listing["swarm"]["downloaded"] == 0

    # One range.
    status, headers, body = get(s.url + BIG, {"Range": "bytes=1000000-1299999"})
    assert status == 206 and body == original[1000000:1300000]
    assert headers["Content-Range"] == f"bytes 1000000-1299999/{len(original)}"
    # A suffix range, and a range past the end clipped.
    assert get(s.url + BIG, {"Range": "bytes=-100"})[2] == original[-100:]
    assert get(s.url + BIG, {"Range": f"bytes={len(original) - 10}-99999999"})[2] == original[-10:]

    # Several ranges: multipart/byteranges, each part with its Content-Range.
    status, headers, body = get(s.url + BIG, {"Range": "bytes=0-99, 2000000-2000099, 4000000-4262143"})
    assert status == 206 and headers["Content-Type"].startswith("multipart/byteranges")
    msg = email.message_from_bytes(f"Content-Type: {headers['Content-Type']}\r\n\r\n".encode() + body)
    parts = [(p["Content-Range"], p.get_payload(decode=True)) for p in msg.get_payload()]
    assert parts == [(f"bytes {a}-{b}/{len(original)}", original[a:b + 1])
                     for a, b in ((0, 99), (2000000, 2000099), (4000000, 4262143))]
    assert int(headers["Content-Length"]) == len(body)

    # The whole file, and HEAD.
    status, headers, body = get(s.url + BIG)
    assert status == 200 and body == original and headers["Accept-Ranges"] == "bytes"
    status, headers, body = get(s.url + BIG, method="HEAD")
    assert status == 200 and int(headers["Content-Length"]) == len(original) and body == b""

    # Errors: unknown file, another dataset's name, a range outside the file, paths out of the dataset.
    status, _, body = get(s.url + "no-such-file.root")
    assert status == 404 and b"no such file" in body
    assert get(f"{s.base}/other.dataset/{BIG}")[0] == 404
    status, headers, body = get(s.url + BIG, {"Range": f"bytes={len(original)}-"})
    assert status == 416 and headers["Content-Range"] == f"bytes */{len(original)}"
    assert get(s.url + BIG, {"Range": "bytes=9-5"})[0] == 416
    host, port = s.base.removeprefix("http://").rsplit(":", 1)
    for path in (f"/{DATASET}/../../../../etc/passwd", f"/{DATASET}/%2e%2e/%2e%2e/etc/passwd",
                 f"/{DATASET}/.bt-get/x", "/etc/passwd", f"/{DATASET}//etc/passwd"):
        status, data = raw_get(host, int(port), path)
        assert status in (400, 404) and b"root:" not in data, (path, data[:200])


def test_pieces_come_on_demand_and_a_second_read_costs_no_network(root_federation, serve, tmp_path):
    fed = root_federation
    out = tmp_path / "out"
    s = serve(DATASET, "--repo", fed.repo, "-o", str(out), "--no-prefetch")
    meta = metainfo.parse(fed.torrent(DATASET))
    pm = PieceMap.of(meta)
    index = next(i for i, f in enumerate(meta.files) if f.lfn == BIG)
    original = (fed.source / BIG).read_bytes()

    a, b = 3_000_000, 3_000_100
    assert get(s.url + BIG, {"Range": f"bytes={a}-{b - 1}"})[2] == original[a:b]
    swarm = s.status()["swarm"]
    needed = len(pm.pieces(index, a, b))
    # Only the piece the range is in was fetched (libtorrent may repeat a block: redundant).
    assert swarm["downloaded"] - swarm["redundant"] == needed * meta.piece_length
    assert swarm["verified"] == needed and swarm["waiting"] == 0

    # Again, and a smaller range inside the same piece: served from disk.
    for _ in range(2):
        assert get(s.url + BIG, {"Range": f"bytes={a + 10}-{b - 1}"})[2] == original[a + 10:b]
    assert s.status()["swarm"]["downloaded"] == swarm["downloaded"]


def test_prefetch_fetches_everything_and_bt_get_resumes_from_it(root_federation, serve, tmp_path):
    fed = root_federation
    out = tmp_path / "out"
    s = serve(DATASET, "--repo", fed.repo, "-o", str(out))
    meta = metainfo.parse(fed.torrent(DATASET))
    s.wait(lambda st: st["swarm"]["pieces"] == meta.num_pieces, 60, "every piece prefetched")
    for f in meta.data_files:
        status, _, body = get(s.url + f.lfn)
        assert status == 200 and body == (fed.source / f.lfn).read_bytes(), f.lfn
    assert s.stop() == 0
    # The server kept the state of a one-worker download: bt-get finds it all there.
    result, doc = bt_get_json(DATASET, "--repo", fed.repo, "-o", str(out), "--workers", "1")
    assert result.returncode == 0, result.stderr
    assert doc["bytes_downloaded"] == 0 and {f["status"] for f in doc["files"]} == {"complete"}


@pytest.fixture
def lonely_torrent(tmp_path) -> tuple[Path, bytes]:
    """A .torrent that no peer seeds and no tracker knows: every piece it asks for stays away."""
    src = tmp_path / "src"
    src.mkdir()
    data = os.urandom(700_000)
    (src / "a.root").write_bytes(data)
    built = build.build_dataset("user.nobody.lonely", [("a.root", src / "a.root")], announce=None)
    path = tmp_path / "lonely.torrent"
    path.write_bytes(built.torrent)
    return path, data


def test_a_piece_nobody_has_is_a_503_with_the_reason(serve, tmp_path, lonely_torrent):
    torrent, _ = lonely_torrent
    s = serve(str(torrent), "-o", str(tmp_path / "out"), "--no-prefetch", "--piece-timeout", "1s")
    started = time.monotonic()
    status, headers, body = get(s.url + "a.root", {"Range": "bytes=0-99"})
    assert status == 503 and b"not received within 1 s" in body and b"no peer is connected" in body, body
    assert time.monotonic() - started < 10
    assert s.status()["swarm"]["waiting"] == 0  # the deadline went with the request


def test_a_client_that_goes_away_cancels_its_deadlines(serve, tmp_path, lonely_torrent):
    torrent, _ = lonely_torrent
    s = serve(str(torrent), "-o", str(tmp_path / "out"), "--no-prefetch", "--piece-timeout", "60s")
    host, port = s.base.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as c:
        c.sendall("GET /user.nobody.lonely/a.root HTTP/1.1\r\nHost: x\r\nRange: bytes=0-600000\r\n\r\n".encode())
        s.wait(lambda st: st["swarm"]["waiting"] == 3, 10, "the request's three pieces to be waited for")
    # The client hung up: nobody waits for those pieces any more.
    s.wait(lambda st: st["swarm"]["waiting"] == 0, 10, "deadlines to be dropped after the disconnect")


@pytest.mark.parametrize("args, message", [
    (["--serve", "10.1.2.3:8000"], "--serve: 10.1.2.3 is not a loopback address"),
    (["--serve", "localhost:80"], "--serve: 'localhost' is not an IP address"),
    (["--serve", "127.0.0.1:99999"], "--serve: '127.0.0.1:99999': port out of range"),
    (["--serve", "127.0.0.1:0", "--shard", "1/2"], "--shard: not with --serve"),
    (["--serve", "127.0.0.1:0", "--workers", "2"], "--workers: not with --serve"),
    (["--no-prefetch"], "--no-prefetch: only with --serve"),
    (["--piece-timeout", "5s"], "--piece-timeout: only with --serve"),
])
def test_serve_usage_errors(args, message):
    from tests.btget.getsupport import bt_get

    result = bt_get("some.dataset", *args, "--repo", "http://127.0.0.1:9")
    assert result.returncode == 2 and f"bt-get: error: {message}" in result.stderr, result.stderr
