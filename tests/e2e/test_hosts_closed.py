"""A T3 host that accepts no inbound connection (issue 47): four T3s on the hosts test bed, one closed.

t3-4 drops every inbound connection attempt (nftables in its namespace, with a counter). It starts
first, then the other three. Told `--closed`, its announces say inbound=0: the tracker gives it the swarm
but never records it, so no other T3 is handed it; everyone completes with the sites' bytes. Not told,
the tracker lists it, and the others' connection attempts to it are dropped unanswered (what the flag
spares them; `scripts/bench_closed.py` measures the times). Root only.
"""

from __future__ import annotations

import os

import pytest

from btswarm.federation import get_json
from btswarm.testbed import firewall
from tests.e2e.conftest import bt_get_on, on_disk, result, same_as_source, start_federation
from tests.support import wait_for
from torrents import sample

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root: network namespaces, nftables")]

CLOSED, OTHERS = "t3-4", ("t3-1", "t3-2", "t3-3")


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostsclosed")
    sample.generate(tmp / "data", files=8, total_size=32 * 2**20)
    fed = start_federation(tmp, "--hosts", "--sites", "2", "--t3-hosts", "4", "--data", str(tmp / "data"),
                           "--heartbeat", "1s", "--site-link", "40mbit", "--client-link", "100mbit")
    try:
        yield fed
    finally:
        assert fed.stop(timeout=30) == 0, fed.log()[-3000:]


@pytest.fixture
def closed_host(fed):
    netns = fed.host(CLOSED).netns
    firewall.apply(netns, firewall.closed())
    yield netns
    firewall.unblock(netns)


def swarm(fed) -> dict:
    with fed.inside():
        info_hash = get_json(f"{fed.repo}/api/datasets/{fed.dataset}")["info_hash"]
        return get_json(f"{fed.tracker_url}/api/swarms/{info_hash}")


def fetch(fed, tmp_path, *closed_args: str) -> tuple[dict, dict]:
    """The closed T3 first (until it has bytes: it announced), then the others; every result, and the swarm
    as the tracker saw it while the closed T3 was alone."""
    first = bt_get_on(fed, CLOSED, tmp_path / CLOSED, *closed_args)
    wait_for(lambda: on_disk(tmp_path / CLOSED) > 0 or first.poll() is not None, timeout=60,
             what="the closed T3's first bytes")
    alone = swarm(fed)
    rest = {h: bt_get_on(fed, h, tmp_path / h) for h in OTHERS}
    results = {CLOSED: result(first), **{h: result(p) for h, p in rest.items()}}
    for h, (code, doc, err) in results.items():
        assert code == 0, (h, err)
        assert same_as_source(fed, tmp_path / h / fed.dataset), h
    return results, alone


def test_a_closed_t3_that_says_so_is_handed_out_to_nobody_and_everyone_completes(fed, closed_host, tmp_path):
    results, alone = fetch(fed, tmp_path, "--closed")
    assert alone["leechers"] == 0, alone  # the tracker never recorded it (the seeds are the sites')


def test_a_closed_t3_that_does_not_say_so_costs_the_others_connection_attempts(fed, closed_host, tmp_path):
    results, alone = fetch(fed, tmp_path)
    assert alone["leechers"] == 1, alone
    assert firewall.dropped(closed_host) > 0
