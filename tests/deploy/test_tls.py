"""A whole federation over TLS with a CA made here: every service listens on https, every client verifies.

Tracker, repository and two sites each serve https with a certificate our
own CA signed; the services trust it through `ca_file`, and a real bt-get
(`--ca-file`) downloads a dataset whose seeds the tracker started over
https, announcing over https from libtorrent (validate_https_trackers on),
with the bytes compared. Without the CA, bt-get refuses at once: at the
repository, or, handed the .torrent, at the tracker.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from btswarm.trees import compare_trees
from tests.deploy.deployment import Deployment, make_pki
from tests.support import command
from torrents import sample
from torrents.exitstatus import ExitStatus

pytestmark = pytest.mark.slow

HINT = "give the CA with --ca-file or $BTSWARM_GET_CA_FILE"


@pytest.fixture(scope="module")
def tls_federation(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tls")
    pki = make_pki(tmp / "pki", ["127.0.0.1", "127.0.0.2", "127.0.0.3"])
    sample.generate(tmp / "data", files=12, total_size=24 * 2**20)
    with Deployment(tmp / "fed", tmp / "data", sites=2, pki=pki) as fed:
        fed.published(1)
        yield fed


def bt_get(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([command("bt-get"), *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_a_real_bt_get_downloads_over_tls_from_both_sites(tls_federation, tmp_path):
    fed = tls_federation
    assert fed.tracker_url.startswith("https://") and fed.repo_url.startswith("https://")
    out = bt_get(sample.SAMPLE_NAME, "--repo", fed.repo_url, "--ca-file", str(fed.pki.ca), "-o", str(tmp_path),
                 "--json", "--timeout", "90")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert compare_trees(fed.data / sample.SAMPLE_NAME, tmp_path / sample.SAMPLE_NAME) == []
    # Both sites were started by the tracker (over https) and both sent bytes.
    assert {"site1", "site2"} <= {k for k, v in doc["sources"].items() if v > 0}, doc["sources"]
    # The sites' heartbeats reached the tracker over https, and the repository reads the tracker over https.
    sites = fed.get_json(f"{fed.tracker_url}/api/sites")["sites"]
    assert {s["name"]: s["up"] for s in sites} == {"site1": True, "site2": True}
    assert all(s["control_url"].startswith("https://") for s in sites)
    swarm = fed.get_json(f"{fed.tracker_url}/api/swarms/{doc['info_hash']}")
    assert swarm["completed"] >= 1
    page = fed.get(f"{fed.repo_url}/datasets/{sample.SAMPLE_NAME}").decode()
    assert f"--repo {fed.repo_url}" in page


def test_the_ca_may_come_from_the_environment(tls_federation, tmp_path):
    fed = tls_federation
    out = bt_get(sample.SAMPLE_NAME, "--repo", fed.repo_url, "-o", str(tmp_path), "--timeout", "90", "-q",
                 env={**_env(), "BTSWARM_GET_CA_FILE": str(fed.pki.ca)})
    assert out.returncode == 0, out.stderr
    assert compare_trees(fed.data / sample.SAMPLE_NAME, tmp_path / sample.SAMPLE_NAME) == []


def test_without_the_ca_bt_get_refuses_the_repository_at_once(tls_federation, tmp_path):
    fed = tls_federation
    out = bt_get(sample.SAMPLE_NAME, "--repo", fed.repo_url, "-o", str(tmp_path), env=_env(), timeout=30)
    assert out.returncode == ExitStatus.ERROR, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        f"bt-get: error: {fed.repo_url}: certificate not trusted (unable to get local issuer certificate); {HINT}")


def test_without_the_ca_bt_get_refuses_the_tracker_from_libtorrent(tls_federation, tmp_path):
    """Handed the .torrent (no repository), the workers' https announce fails verification: said, and final."""
    fed = tls_federation
    torrent = tmp_path / "ds.torrent"
    torrent.write_bytes(fed.get(f"{fed.repo_url}/datasets/{sample.SAMPLE_NAME}.torrent"))
    out = bt_get(str(torrent), "-o", str(tmp_path / "out"), "--timeout", "60", env=_env(), timeout=90)
    assert out.returncode == ExitStatus.ERROR, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("bt-get: error: "), out.stderr
    assert f"tracker {fed.tracker_url}/announce: certificate not trusted (certificate verify failed); {HINT}" in last


def test_a_service_without_the_ca_says_why_it_cannot_reach_the_tracker(tls_federation, tmp_path):
    """A third site given no CA: its heartbeats are refused by its own TLS check, in a sentence naming the fix."""
    fed = tls_federation
    site = fed.sites[0]
    config = tmp_path / "site.toml"
    cfg = fed.configs()[site.name]["server"]
    cfg.pop("ca_file")
    cfg.update(listen=f"{site.ip}:0", peer_listen=f"{site.ip}:0", control_url="", state=str(tmp_path / "state"),
               tls_cert="", tls_key="", repo="")
    from btswarm.topology import toml
    config.write_text(toml({"server": cfg}))
    from tests.support import Proc, wait_for
    proc = Proc([command("bt-server"), "run", "--config", str(config), "-v"], tmp_path / "site.log",
                env={"BTSWARM_SERVER_CA_FILE": ""})
    try:
        wait_for(lambda: "certificate not trusted" in proc.log() or proc.popen.poll() is not None, timeout=30,
                 what="the heartbeat's refusal")
        assert (f"heartbeat: tracker {fed.tracker_url} not answering (certificate not trusted (unable to get local "
                f"issuer certificate); give the CA with [server] ca_file or $BTSWARM_SERVER_CA_FILE)") in proc.log()
    finally:
        proc.stop()


def _env() -> dict:
    import os
    return {k: v for k, v in os.environ.items() if not k.endswith("_CA_FILE") and k != "SSL_CERT_FILE"}
