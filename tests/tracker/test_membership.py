"""A restricted dataset's swarm at the tracker (issue 45): members only, SSL endpoints only.

The real `bt-tracker run` over https with `[tracker] peer_ca`, a site's signed heartbeat declaring one
restricted info-hash, and announces from aiohttp (with and without a client certificate) and from real
libtorrent SSL torrents, which present their peer certificate to an https tracker.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import ssl
import time
from pathlib import Path

import aiohttp
import libtorrent as lt
import pytest

from tests.support import command, free_port, wait_for
from tests.tracker.helpers import query
from torrents import bencoding, peerca
from torrents.servicekit import ltsession
from torrents.servicekit.web import signed_request
from tracker.membership import NO_PROOF, NOT_FOR

IP = "127.0.0.41"
NAME = "atlas:secret.ds"
# A one-piece torrent whose info-hash the site declares restricted (libtorrent announces it below).
INFO = {b"name": NAME.encode(), b"piece length": 16384, b"length": 16384, b"pieces": b"\0" * 20}
RESTRICTED = hashlib.sha1(bencoding.encode(INFO)).digest()
PUBLIC = bytes.fromhex("cd" * 20)
SITE_PLAIN, SITE_SSL = "127.0.0.42:7000", "127.0.0.42:7001"
UTC = dt.timezone.utc


@pytest.fixture
def pki(tmp_path):
    now = dt.datetime.now(UTC)
    ca_key, ca = peerca.new_ca("tracker test CA", now)
    files = {"ca.pem": ca}
    key = peerca.new_key()
    files["tracker.key"], files["tracker.pem"] = key, peerca.issue_service(ca_key, ca, key, [IP], now)

    def holder(label: str, names: list[str], issuer=(ca_key, ca)) -> tuple[Path, Path]:
        k = peerca.new_key()
        files[f"{label}.key"], files[f"{label}.pem"] = k, peerca.issue(*issuer, peerca.new_csr(k, names), now).cert
        return tmp_path / f"{label}.pem", tmp_path / f"{label}.key"
    other = peerca.new_ca("another CA", now)
    paths = {"member": holder("member", [NAME]), "other_ds": holder("other_ds", ["atlas:other"]),
             "other_ca": holder("other_ca", [NAME], other)}
    for name, body in files.items():
        (tmp_path / name).write_bytes(body)
    return tmp_path, paths


@pytest.fixture
def tracker(pki, procs):
    d, _ = pki
    port = free_port(IP)
    cfg = d / "tracker.toml"
    cfg.write_text(f'[tracker]\nlisten = "{IP}:{port}"\ntls_cert = "{d}/tracker.pem"\ntls_key = "{d}/tracker.key"\n'
                   f'peer_ca = "{d}/ca.pem"\ninterval = 30\nmin_seeds = 0\n'
                   f'[tracker.site_secrets]\nsite1 = "secret-one"\n')
    p = procs.start("tracker", [command("bt-tracker"), "run", "--config", str(cfg)])
    url = f"https://{IP}:{port}"
    ctx = ssl.create_default_context(cafile=str(d / "ca.pem"))

    async def up() -> bool:
        try:
            async with aiohttp.ClientSession() as s, s.get(url + "/healthz", ssl=ctx) as r:
                return r.status == 200
        except aiohttp.ClientError:
            return False
    wait_for(lambda: asyncio.run(up()) or p.popen.poll() is not None, 20, "bt-tracker to listen", interval=0.1)
    assert p.popen.poll() is None, p.log()
    body = {"site": "site1", "control_url": "http://127.0.0.42:8700", "peers": [SITE_PLAIN], "ssl_peers": [SITE_SSL],
            "can_seed": [RESTRICTED.hex(), PUBLIC.hex()], "seeding": [RESTRICTED.hex(), PUBLIC.hex()],
            "restricted": {RESTRICTED.hex(): NAME}, "load": 2, "capacity": 10}

    async def beat():
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as s:
            return await signed_request(s, "POST", url + "/api/sites/site1/heartbeat", site="site1",
                                        secret="secret-one", payload=body)
    status, answer = asyncio.run(beat())
    assert status == 200, answer
    return url, ctx


def _announce(url: str, ctx: ssl.SSLContext, info_hash: bytes, cert: tuple[Path, Path] | None = None) -> dict:
    async def go() -> dict:
        client = ctx
        if cert is not None:
            client = ssl.create_default_context()
            client.load_verify_locations(cadata=ssl.DER_cert_to_PEM_cert(ctx.get_ca_certs(True)[0]))
            client.load_cert_chain(str(cert[0]), str(cert[1]))
        async with aiohttp.ClientSession() as s:
            target = f"{url}/announce?{query(info_hash, port=6999, compact=0)}"
            async with s.get(aiohttp.client.URL(target, encoded=True), ssl=client) as r:
                assert r.status == 200
                return bencoding.decode(await r.read())
    return asyncio.run(go())


def _peers(answer: dict) -> set[str]:
    return {f"{p[b'ip'].decode()}:{p[b'port']}" for p in answer.get(b"peers", [])}


def test_restricted_announce_without_proof_is_refused(tracker):
    url, ctx = tracker
    answer = _announce(url, ctx, RESTRICTED)
    assert answer == {b"failure reason": NO_PROOF.format(name=NAME).encode()}


def test_certificate_for_another_dataset_is_refused(tracker, pki):
    url, ctx = tracker
    answer = _announce(url, ctx, RESTRICTED, pki[1]["other_ds"])
    assert answer == {b"failure reason": NOT_FOR.format(name=NAME).encode()}


def test_certificate_of_another_ca_gets_no_answer(tracker, pki):
    """TLS itself refuses a certificate the peer CA did not sign: no answer at all, so no peers."""
    url, ctx = tracker
    with pytest.raises(aiohttp.ClientError):
        _announce(url, ctx, RESTRICTED, pki[1]["other_ca"])


def test_member_gets_the_sites_ssl_endpoint_only(tracker, pki):
    url, ctx = tracker
    answer = _announce(url, ctx, RESTRICTED, pki[1]["member"])
    assert b"failure reason" not in answer
    assert _peers(answer) == {SITE_SSL}


def test_public_dataset_as_before(tracker):
    url, ctx = tracker
    answer = _announce(url, ctx, PUBLIC)
    assert _peers(answer) == {SITE_PLAIN}


def _lt_announce(url: str, pki_dir: Path, cert: tuple[Path, Path], tmp_path: Path) -> tuple[str, object]:
    """A real libtorrent SSL torrent of the restricted info-hash announcing to the https tracker: 'reply' with
    its peers, or 'error' with the tracker's failure reason."""
    ses = lt.session(ltsession.settings("127.0.0.43", 0, ssl_port=0))
    atp = lt.add_torrent_params()
    atp.ti = lt.torrent_info(bencoding.encode({b"announce": f"{url}/announce".encode(), b"info": INFO}))
    atp.save_path = str(tmp_path)
    ca = (pki_dir / "ca.pem").read_bytes()
    certs = ltsession.PeerCerts(ca, lambda: (cert[0].read_bytes(), cert[1].read_bytes()))
    certs.add(atp)
    h = ses.add_torrent(atp)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        ses.wait_for_alert(100)
        for a in ses.pop_alerts():
            if isinstance(a, lt.torrent_need_cert_alert):
                certs.on_need_cert(a)
            elif isinstance(a, lt.tracker_reply_alert):
                return "reply", {f"{p.ip[0]}:{p.ip[1]}" for p in h.get_peer_info()} | {"n=%d" % a.num_peers}
            elif isinstance(a, lt.tracker_error_alert):
                return "error", a.failure_reason() or a.error_message()
    raise AssertionError("libtorrent heard nothing from the tracker in 20 s")


