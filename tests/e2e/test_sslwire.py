"""The peer wire of a restricted dataset (issue 45): only a member's certificate gets a byte.

Real libtorrent sessions on their own 127.0.0.x addresses, real TLS (libtorrent's SSL torrents with the
federation's peer CA from torrents.peerca), a real aria2c. A refusal is checked after the intruder has been
turned away several times (connection attempts counted at the seed), never after a sleep.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import os
import threading
import time
from pathlib import Path

import libtorrent as lt
import pytest
from aiohttp import web

from tests.clients.thirdparty import Aria2c, Qbittorrent
from torrents import bencoding, metainfo, peerca
from torrents.build import build_torrent
from torrents.servicekit import ltsession
from torrents.servicekit.ltsession import PeerCerts

NAME = "atlas:restricted.ds1"
UTC = dt.timezone.utc


def utcnow() -> dt.datetime:
    return dt.datetime.now(UTC)


class CA:
    def __init__(self, name: str) -> None:
        self.key, self.cert = peerca.new_ca(name, utcnow())

    def holder(self, names, lifetime=peerca.T3_LIFETIME, now=None) -> tuple[bytes, bytes]:
        key = peerca.new_key()  # made by its holder; the CA sees only the CSR
        csr = peerca.new_csr(key, names)
        return peerca.issue(self.key, self.cert, csr, now or utcnow(), lifetime).cert, key


class Peer:
    """One libtorrent session on `ip`, plain and SSL sockets, holding one torrent (restricted with `certs`)."""

    def __init__(self, ip: str, data: bytes, save: Path, *, ca: bytes | None, certs: PeerCerts | None,
                 seed: bool = False, **extra) -> None:
        self.ip = ip
        self.ses = lt.session(ltsession.settings(ip, 0, ssl_port=0, seeding=seed, **extra))
        self.certs = certs
        atp = ltsession.torrent_params(ltsession.torrent_info(data), str(save), {})
        if ca is not None:
            atp.root_certificate = ca  # an intruder may use any CA it likes
        if certs is not None:
            certs.add(atp)
        if seed:
            atp.flags |= lt.torrent_flags.seed_mode
        self.handle = self.ses.add_torrent(atp)
        self.refused: list[str] = []  # the address of each peer connection that ended in an error
        self.failed = 0
        self.alerts = ltsession.Alerts({
            lt.torrent_need_cert_alert: self._need_cert,
            lt.peer_disconnected_alert: self._gone, lt.peer_error_alert: self._gone,
            lt.cache_flushed_alert: self._flushed, lt.alert: lambda a: None})
        self.flushes = 0
        self.wait(lambda: self.ses.listen_port() and self.ses.ssl_listen_port(), 10, "listening")

    def _need_cert(self, alert) -> None:
        if self.certs is not None:
            self.certs.on_need_cert(alert)

    def _flushed(self, _alert) -> None:
        self.flushes += 1

    def on_disk(self, *others: "Peer") -> None:
        """Wait until libtorrent has written what it holds (flush_cache, then its alert), as bt-get does before
        it calls a download complete: the bytes on disk are then what a user would read."""
        before = self.flushes
        self.handle.flush_cache()
        self.wait(lambda: self.flushes > before, 30, "cache flushed", *others)

    def _gone(self, alert) -> None:
        self.failed += 1
        self.refused.append(alert.endpoint[0])

    @property
    def plain(self) -> tuple[str, int]:
        return self.ip, self.ses.listen_port()

    @property
    def ssl(self) -> tuple[str, int]:
        return self.ip, self.ses.ssl_listen_port()

    def pump(self) -> None:
        self.ses.wait_for_alert(50)
        self.alerts.drain(self.ses)

    def wait(self, predicate, timeout: float, what: str, *others: "Peer") -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, f"{self.ip}: no {what} in {timeout:.0f} s"
            self.pump()
            for o in others:
                o.alerts.drain(o.ses)

    def done(self) -> int:
        return self.handle.status().total_wanted_done

    def complete(self) -> bool:
        return self.handle.status().is_seeding


@pytest.fixture
def dataset(tmp_path):
    """A two-file dataset at a site: (torrent bytes, site directory, {file: sha256})."""
    site = tmp_path / "site"
    (site / NAME).mkdir(parents=True)
    files = {"a.root": os.urandom(3 * 1024 * 1024 + 7), "b.root": os.urandom(1024 * 1024)}
    for name, body in files.items():
        (site / NAME / name).write_bytes(body)
    data, _meta = build_torrent(NAME, [(n, site / NAME / n) for n in sorted(files)], piece_length=256 * 1024)
    return data, site, {n: hashlib.sha256(b).hexdigest() for n, b in files.items()}


@pytest.fixture
def fed():
    return CA("test federation peer CA")


def site_seed(fed: CA, dataset, ip: str = "127.0.0.21", **extra) -> Peer:
    data, site, _ = dataset
    cert, key = fed.holder([peerca.EVERY_DATASET], peerca.SITE_LIFETIME)
    seed = Peer(ip, data, site, ca=fed.cert, certs=PeerCerts(fed.cert, lambda: (cert, key), "site"), seed=True,
                **extra)
    seed.wait(seed.complete, 15, "seeding state")
    return seed


def same_bytes(directory: Path, sums: dict[str, str]) -> bool:
    return all(hashlib.sha256((directory / NAME / n).read_bytes()).hexdigest() == h for n, h in sums.items())


def test_restricted_keeps_the_info_hash(dataset, fed, tmp_path):
    """The same .torrent, public or restricted: the root certificate is given at add time, never in the info."""
    data, _, _ = dataset
    public = metainfo.parse(data).info_hash
    seed = site_seed(fed, dataset)
    plain = Peer("127.0.0.29", data, tmp_path / "plain", ca=None, certs=None)
    assert str(seed.handle.info_hashes().v1) == public == str(plain.handle.info_hashes().v1)
    assert seed.handle.torrent_file().info_section() == plain.handle.torrent_file().info_section()


def test_member_gets_identical_bytes(dataset, fed, tmp_path):
    _, _, sums = dataset
    seed = site_seed(fed, dataset)
    t3 = Peer("127.0.0.22", dataset[0], tmp_path / "t3", ca=None,
              certs=PeerCerts(fed.cert, lambda c=fed.holder([NAME]): c, "t3"))
    t3.handle.connect_peer(seed.ssl)
    t3.wait(t3.complete, 30, "complete download", seed)
    t3.on_disk(seed)
    assert same_bytes(tmp_path / "t3", sums)


def _intruders(fed: CA):
    other = CA("another federation")
    return {
        # an SSL torrent of the right CA that never presents a certificate
        "no certificate": dict(ca=fed.cert, certs=None, port="ssl"),
        "another CA": dict(ca=fed.cert, certs=lambda: PeerCerts(fed.cert, lambda c=other.holder([NAME]): c), port="ssl"),
        "another CA as root": dict(ca=other.cert, certs=lambda: PeerCerts(other.cert, lambda c=other.holder(["*"]): c),
                                   port="ssl"),
        "another dataset": dict(ca=fed.cert, certs=lambda: PeerCerts(fed.cert, lambda c=fed.holder(["atlas:other"]): c),
                                port="ssl"),
        "plain to the SSL port": dict(ca=None, certs=None, port="ssl"),
        "plain to the plain port": dict(ca=None, certs=None, port="plain"),
    }


@pytest.mark.parametrize("case", ["no certificate", "another CA", "another CA as root", "another dataset",
                                  "plain to the SSL port", "plain to the plain port"])
def test_intruder_gets_nothing(dataset, fed, tmp_path, case):
    seed = site_seed(fed, dataset)
    how = _intruders(fed)[case]
    certs = how["certs"]() if how["certs"] else None
    intruder = Peer("127.0.0.23", dataset[0], tmp_path / "intruder", ca=how["ca"], certs=certs)
    target = seed.ssl if how["port"] == "ssl" else seed.plain
    # Turned away three times (each attempt seen at the seed, each failure at the intruder), 0 bytes throughout.
    for attempt in range(3):
        before = intruder.failed
        intruder.handle.connect_peer(target)
        intruder.wait(lambda: intruder.failed > before and seed.refused.count(intruder.ip) > attempt, 20,
                      f"refusal #{attempt + 1}", seed)
        assert intruder.done() == 0 and intruder.handle.status().total_payload_download == 0
    assert seed.refused.count("127.0.0.23") >= 3
    assert seed.handle.status().total_payload_upload == 0
    got = tmp_path / "intruder" / NAME
    assert not got.exists() or all(set(p.read_bytes()) <= {0} for p in got.iterdir() if p.is_file())


def test_expired_member_certificate_gets_nothing(dataset, fed, tmp_path):
    seed = site_seed(fed, dataset)
    old = fed.holder([NAME], dt.timedelta(seconds=1), now=utcnow() - dt.timedelta(hours=1))
    t3 = Peer("127.0.0.24", dataset[0], tmp_path / "t3", ca=None, certs=PeerCerts(fed.cert, lambda: old, "t3"))
    with pytest.raises(peerca.PeerCertError, match="expired at"):
        t3.certs.check(NAME)
    before = t3.failed
    t3.handle.connect_peer(seed.ssl)
    t3.wait(lambda: t3.failed > before, 20, "refusal", seed)
    assert t3.done() == 0


async def _serve_tracker(peers: list[tuple[str, int]], ready: threading.Event, stop: asyncio.Event, box: dict):
    """A tracker that hands every announce the site's plain and SSL endpoints (an intruder who knows them)."""
    async def announce(request: web.Request) -> web.Response:
        box["announces"] = box.get("announces", 0) + 1
        return web.Response(body=bencoding.encode({b"interval": 5, b"peers": [
            {b"ip": ip.encode(), b"port": port} for ip, port in peers]}))
    app = web.Application()
    app.router.add_get("/announce", announce)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.25", 0)
    await site.start()
    box["port"] = site._server.sockets[0].getsockname()[1]
    ready.set()
    await stop.wait()
    await runner.cleanup()


