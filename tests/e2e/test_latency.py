"""Links with latency (`btswarm up --site-link 100mbit/40ms`): the delay line adds the round trip asked for.

What a user would check: the round trip between two addresses (TCP
connect time: one SYN there, one SYN-ACK back), that the link's rate is
still its rate with the delay on, and a bt-get's bytes. The model: each
link adds its RTT to every round trip through it (site1 at 40 ms and a
client at 0 ms: 40 ms; site1 and site2 at 100 ms: 140 ms).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import struct
import subprocess

import pytest

from btswarm import topology
from btswarm.trees import compare_trees
from tests.e2e.conftest import start_federation
from tests.support import command
from torrents import sample

pytestmark = pytest.mark.slow

RATE = 100_000_000
SITE1_RTT, SITE2_RTT = 0.040, 0.100
TCPI_RTT = 68  # offset of tcpi_rtt (µs) in struct tcp_info (linux/tcp.h)


@pytest.fixture(scope="module")
def delayed(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root: a private network namespace, tc and a TUN device")
    tmp = tmp_path_factory.mktemp("latency")
    sample.generate(tmp / "data", files=2, total_size=32 * 2**20, jitter=0)
    fed = start_federation(tmp, "--sites", "2", "--data", str(tmp / "data"), "--heartbeat", "1s",
                           "--site-link", "100mbit/40ms", "--site-link", "site2=100mbit/100ms",
                           "--client-link", "100mbit", "--client-addresses", "2")
    yield fed
    name = fed.netns
    assert fed.stop(timeout=30) == 0, fed.log()[-3000:]
    assert not os.path.exists(f"/run/netns/{name}"), "the namespace outlived btswarm up"
    # The delay line was stopped by btswarm up (its counters are written on SIGTERM) and carried the traffic.
    counters = json.loads((fed.state / "logs" / "delayline.log").read_text().strip().splitlines()[-1])
    assert counters["packets"] > 100, counters


def connect_rtts(fed, src: str, dst: tuple[str, int], n: int = 7) -> list[float]:
    """TCP connect from `src` to `dst`, n times, inside the federation's namespace: the kernel's round
    trip of each (TCP_INFO's tcpi_rtt, what `ss -ti` shows: SYN sent to SYN-ACK received, timed where
    they pass, so not how late a loaded host wakes this test), seconds."""
    out = []
    with fed.inside():
        for _ in range(n):
            with socket.socket() as s:
                s.settimeout(10)
                s.bind((src, 0))
                s.connect(dst)
                info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
                out.append(struct.unpack_from("I", info, TCPI_RTT)[0] / 1e6)
    return out


def control(fed, site: str) -> tuple[str, int]:
    host, port = fed.site(site).control_url.split("//")[1].rsplit(":", 1)
    return host, int(port)


@pytest.mark.parametrize("src, site, rtt", [
    (topology.client_ip(0), "site1", SITE1_RTT),  # a client without delay ↔ site1
    (topology.client_ip(0), "site2", SITE2_RTT),  # the override
    (topology.site_ip(0), "site2", SITE1_RTT + SITE2_RTT),  # both ends delayed: their sum
])
def test_round_trip_is_what_was_asked(delayed, src, site, rtt):
    times = connect_rtts(delayed, src, control(delayed, site))
    # The median: a loaded host can delay one connect (a late wakeup), not most of them.
    assert 0.9 * rtt <= statistics.median(times) <= 1.1 * rtt, [round(t * 1e3, 1) for t in times]


def test_undelayed_addresses_keep_no_delay(delayed):
    """The tracker on 127.0.0.1 from a client without delay: loopback, not the delay line."""
    host, port = delayed.tracker_url.split("//")[1].rsplit(":", 1)
    times = connect_rtts(delayed, topology.client_ip(1), (host, int(port)))
    assert statistics.median(times) < 0.005, [round(t * 1e3, 1) for t in times]


def test_rate_with_delay_is_the_links_rate(delayed, tmp_path):
    """A 16 MiB file from site1's web seed to a client: after its first byte it arrives at site1's rate.

    With lo's 64 KiB segments TCP's first window (10 segments, 640 KiB) is
    already above the 500 KB the 100 Mbit/s × 40 ms path holds, so there is
    no slow start to allow for: from the first byte on the time is size / R.
    """
    lfn = sorted(p.name for p in delayed.source.iterdir())[0]
    url = f"{delayed.site('site1').web_url}/data/{delayed.dataset}/{lfn}"
    before = delayed.link_bytes()["127.0.0.2"]
    with delayed.inside():
        result = subprocess.run(["curl", "-sS", "--fail", "--interface", topology.client_ip(1), "-o",
                                 str(tmp_path / lfn), "-w", "%{time_connect} %{time_starttransfer} %{time_total}",
                                 url], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    connect, first, total = map(float, result.stdout.split())
    size = (tmp_path / lfn).stat().st_size
    assert size == (delayed.source / lfn).stat().st_size
    rate = size * 8 / (total - first)
    assert 0.75 * RATE <= rate <= 1.25 * RATE, f"{rate / 1e6:.1f} Mbit/s (connect {connect * 1e3:.1f} ms)"
    # ... and the link's counters (lo's and the delay line's htb together) saw the file leave site1.
    assert delayed.link_bytes()["127.0.0.2"] - before >= size
    assert 0.9 * SITE1_RTT <= connect <= 1.5 * SITE1_RTT, connect  # one round trip; one sample, so looser above


def test_bt_get_over_delayed_links_gets_identical_bytes_from_its_peers(delayed, tmp_path):
    """From the sites' BitTorrent seeds, not their web seeds: libtorrent's listening sockets are bound to
    lo (`127.0.0.2%lo`) and refused every connection that came in on the delay line's device, so bt-get
    took the peer ports for blocked and fell back to the web seeds."""
    result = subprocess.run([command("btswarm"), "run", "--state", str(delayed.state), "--", "bt-get",
                             delayed.dataset, "-o", str(tmp_path), "--json"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert compare_trees(delayed.source, tmp_path / delayed.dataset) == []
    doc = json.loads(result.stdout)
    assert doc["web_seed_switches"] == [] and set(doc["sources"]) == {"site1", "site2"}, doc["sources"]
