"""IPv6 end to end, and a dual-stack Tier-3: bt-get with its defaults, given only --repo.

Each federation runs in a private network namespace whose only device is its loopback (127.0.0.1/8 and
::1): bt-get's default listens on every address of the host, and here those are loopback only, as the
tests must keep them. Root only (a network namespace).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from btswarm import netns
from tests.deploy.deployment import Deployment
from tests.support import command, wait_for
from torrents import sample

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a private network namespace")]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    sample.generate(root, files=6, total_size=24 * 2**20)
    return root


@pytest.fixture
def private_host():
    """This thread inside a network namespace of its own (loopback only) for the test; deleted after."""
    name = netns.unique_name("btswarm-v6")
    netns.create(name)
    try:
        with netns.entered(name):
            yield name
    finally:
        netns.delete(name)


def default_bt_get(fed: Deployment, out, *args: str) -> subprocess.Popen:
    """bt-get NAME --repo URL -o OUT, as a physicist types it: no --listen, nothing in the environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BTSWARM_")}
    return subprocess.Popen([command("bt-get"), sample.SAMPLE_NAME, "--repo", fed.repo_url, "-o", str(out),
                             "--json", "--timeout", "120", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def finished(proc: subprocess.Popen) -> tuple[int, dict, str]:
    out, err = proc.communicate(timeout=180)
    return proc.returncode, json.loads(out) if out.strip() else {}, err


def same_tree(a, b) -> bool:
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    got = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file() and ".bt-get" not in p.parts)
    return files == got and all((a / f).read_bytes() == (b / f).read_bytes() for f in files)


def test_a_tier3_fetches_over_ipv6_with_only_repo_given_and_another_fetches_from_it(private_host, data, tmp_path):
    source = data / sample.SAMPLE_NAME
    with Deployment(tmp_path / "fed", data, sites=2, host="::1", site_ips=["::1", "::1"]) as fed:
        fed.published()
        assert fed.repo_url.startswith("http://[::1]:")
        first = default_bt_get(fed, tmp_path / "t3-1", "--seed-ratio", "1")  # then it seeds a whole copy
        wait_for(lambda: first.poll() is not None or same_tree(source, tmp_path / "t3-1" / sample.SAMPLE_NAME),
                 timeout=120, what="the first T3 to hold the dataset")
        assert first.poll() is None, first.communicate()[1]
        for site in ("site1", "site2"):  # from now on only the first T3 holds it
            fed.procs[site].stop()
        code, doc, err = finished(default_bt_get(fed, tmp_path / "t3-2"))
        assert code == 0, err
        assert same_tree(source, tmp_path / "t3-2" / sample.SAMPLE_NAME)
        code, doc1, err = finished(first)
        assert code == 0, err
        assert doc1["workers"][0]["uploaded"] >= doc1["bytes_total"]  # all of it went to the second T3


def test_a_dual_stack_tier3_fetches_from_an_ipv4_site_and_an_ipv6_site(private_host, data, tmp_path):
    with Deployment(tmp_path / "fed", data, sites=2, site_ips=["127.0.0.2", "::1"]) as fed:
        fed.published()
        assert fed.control_url(fed.sites[1]).startswith("http://[::1]:")
        code, doc, err = finished(default_bt_get(fed, tmp_path / "t3"))
        assert code == 0, err
        assert same_tree(data / sample.SAMPLE_NAME, tmp_path / "t3" / sample.SAMPLE_NAME)
        assert doc["sources"].get("site1", 0) > 0 and doc["sources"].get("site2", 0) > 0, doc["sources"]


def test_bound_to_an_address_that_cannot_reach_the_tracker_says_so_within_seconds(private_host, data, tmp_path):
    with Deployment(tmp_path / "fed", data, sites=1, host="::1", site_ips=["::1"]) as fed:
        fed.published()
        proc = default_bt_get(fed, tmp_path / "t3", "--listen", "127.0.0.1", "--timeout", "15")
        code, _, err = finished(proc)
        assert code != 0
        warning = next((line for line in err.splitlines() if "bound to 127.0.0.1" in line), None)
        assert warning is not None, err
        assert warning.startswith(f"bt-get: warning: tracker {fed.tracker_url}/announce:"), warning
        assert "leave listen unset to use every address" in warning, warning
    shutil.rmtree(tmp_path / "t3", ignore_errors=True)


PEER_ADDRESS: dict = {}  # none: the address towards the tracker


def test_a_site_listening_on_every_address_tells_peers_the_one_towards_the_tracker(private_host, data, tmp_path):
    fed = Deployment(tmp_path / "fed", data, sites=1, site_ips=["127.0.0.2"])
    port = fed.sites[0].peer_port
    fed.extra = {"site1": {"peer_listen": f"0.0.0.0:{port}", **PEER_ADDRESS}}
    with fed:
        fed.published()
        status = fed.get_json(f"{fed.control_url(fed.sites[0])}/api/status")
        # The tracker is on this host's 127.0.0.1: that is where this host reaches it from.
        told = PEER_ADDRESS.get("peer_address", "127.0.0.1")
        assert status["peers"] == [f"{told}:{port}"]
        assert f"peers {told}:{port} (listening on 0.0.0.0:{port})" in fed.procs["site1"].log()
        code, doc, err = finished(default_bt_get(fed, tmp_path / "t3"))
        assert code == 0, err
        assert doc["sources"].get("site1", 0) > 0, doc["sources"]