def test_libtorrent_presents_its_certificate(tracker, pki, tmp_path):
    """An SSL torrent (its root the peer CA) announcing over https presents its peer certificate: a member's
    is answered with the site's SSL endpoint, one for another dataset gets the failure reason."""
    url, _ = tracker
    kind, got = _lt_announce(url, pki[0], pki[1]["member"], tmp_path / "m")
    assert kind == "reply" and "n=1" in got, got
    kind, got = _lt_announce(url, pki[0], pki[1]["other_ds"], tmp_path / "o")
    assert (kind, got) == ("error", NOT_FOR.format(name=NAME))


# --- the pure parts -------------------------------------------------------------------------------

def test_refusal_rules():
    from tracker import membership
    assert membership.refusal(NAME, frozenset()) == NO_PROOF.format(name=NAME)
    assert membership.refusal(NAME, frozenset({"atlas:other"})) == NOT_FOR.format(name=NAME)
    assert membership.refusal(NAME, frozenset({"atlas:other", NAME})) is None
    assert membership.refusal(NAME, frozenset({"*"})) is None
    cert = {"subject": ((("commonName", "x"),),), "subjectAltName": (("DNS", NAME), ("IP Address", "127.0.0.1"))}
    assert membership.cert_names(cert) == frozenset({NAME})
    assert membership.cert_names(None) == membership.cert_names({}) == frozenset()


