"""A federation of hosts (`btswarm up --hosts`): real network namespaces on a bridge, the real services.

What these check is the test bed itself: each part on a host of its own,
reached over 127.20.x.y from the other hosts, 127.0.0.1 meaning "this
host", each uplink shaped on its host's interface, nothing left behind.
bt-get's own defaults across hosts are another change's (issue 44 item 2).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from btswarm import hosts
from btswarm.federation import get_json
from tests.e2e.conftest import sink, start_federation
from tests.support import command, namespaces, need_root, stopped_cleanly, wait_for
from torrents import metainfo, sample, urls

pytestmark = pytest.mark.slow

T3_RATE = 20_000_000  # bit/s: slow enough that a few MB measure the link, not the machine


def _root_macs() -> set[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    return {w for line in out.splitlines() for w in line.split() if w.count(":") == 5}


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    need_root()
    tmp = tmp_path_factory.mktemp("hosts")
    sample.generate(tmp / "data", files=4, total_size=8 * 2**20)
    before = _root_macs()
    fed = start_federation(tmp, "--hosts", "--sites", "2", "--t3-hosts", "2", "--data", str(tmp / "data"),
                           "--heartbeat", "1s", "--site-link", "300mbit", "--site-link", "site2=200mbit",
                           "--client-link", "20mbit")
    fed.root_macs_before = before
    yield fed
    stopped_cleanly(fed)


def test_each_part_is_on_a_host_of_its_own_and_the_root_namespace_gets_nothing(fed):
    assert [(h.name, h.address) for h in fed.hosts] == [
        ("services", "127.20.0.1"), ("site1", "127.20.1.1"), ("site2", "127.20.1.2"),
        ("t3-1", "127.20.2.1"), ("t3-2", "127.20.2.2")]
    assert {h.netns for h in fed.hosts} | {fed.netns} <= namespaces()
    assert fed.repo == "http://127.20.0.1:8080" and fed.site("site2").control_url == "http://127.20.1.2:8700"
    assert not {m for m in _root_macs() - fed.root_macs_before if m.startswith("02:00:7f:14")}
    for h in fed.hosts:  # lo: this host only; the veth: its address, its MAC, Ethernet's MTU
        links = json.loads(subprocess.run(["ip", "-n", h.netns, "-j", "addr"], capture_output=True, text=True,
                                          check=True).stdout)
        by_name = {link["ifname"]: link for link in links}
        assert sorted(by_name) == ["eth0", "lo"]
        assert [(a["local"], a["prefixlen"]) for a in by_name["lo"]["addr_info"]] == [("127.0.0.1", 32), ("::1", 128)]
        eth0 = by_name["eth0"]
        assert [(a["local"], a["prefixlen"]) for a in eth0["addr_info"]] == [(h.address, 16)]
        assert (eth0["address"], eth0["mtu"]) == (h.mac, 1500)
        with fed.on_host(h.name):  # /proc/sys/net is the namespace of the thread that reads it
            assert Path("/proc/sys/net/ipv4/conf/eth0/route_localnet").read_text().strip() == "1"


def test_the_dataset_is_published_with_both_sites_as_seen_from_a_t3_host(fed):
    with fed.on_host("t3-2"):
        record = get_json(f"{fed.repo}{urls.dataset_api(fed.dataset)}")
        sites = get_json(f"{fed.tracker_url}/api/sites")
    assert sorted(record["sites"]) == ["site1", "site2"]
    assert sorted(s["name"] for s in sites["sites"] if s.get("up")) == ["site1", "site2"]


def test_a_t3_host_gets_the_torrent_from_the_services_hosts_address(fed, tmp_path):
    path = urls.dataset_torrent(fed.dataset)
    with fed.inside():  # from the bridge's namespace: what the repository serves
        expected = fed.info_hash(fed.dataset)
    got = fed.run_on("t3-1", ["curl", "-sS", "-o", str(tmp_path / "t"), "-w", "%{http_code} %{local_ip}",
                              f"{fed.repo}{path}"], capture_output=True, text=True, timeout=30)
    assert got.stdout == "200 127.20.2.1", got.stderr  # sent from the T3 host's own address
    assert metainfo.parse((tmp_path / "t").read_bytes()).info_hash == expected
    # `btswarm run --host`: the repository in the environment, no listen address, the host's interfaces
    script = 'echo "$BTSWARM_GET_REPO ${BTSWARM_GET_LISTEN-unset}"; python3 -c "import urllib.request as u, os; ' \
             f'print(u.urlopen(os.environ[\'BTSWARM_GET_REPO\'] + \'{path}\').read()[:11])"'
    run = subprocess.run([command("btswarm"), "run", "--state", str(fed.state), "--host", "t3-2", "--", "sh", "-c",
                          script], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [f"{fed.repo} unset", "b'd8:announce'"]


def test_hosts_reach_each_others_services_and_127_0_0_1_is_this_host(fed):
    urls_ = [f"{fed.tracker_url}/healthz", f"{fed.repo}/healthz", *(f"{s.control_url}/healthz" for s in fed.sites)]
    for name in ("t3-1", "site1"):
        codes = fed.run_on(name, ["curl", "-sS", "-w", "%{http_code}\\n", *(["-o", "/dev/null"] * len(urls_)), *urls_],
                           capture_output=True, text=True, timeout=30)
        assert codes.stdout.split() == ["200"] * len(urls_), codes.stderr
    # The repository listens on the services host's address: on a T3 host 127.0.0.1 is that T3 itself.
    probe = (f"import socket\ntry: socket.create_connection(('127.0.0.1', {hosts.REPO_PORT}), timeout=5)\n"
             "except OSError as e: print(type(e).__name__)")
    local = fed.run_on("t3-1", [sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert local.stdout.strip() == "ConnectionRefusedError", local.stderr


def test_a_t3_hosts_uplink_holds_its_rate_in_its_class_counter(fed):
    payload = 5 * 2**20
    received: dict = {}
    server, thread = sink(fed, received)
    before = fed.link_bytes()
    send = (f"import socket; s = socket.create_connection(({hosts.SERVICES_ADDRESS!r}, {server.getsockname()[1]}));"
            f"s.sendall(bytes({payload})); s.close()")
    with server:
        sent = fed.run_on("t3-1", [sys.executable, "-c", send], capture_output=True, text=True, timeout=60)
        assert sent.returncode == 0, sent.stderr
        thread.join(30)
    assert received["bytes"] == payload
    counted = fed.link_bytes()["127.20.2.1"] - before["127.20.2.1"]
    assert payload <= counted <= payload * 1.1  # what the T3 sent went through its uplink's class
    rate = received["bytes"] * 8 / (received["last"] - received["first"])
    assert 0.75 * T3_RATE <= rate <= 1.1 * T3_RATE, rate
    assert fed.link_rate("127.20.1.2") == 200_000_000 and fed.link_rate("127.20.0.1") is None


def test_a_second_federation_of_hosts_beside_the_first_and_ctrl_c_removes_it(fed, tmp_path):
    second = start_federation(tmp_path, "--hosts", "--sites", "1", "--t3-hosts", "1", "--sample-files", "2",
                              "--sample-size", "2M", "--heartbeat", "1s", log_name="second")
    try:
        assert not ({h.netns for h in second.hosts} | {second.netns}) & ({h.netns for h in fed.hosts} | {fed.netns})
        assert second.repo == fed.repo  # the same address, on another bridge
        with second.on_host("t3-1"):
            assert get_json(f"{second.repo}{urls.dataset_api(second.dataset)}")["sites"] == ["site1"]
        with fed.on_host("t3-1"):
            assert sorted(get_json(f"{fed.repo}{urls.dataset_api(fed.dataset)}")["sites"]) == ["site1", "site2"]

        def ctrl_c() -> None:
            second.proc.send_signal(signal.SIGINT)
            second.proc.wait(30)
        stopped_cleanly(second, ctrl_c)
    finally:
        second.stop(timeout=30)
    with fed.on_host("t3-2"):  # the first one is untouched
        assert get_json(f"{fed.repo}{urls.dataset_api(fed.dataset)}")["sites"]
    wait_for(lambda: fed.proc.poll() is None, 1, "the first federation to keep running")