def test_aria2c_gets_nothing(dataset, fed, tmp_path, procs):
    seed = site_seed(fed, dataset)
    box: dict = {}
    ready, loop = threading.Event(), asyncio.new_event_loop()
    stop = asyncio.Event()
    thread = threading.Thread(target=loop.run_until_complete,
                              args=(_serve_tracker([seed.plain, seed.ssl], ready, stop, box),), daemon=True)
    thread.start()
    try:
        assert ready.wait(10)
        meta = bencoding.decode(dataset[0])
        meta[b"announce"] = f"http://127.0.0.25:{box['port']}/announce".encode()
        torrent = tmp_path / "restricted.torrent"
        torrent.write_bytes(bencoding.encode(meta))
        aria = Aria2c(tmp_path / "aria2c", "127.0.0.26", procs)
        aria.fetch(torrent, tmp_path / "aria2c-data")
        # Both of the site's ports tried, each more than once (aria2c retries a refused peer), 0 bytes sent.
        seed.wait(lambda: seed.refused.count("127.0.0.26") >= 4, 40, "aria2c's attempts on both ports")
        assert seed.handle.status().total_payload_upload == 0
        assert not aria.finished()
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
    got = tmp_path / "aria2c-data" / NAME
    assert not got.exists() or all(set(p.read_bytes()) <= {0} for p in got.iterdir() if p.is_file())


