"""A worker node whose only way out is its site's squid (issue 47): bt-get through Debian's squid, on the hosts test bed.

squid runs on the services host (127.20.0.1:3128); t3-1 drops every new outgoing connection but those to it
(nftables in its namespace), so the repository, the tracker, the sites and the other T3 are out of its
direct reach. With only `http_proxy` set, as a batch node has it, bt-get resolves the dataset, announces
and fetches from the sites' web seeds through squid, says why in one line, and the bytes are the
sites'. The tracker never hands the proxied T3 out (its announces come from squid's address). Root only.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from btswarm.testbed import firewall
from btswarm.testbed.squid import Squid
from tests.e2e.conftest import bt_get_on, result, same_as_source, start_federation
from torrents import sample

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root: network namespaces, nftables"),
              pytest.mark.skipif(not os.path.exists("/usr/sbin/squid"), reason="squid not installed "
                                 "(scripts/install-system-deps.sh)")]

PROXIED = "t3-1"


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostsproxy")
    sample.generate(tmp / "data", files=6, total_size=12 * 2**20)
    fed = start_federation(tmp, "--hosts", "--sites", "2", "--t3-hosts", "2", "--data", str(tmp / "data"),
                           "--heartbeat", "1s", "--site-link", "100mbit", "--client-link", "100mbit")
    services = fed.host("services")
    squid = fed.squid = Squid(services.address, 3128, netns=services.netns)
    try:
        squid.start()
        firewall.apply(fed.host(PROXIED).netns, firewall.only_through(f"{services.address}:3128"))
        yield fed
    finally:
        squid.stop()
        assert fed.stop(timeout=30) == 0, fed.log()[-3000:]


def carried(line: str) -> bool:
    """Whether squid's log line (native format: time elapsed client TAG/STATUS bytes method URL ...) is a request
    squid carried or one the client dropped before any answer (status 000). Dropped midway, as a web seed's range
    cancelled at completion or the last announce cut short at exit, its tag ends in _ABORTED; a cache hit, a
    denial or squid's own error page is not carried."""
    tag, _, status = line.split()[3].partition("/")
    return status == "000" or (tag.removesuffix("_ABORTED") in ("TCP_MISS", "TCP_TUNNEL") and status in ("200", "206"))


def direct(fed, host: str, url: str) -> int:
    """curl's exit status for `url` from `host`, with every proxy ignored (7: refused, 28: timed out)."""
    h = fed.host(host)
    return subprocess.run(["ip", "netns", "exec", h.netns, "curl", "-s", "-o", "/dev/null", "--noproxy", "*",
                           "--max-time", "3", url], capture_output=True, timeout=30).returncode


def test_the_proxied_host_reaches_nothing_directly(fed):
    assert direct(fed, PROXIED, fed.ready.repo + "/api/datasets") != 0
    assert direct(fed, PROXIED, fed.ready.repo.replace(":8080", ":6969") + "/metrics") != 0
    assert direct(fed, "t3-2", fed.ready.repo + "/api/datasets") == 0  # the others do


def test_bt_get_fetches_through_squid_alone_and_says_why_in_one_line(fed, tmp_path):
    squid = fed.squid
    before = len(squid.access_log())
    proxy = {"http_proxy": squid.url}
    code, doc, err = result(bt_get_on(fed, PROXIED, tmp_path / PROXIED, env=proxy))
    assert code == 0, err
    assert same_as_source(fed, tmp_path / PROXIED / fed.dataset)
    # Said once, at the start: the switch to the web seeds and why (on stderr without --json)
    (switch,) = doc["web_seed_switches"]
    assert switch["to"] == "web seeds" and switch["after_s"] < 2.0, switch
    assert switch["why"].startswith(f"the tracker is reached through the proxy {squid.url}"), switch
    assert "web seeds of site" in switch["why"]
    # Every byte came from the sites' web seeds, and squid carried every request: the repository's answer,
    # the announces (inbound=0: from squid's address, no peer) and the web seeds' ranges.
    assert doc["sources"] and all(src.startswith("web seed site") for src in doc["sources"]), doc["sources"]
    log = squid.access_log()[before:]
    assert any(f"GET {fed.ready.repo}/api/datasets/" in line for line in log), log
    assert any("/announce?" in line and "inbound=0" in line for line in log), log
    sites = [h.address for h in fed.ready.hosts if h.name.startswith("site")]
    assert any(f"GET http://{ip}:8701/" in line for line in log for ip in sites), log
    refused = [line for line in log if not carried(line)]
    assert not refused, refused


def test_the_other_t3_is_never_handed_the_proxied_one(fed, tmp_path):
    squid = fed.squid
    proxied = bt_get_on(fed, PROXIED, tmp_path / PROXIED, "--seed-time", "20s", env={"http_proxy": squid.url})
    other = bt_get_on(fed, "t3-2", tmp_path / "t3-2", "-v")
    code, doc, err = result(other)
    assert code == 0, err
    assert same_as_source(fed, tmp_path / "t3-2" / fed.dataset)
    assert squid.address not in " ".join(doc["sources"]), doc["sources"]  # squid's address was never a peer
    pcode, pdoc, perr = result(proxied)
    assert pcode == 0, perr
    assert same_as_source(fed, tmp_path / PROXIED / fed.dataset)


def test_without_json_the_reason_is_one_line_on_stderr(fed, tmp_path):
    from btswarm import netns, run

    h = fed.host(PROXIED)
    env = run.host_env(fed.ready, h, {**os.environ, "http_proxy": fed.squid.url})
    done = subprocess.run(["bt-get", fed.dataset, "-o", str(tmp_path), "--timeout", "180"], env=env,
                          preexec_fn=netns.preexec(h.netns), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert same_as_source(fed, tmp_path / fed.dataset)
    said = [line for line in done.stderr.splitlines() if "proxy" in line]
    assert len(said) == 1, done.stderr
    assert said[0].startswith(f"bt-get: warning: the tracker is reached through the proxy {fed.squid.url}"), said
