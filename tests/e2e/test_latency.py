"""Round trips on the hosts test bed with a site's own RTT and hosts without one (`btswarm up --hosts
--site-link 100mbit/40ms --site-link site2=100mbit/100ms --client-link 100mbit`).

What a user would check: that two hosts are as far apart as their links say. A site's override holds for
that site only; hosts whose links have no delay keep none between them, though each runs a delay line
for what it sends to the delayed sites. The sum of two links' round trips, a bulk flow's rate at a round
trip and bt-get's bytes across the delay lines are tests/btswarm/test_hosts_rtt.py's.
"""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import connect_ms, start_federation
from tests.support import need_root, stopped_cleanly

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def delayed(tmp_path_factory):
    need_root(what="network namespaces, a bridge, tc shaping and a TUN device")
    tmp = tmp_path_factory.mktemp("latency")
    fed = start_federation(tmp, "--hosts", "--sites", "2", "--t3-hosts", "2", "--sample-files", "1",
                           "--sample-size", "1M", "--heartbeat", "1s", "--site-link", "100mbit/40ms",
                           "--site-link", "site2=100mbit/100ms", "--client-link", "100mbit")
    yield fed
    stopped_cleanly(fed)
    # t3-2 spoke only to hosts without a delay (the services, t3-1): its delay line held nothing.
    counters = json.loads((fed.state / "logs" / "delayline-t3-2.log").read_text().splitlines()[-1])
    assert counters["packets"] == 0, counters


@pytest.mark.parametrize("src, dst, rtt_ms", [
    ("t3-1", "site2", 100),  # site2's own RTT, not the sites' 40 ms
    ("site1", "site2", 140),  # the sites' 40 ms kept for site1 beside the override
    ("t3-1", "t3-2", 0),  # neither link has a delay
    ("t3-2", "services", 0),
])
def test_round_trip_is_what_each_link_asked(delayed, src, dst, rtt_ms):
    took = connect_ms(delayed, src, dst)
    assert rtt_ms - 1.0 <= took <= rtt_ms + 3.0, (src, dst, took)