def test_qbittorrent_gets_nothing(dataset, fed, tmp_path, procs):
    """qBittorrent 4.5 (Debian 12's qbittorrent-nox, libtorrent 2.0) has no SSL torrents: no SSL socket, no way
    to give a torrent a root or a peer certificate (its Web API has no torrents/SSLParameters; qBittorrent 5.0's
    takes the root only from the .torrent's info, which would change the info-hash). Given both of the site's
    endpoints, it is turned away from them and gets 0 bytes."""
    seed = site_seed(fed, dataset)
    torrent = tmp_path / "restricted.torrent"
    torrent.write_bytes(dataset[0])
    qbt = Qbittorrent(tmp_path / "qbittorrent", "127.0.0.30", procs)
    qbt.fetch(torrent, tmp_path / "qbittorrent-data")
    info_hash = metainfo.parse(dataset[0]).info_hash
    assert qbt._call("GET", f"/torrents/SSLParameters?hash={info_hash}") is None  # 404: not in 4.5
    peers = "|".join(f"{ip}:{port}" for ip, port in (seed.plain, seed.ssl))
    assert qbt._call("POST", "/torrents/addPeers", {"hashes": info_hash, "peers": peers}) is not None, qbt.log()
    # One refusal per endpoint given at least (libtorrent 2.0 tries a failed peer again a few times, then not).
    seed.wait(lambda: seed.refused.count("127.0.0.30") >= 2, 60, "qBittorrent's attempts on both ports")
    assert seed.handle.status().total_payload_upload == 0
    [torrent_info] = qbt._call("GET", "/torrents/info", json_answer=True)
    assert (torrent_info["downloaded"], torrent_info["progress"]) == (0, 0) and not qbt.finished()
    got = tmp_path / "qbittorrent-data" / NAME
    assert not got.exists() or all(set(p.read_bytes()) <= {0} for p in got.iterdir() if p.is_file())