@pytest.mark.parametrize("field, value, message", [
    ("restricted", ["ab" * 20], "site1: restricted: expected an object of at most 200000 info-hashes and their "
                                "dataset names"),
    ("restricted", {"AB" * 20: NAME}, f"site1: restricted: {'AB' * 20!r} is not 40 lowercase hex characters"),
    ("restricted", {"ab" * 20: ""}, f"site1: restricted: {'ab' * 20!r}: '' is not a dataset name"),
    ("ssl_peers", ["nowhere"], "site1: ssl_peers: 'nowhere' is not ip:port"),
    ("ssl_peers", "127.0.0.1:1", "site1: ssl_peers: expected a list of at most 64 ip:port"),
])
def test_heartbeat_fields_checked(field, value, message):
    from tracker.sites import HeartbeatError, parse_heartbeat
    body = {"site": "site1", "control_url": "http://127.0.0.42:8700", "peers": [SITE_PLAIN], field: value}
    with pytest.raises(HeartbeatError) as err:
        parse_heartbeat("site1", body, now=0.0, mono=0.0)
    assert str(err.value) == message


def test_server_peer_settings_all_or_none(tmp_path):
    from btserver.config import ServerConfig
    from torrents.errors import ConfigError
    with pytest.raises(ConfigError, match=r"^peer_key: needed with peer_ca, peer_cert \(the peer CA, this site's "):
        ServerConfig(peer_ca="ca.pem", peer_cert="c.pem")


def test_server_refuses_a_certificate_it_cannot_use(pki):
    """bt-server checks its peer certificate when it starts: one of another CA is named, with the key."""
    from torrents.errors import ConfigError
    d, paths = pki
    cert, key = paths["other_ca"]
    with pytest.raises(ConfigError, match=r"^\[server\] peer_cert: .*other_ca.pem: issued by OU=btswarm peer CA,CN=another CA, not by the peer CA "):
        ltsession.peer_certs(str(d / "ca.pem"), str(cert), str(key), "server")
    assert ltsession.peer_certs("", "", "", "server") is None


async def test_refused_on_either_store_and_public_swarm_unchanged(make_client, caplog):
    """The restricted map travels with the site's heartbeat through the store (memory or Redis): a plain
    announce in the restricted swarm is refused, one in the public swarm answered with the plain endpoint."""
    from tests.tracker.helpers import SECRETS, announce, heartbeat
    from tracker.config import TrackerConfig
    client = await make_client(TrackerConfig(site_secrets=SECRETS, min_seeds=0))
    body = {"site": "site1", "control_url": "http://127.0.0.42:8700", "peers": [SITE_PLAIN], "ssl_peers": [SITE_SSL],
            "can_seed": [RESTRICTED.hex(), PUBLIC.hex()], "seeding": [RESTRICTED.hex(), PUBLIC.hex()],
            "restricted": {RESTRICTED.hex(): NAME}, "load": 2, "capacity": 10}
    assert await heartbeat(client, "site1", body) == 200
    # This tracker has no peer_ca: nobody can prove membership, and the operator is told so.
    assert ("site1 holds restricted datasets, and this tracker has no [tracker] peer_ca (with tls_cert): no peer "
            "can prove membership, every announce in their swarms is refused") in caplog.text
    assert await announce(client, query(RESTRICTED, compact=0)) == {b"failure reason": NO_PROOF.format(name=NAME).encode()}
    answer = await announce(client, query(PUBLIC, compact=0))
    assert _peers(answer) == {SITE_PLAIN}
