"""A restricted dataset end to end (issue 45, the peer wire): bt-tracker over https with the peer CA,
bt-repo, bt-server seeding `atlas:*` as SSL torrents with its site certificate, bt-get with a T3's.

Real processes on 127.0.0.x, real TLS. A member's fetch delivers identical bytes; without a certificate,
or with one for another dataset, bt-get says why in one line before any transfer and writes nothing; a
public dataset is fetched as before, with no certificate.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest

from btswarm.topology import toml
from btswarm.trees import compare_trees
from tests.support import command, free_port, wait_for
from btswarm.federation import get_json
from btswarm.testbed.issuer import AUDIENCE
from torrents import peerca

RESTRICTED, PUBLIC = "atlas:secret.ds1", "user:open.ds1"
TRACKER_IP, REPO_IP, SITE_IP = "127.0.0.51", "127.0.0.52", "127.0.0.53"


def _https_json(url: str, ca: Path, token: str = "", body: object = None):
    import json
    import ssl
    import urllib.request
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {},
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=5, context=ssl.create_default_context(cafile=str(ca))) as r:
        return json.loads(r.read())


@pytest.fixture(params=[{}])
def restricted_fed(request, tmp_path, procs):
    """The federation; its repository's [repo] settings beside the peer CA from the param (peer_cert_anyone:
    it signs CSRs for anyone), the site's extra [server] settings from its "server" key; "members": the
    repository's [access] as the sites' too, with a real token issuer (its URL and a member's token are
    returned)."""
    param = dict(request.param)
    server_extra = param.pop("server", {})
    members = param.pop("members", False)
    now = dt.datetime.now(dt.timezone.utc)
    pki = tmp_path / "pki"
    pki.mkdir()
    ca_key, ca = peerca.new_ca("e2e federation peer CA", now)
    (pki / "ca.pem").write_bytes(ca)
    (pki / "ca.key").write_bytes(ca_key)  # the repository's, to sign T3s' requests
    for name, hosts in (("tracker", [TRACKER_IP]), ("repo", [REPO_IP]), ("site1-web", [SITE_IP])):
        key = peerca.new_key()
        (pki / f"{name}.key").write_bytes(key)
        (pki / f"{name}.pem").write_bytes(peerca.issue_service(ca_key, ca, key, hosts, now))
    site_key = peerca.new_key()
    (pki / "site1.key").write_bytes(site_key)
    (pki / "site1.pem").write_bytes(peerca.issue_for_key(ca_key, ca, site_key, ["*"], now).cert)

    def t3(label: str, names: list[str]) -> list[str]:
        key = peerca.new_key()  # the T3's own; the CA sees its CSR only
        (pki / f"{label}.key").write_bytes(key)
        (pki / f"{label}.pem").write_bytes(peerca.issue(ca_key, ca, peerca.new_csr(key, names), now).cert)
        return ["--peer-cert", str(pki / f"{label}.pem"), "--peer-key", str(pki / f"{label}.key"),
                "--peer-ca", str(pki / "ca.pem")]

    data = tmp_path / "data"
    for name in (RESTRICTED, PUBLIC):
        (data / name / "sub").mkdir(parents=True)
        (data / name / "a.root").write_bytes(os.urandom(3 * 1024 * 1024 + 11))
        (data / name / "sub" / "b.root").write_bytes(os.urandom(700_000))
    secrets = {"site1": "secret-site1"}
    tport, rport, sport = free_port(TRACKER_IP), free_port(REPO_IP), free_port(SITE_IP)
    tracker, repo = f"https://{TRACKER_IP}:{tport}", f"https://{REPO_IP}:{rport}"
    access = {"access": {"restricted": ["atlas"]}}
    repo_access: dict = {}
    issuer, token = "", ""
    if members:  # a real issuer over https (its certificate from the federation's CA) that the repository trusts
        key = peerca.new_key()
        (pki / "issuer.key").write_bytes(key)
        (pki / "issuer.pem").write_bytes(peerca.issue_service(ca_key, ca, key, ["127.0.0.1"], now))
        proc = procs.start("issuer", [sys.executable, "-m", "btswarm.testbed.issuer", "127.0.0.1:0",
                                      str(pki / "issuer.pem"), str(pki / "issuer.key")])
        wait_for(lambda: "READY " in proc.log() or proc.popen.poll() is not None, timeout=20, what="the issuer")
        issuer = proc.log().split("READY ", 1)[1].split()[0]
        token = _https_json(f"{issuer}/token", pki / "ca.pem", body={"scope": "storage.read:/atlas",
                                                                     "lifetime": 3600})["access_token"]
        repo_access = {"access": {"restricted": ["atlas"], "issuers": {issuer: AUDIENCE},
                                  "ca_file": str(pki / "ca.pem")}}
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "tracker.toml").write_text(toml({"tracker": {
        "listen": f"{TRACKER_IP}:{tport}", "site_secrets": secrets, "repo": repo, "tls_cert": str(pki / "tracker.pem"),
        "tls_key": str(pki / "tracker.key"), "ca_file": str(pki / "ca.pem"), "peer_ca": str(pki / "ca.pem")}}))
    (conf / "repo.toml").write_text(toml({"repo": {
        "listen": f"{REPO_IP}:{rport}", "state": str(tmp_path / "repo"), "tracker": tracker, "site_secrets": secrets,
        "tls_cert": str(pki / "repo.pem"), "tls_key": str(pki / "repo.key"), "ca_file": str(pki / "ca.pem"),
        "peer_ca": str(pki / "ca.pem"), "peer_ca_key": str(pki / "ca.key"), **param}, **repo_access}))
    (conf / "site1.toml").write_text(toml({"server": {
        "site": "site1", "secret": secrets["site1"], "listen": f"{SITE_IP}:{sport}",
        "peer_listen": f"{SITE_IP}:{free_port(SITE_IP)}", "state": str(tmp_path / "site1"), "roots": [str(data)],
        "tracker": tracker, "repo": repo, "heartbeat_interval": 1.0, "ca_file": str(pki / "ca.pem"),
        "peer_ca": str(pki / "ca.pem"), "peer_cert": str(pki / "site1.pem"), "peer_key": str(pki / "site1.key"),
        **server_extra},
        **access}))
    (conf / "get.toml").write_text(toml({"get": {"ca_file": str(pki / "ca.pem"), "web_seeds": "off"}, **access}))
    procs.start("tracker", [command("bt-tracker"), "run", "--config", str(conf / "tracker.toml")])
    procs.start("repo", [command("bt-repo"), "run", "--config", str(conf / "repo.toml")])
    site = procs.start("site1", [command("bt-server"), "run", "--config", str(conf / "site1.toml")])

    def published(name: str) -> bool:
        try:
            return bool(_https_json(f"{repo}/api/datasets/{name}", pki / "ca.pem", token))
        except OSError:
            return False
    for name in (RESTRICTED, PUBLIC):
        wait_for(lambda n=name: published(n), timeout=90, what=f"{name} published ({site.log()[-2000:]})")

    def heard() -> bool:
        try:
            sites = _https_json(f"{tracker}/api/sites", pki / "ca.pem")["sites"]
        except OSError:
            return False
        return any(s["name"] == "site1" and s["up"] and s["can_seed"] == 2 for s in sites)
    wait_for(heard, timeout=30, what="site1's heartbeat at the tracker")

    def bt_get_args(name: str, out: Path, *args: str, ip: str = "127.0.0.54") -> list[str]:
        return [command("bt-get"), name, "--repo", repo, "--config", str(conf / "get.toml"), "-o", str(out),
                "--timeout", "60", "--listen", ip, *args]

    def bt_get(name: str, out: Path, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(bt_get_args(name, out, *args), capture_output=True, text=True, timeout=120)
    return {"data": data, "bt_get": bt_get, "bt_get_args": bt_get_args, "t3": t3, "tracker": tracker, "repo": repo,
            "site": site, "procs": procs, "control": f"http://{SITE_IP}:{sport}",
            "ca": pki / "ca.pem", "issuer": issuer, "token": token}


def test_member_fetch_and_refusals(restricted_fed, tmp_path):
    f = restricted_fed
    # No certificate: one line, before any transfer; nothing written.
    out = f["bt_get"](RESTRICTED, tmp_path / "none")
    assert out.returncode != 0
    assert out.stderr.strip().splitlines()[-1] == (
        f"bt-get: error: {RESTRICTED}: a restricted dataset (members only): give your peer certificate with "
        "--peer-cert, --peer-key and --peer-ca (or [get] peer_cert, peer_key, peer_ca)"), out.stderr
    assert not (tmp_path / "none" / RESTRICTED).exists()
    # A certificate for another dataset: said as plainly.
    out = f["bt_get"](RESTRICTED, tmp_path / "other", *f["t3"]("other", ["atlas:another.ds"]))
    assert out.returncode != 0
    assert f"{RESTRICTED}: cannot fetch this restricted dataset:" in out.stderr
    assert f"not for {RESTRICTED} (it names atlas:another.ds)" in out.stderr
    assert not (tmp_path / "other" / RESTRICTED).exists()
    # The member: the same bytes as the site's.
    out = f["bt_get"](RESTRICTED, tmp_path / "member", *f["t3"]("member", [RESTRICTED]))
    assert out.returncode == 0, out.stderr[-3000:] + f["site"].log()[-3000:]
    assert compare_trees(f["data"] / RESTRICTED, tmp_path / "member" / RESTRICTED) == []
    # The site's status: its SSL endpoint beside the plain one, its certificate, no problem with it.
    status = get_json(f["control"] + "/api/status")
    assert status["ssl_peers"] and status["ssl_peers"] != status["peers"]
    assert status["peer_certificate"]["names"] == ["*"] and not any("peer_cert" in p for p in status["problems"])
    # A public dataset: as before, no certificate.
    out = f["bt_get"](PUBLIC, tmp_path / "public")
    assert out.returncode == 0, out.stderr[-3000:]
    assert compare_trees(f["data"] / PUBLIC, tmp_path / "public" / PUBLIC) == []


def test_no_authorization_no_certificate_from_the_repository(restricted_fed, tmp_path):
    """Only the CA given: bt-get asks the repository, whose authorization hook (btrepo/peercerts.may_read)
    signs only for datasets its own [access] restricts and the request's bearer token reads; this
    repository restricts none (the sites do), so it refuses; bt-get says so in one line and writes nothing."""
    f = restricted_fed
    out = f["bt_get"](RESTRICTED, tmp_path / "asked", "--peer-ca", str(f["ca"]))
    assert out.returncode != 0
    assert out.stderr.strip().splitlines()[-1] == (
        f"bt-get: error: {RESTRICTED}: the repository gave no peer certificate: {RESTRICTED}: a public dataset: "
        "its swarm takes peers without a certificate"), out.stderr
    assert not (tmp_path / "asked" / RESTRICTED).exists()


@pytest.mark.parametrize("restricted_fed", [{"peer_cert_anyone": True}], indirect=True)
def test_a_certificate_from_the_repository_for_a_key_made_here(restricted_fed, tmp_path, monkeypatch):
    """The repository signs a CSR (peer_cert_anyone: the test bed's stand-in for the token check): bt-get
    makes its key, sends only the CSR, and fetches with the certificate for this one dataset."""
    f = restricted_fed
    state = tmp_path / "xdg-state"
    out = subprocess.run([command("bt-get"), RESTRICTED, "--repo", f["repo"], "--config",
                          str(f["ca"].parent.parent / "conf" / "get.toml"), "-o", str(tmp_path / "asked"),
                          "--timeout", "60", "--listen", "127.0.0.54", "--peer-ca", str(f["ca"])],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "XDG_STATE_HOME": str(state)})
    assert out.returncode == 0, out.stderr[-3000:]
    assert compare_trees(f["data"] / RESTRICTED, tmp_path / "asked" / RESTRICTED) == []
    peer = state / "btswarm" / "get" / "peer"
    cert = (peer / "atlas_secret.ds1.pem").read_bytes()
    assert peerca.cert_names(cert) == (RESTRICTED,)
    assert oct((peer / "peer.key").stat().st_mode & 0o777) == "0o600"
    # A CSR for everything, or for a dataset the repository does not know: refused, with the reason.
    import ssl
    import urllib.error
    import urllib.request
    ctx = ssl.create_default_context(cafile=str(f["ca"]))
    for names, status, reason in ((["*"], 401, "a T3's certificate names datasets, never every one"),
                                  (["atlas:nothing.here"], 404, "atlas:nothing.here: no such dataset")):
        req = urllib.request.Request(f["repo"] + "/api/peer-certificate", method="POST",
                                     data=peerca.new_csr(peerca.new_key(), names))
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10, context=ctx)
        assert err.value.code == status and reason in err.value.read().decode()


def test_bt_server_will_not_start_with_a_peer_certificate_it_cannot_use(tmp_path):
    now = dt.datetime.now(dt.timezone.utc)
    _, ca = peerca.new_ca("the federation's", now)
    other = peerca.new_ca("another", now)
    key = peerca.new_key()
    for name, body in (("ca.pem", ca), ("site.key", key),
                       ("site.pem", peerca.issue_for_key(*other, key, ["*"], now).cert)):
        (tmp_path / name).write_bytes(body)
    (tmp_path / "root").mkdir()
    conf = tmp_path / "site.toml"
    conf.write_text(toml({"server": {
        "listen": f"{SITE_IP}:{free_port(SITE_IP)}", "peer_listen": f"{SITE_IP}:0", "roots": [str(tmp_path / "root")],
        "state": str(tmp_path / "state"), "peer_ca": str(tmp_path / "ca.pem"), "peer_cert": str(tmp_path / "site.pem"),
        "peer_key": str(tmp_path / "site.key")}}))
    out = subprocess.run([command("bt-server"), "run", "--config", str(conf)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"bt-server: error: [server] peer_cert: {tmp_path / 'site.pem'}: issued by OU=btswarm peer CA,CN=another, "
        "not by the peer CA OU=btswarm peer CA,CN=the federation's"]


@pytest.mark.parametrize("restricted_fed", [{"peer_cert_anyone": True, "peer_cert_lifetime": "12s"}], indirect=True)
def test_renewed_from_the_repository_mid_fetch(restricted_fed, tmp_path):
    """A fetch that outlives its certificate (12 s here, capped at 150 kB/s over 3.8 MB): the worker asks the
    repository again once two thirds of its life are gone, and the fetch completes with identical bytes."""
    f = restricted_fed
    state = tmp_path / "xdg-state"
    started = dt.datetime.now(dt.timezone.utc)
    out = subprocess.run([command("bt-get"), RESTRICTED, "--repo", f["repo"], "--config",
                          str(f["ca"].parent.parent / "conf" / "get.toml"), "-o", str(tmp_path / "slow"),
                          "--timeout", "90", "--listen", "127.0.0.54", "--peer-ca", str(f["ca"]), "--workers", "1",
                          "--max-rate", "150kB/s"],
                         capture_output=True, text=True, timeout=150, env={**os.environ, "XDG_STATE_HOME": str(state)})
    assert out.returncode == 0, out.stderr[-3000:]
    took = dt.datetime.now(dt.timezone.utc) - started
    assert took > dt.timedelta(seconds=12), took  # it did outlive the first certificate
    assert compare_trees(f["data"] / RESTRICTED, tmp_path / "slow" / RESTRICTED) == []
    cert = (state / "btswarm" / "get" / "peer" / "atlas_secret.ds1.pem").read_bytes()
    # The certificate on disk now is a renewed one. The first, asked for before any transfer, is valid from
    # 3 s (a quarter of its life) before it was issued, within a second or two of `started`; a renewal is
    # issued 8 s after it (two thirds of its 15 s) or later.
    assert peerca.load_cert(cert).not_valid_before_utc > started + dt.timedelta(seconds=2)


@pytest.mark.parametrize("restricted_fed", [{"server": {"upload_rate_limit": "200kB/s"}}], indirect=True)
def test_t3_to_t3_between_members(restricted_fed, tmp_path):
    """A member seeding on (--seed-time) serves another member over the SSL wire: the second's report
    names the first T3 among its sources; both hold the site's bytes."""
    import json
    f = restricted_fed
    first = f["procs"].start("t3-first", f["bt_get_args"](RESTRICTED, tmp_path / "first", "--seed-time", "90",
                                                          *f["t3"]("first", [RESTRICTED]), ip="127.0.0.55"))
    wait_for(lambda: compare_trees(f["data"] / RESTRICTED, tmp_path / "first" / RESTRICTED) == []
             or first.popen.poll() is not None, timeout=90, what="the first member's fetch", interval=0.5)
    assert first.popen.poll() is None, first.log()[-3000:]
    out = f["bt_get"](RESTRICTED, tmp_path / "second", "--json", *f["t3"]("second", [RESTRICTED]))
    assert out.returncode == 0, out.stderr[-3000:]
    assert compare_trees(f["data"] / RESTRICTED, tmp_path / "second" / RESTRICTED) == []
    sources = json.loads(out.stdout)["sources"]
    from_first = sum(n for name, n in sources.items() if name.startswith("127.0.0.55:"))
    assert from_first > 0, sources


def test_serve_a_restricted_dataset_to_a_member(restricted_fed, tmp_path):
    """bt-get --serve reads a restricted dataset from the SSL swarm with the member's certificate: the file
    read over HTTP is the site's, byte for byte."""
    import urllib.parse
    import urllib.request
    from tests.stream.conftest import Served
    f = restricted_fed
    args = f["bt_get_args"](RESTRICTED, tmp_path / "served", *f["t3"]("reader", [RESTRICTED]))[1:]
    args.remove("--timeout")
    args.remove("60")
    served = Served(args, tmp_path / "serve.log")
    try:
        url = served.url + urllib.parse.quote("sub/b.root")
        with urllib.request.urlopen(url, timeout=60) as resp:
            assert resp.read() == (f["data"] / RESTRICTED / "sub" / "b.root").read_bytes()
    finally:
        assert served.stop() == 0, served.log()[-2000:]


@pytest.mark.parametrize("restricted_fed", [{"members": True}], indirect=True)
def test_a_member_s_token_gets_a_certificate_from_the_repository_and_the_dataset(restricted_fed, tmp_path):
    """The two halves together: the repository reads the bearer token (a real issuer's) for the .torrent and
    signs the T3's CSR for the dataset the token reads; bt-get fetches over the SSL peer wire with it. A token
    of another scope gets neither."""
    f = restricted_fed
    token_file = tmp_path / "token"
    token_file.write_text(f["token"])
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    out = subprocess.run(f["bt_get_args"](RESTRICTED, tmp_path / "member", "--peer-ca", str(f["ca"]),
                                          "--token-file", str(token_file)),
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert compare_trees(f["data"] / RESTRICTED, tmp_path / "member" / RESTRICTED) == []
    cert = (tmp_path / "state" / "btswarm" / "get" / "peer" / "atlas_secret.ds1.pem").read_bytes()
    assert peerca.cert_names(cert) == (RESTRICTED,)

    other = _https_json(f"{f['issuer']}/token", f["ca"], body={"scope": "storage.read:/cms", "lifetime": 3600})
    token_file.write_text(other["access_token"])
    out = subprocess.run(f["bt_get_args"](RESTRICTED, tmp_path / "stranger", "--peer-ca", str(f["ca"]),
                                          "--token-file", str(token_file)),
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode != 0
    assert "storage.read:/atlas" in out.stderr.strip().splitlines()[-1], out.stderr
    assert not (tmp_path / "stranger" / RESTRICTED).exists()