def test_renewed_mid_fetch(dataset, fed, tmp_path):
    """A T3's certificate runs out during a long fetch; renewed at 2/3 of its life, the fetch goes on, new
    connections (to a second site, after the first certificate expired) included, and the bytes are the same."""
    _, _, sums = dataset
    first = fed.holder([NAME], dt.timedelta(seconds=4))
    issued: list = [first]

    def load():
        return issued[-1]
    seed_a = site_seed(fed, dataset, "127.0.0.21", upload_rate_limit=300_000)
    ltsession.limit_everyone(seed_a.ses)  # slow enough to outlive the first certificate
    certs = PeerCerts(fed.cert, load, "t3")
    t3 = Peer("127.0.0.22", dataset[0], tmp_path / "t3", ca=None, certs=certs)
    t3.handle.connect_peer(seed_a.ssl)
    t3.wait(lambda: t3.done() > 0, 30, "first bytes", seed_a)
    # Due: a new certificate (the repository's answer to a fresh CSR), set on the running torrent.
    issued.append(fed.holder([NAME], dt.timedelta(hours=1)))
    assert certs.renew_if_due(peerca.renew_at(first[0]))
    assert certs.renewals == 1
    # The first one expires; only the renewed one can open a new connection now.
    t3.wait(lambda: utcnow() > peerca.expires(first[0]), 30, "first certificate's expiry", seed_a)
    assert not t3.complete()
    seed_b = site_seed(fed, dataset, "127.0.0.27")
    seed_a.ses.pause()
    t3.handle.connect_peer(seed_b.ssl)
    t3.wait(t3.complete, 60, "complete download", seed_a, seed_b)
    assert seed_b.handle.status().total_payload_upload > 0
    t3.on_disk(seed_a, seed_b)
    assert same_bytes(tmp_path / "t3", sums)


def test_t3_to_t3_between_members(dataset, fed, tmp_path):
    _, _, sums = dataset
    seed = site_seed(fed, dataset)
    a = Peer("127.0.0.22", dataset[0], tmp_path / "a", ca=None,
             certs=PeerCerts(fed.cert, lambda c=fed.holder([NAME]): c, "t3 a"))
    a.handle.connect_peer(seed.ssl)
    a.wait(a.complete, 30, "complete download", seed)
    seed.ses.pause()  # the site is gone: only the other T3 has the bytes
    b = Peer("127.0.0.28", dataset[0], tmp_path / "b", ca=None,
             certs=PeerCerts(fed.cert, lambda c=fed.holder([NAME, "atlas:other"]): c, "t3 b"))
    b.handle.connect_peer(a.ssl)
    b.wait(b.complete, 30, "complete download from the other T3", a)
    assert a.handle.status().total_payload_upload > 0
    b.on_disk(a)
    assert same_bytes(tmp_path / "b", sums)
