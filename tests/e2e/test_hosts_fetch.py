"""bt-get as a physicist runs it, across hosts (`btswarm up --hosts`): each T3 given only the repository.

The tracker and the repository on one host, each site on its own, T3s on theirs, every uplink shaped on
its host's interface. The T3s' bt-get has no --listen and nothing of its own in the environment: its
defaults must reach the tracker, the sites and the other T3 (issue 44). Root only.
"""

from __future__ import annotations

import os
import re
import signal

import pytest

from tests.e2e.conftest import bt_get_on, on_disk, result, same_as_source, start_federation
from tests.support import wait_for
from torrents import sample

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root: network namespaces, a bridge, tc shaping")]

# Slow sites beside faster T3s, as the T2s of a busy swarm are: a piece one T3 holds is worth taking from it.
SITE_LINK, T3_LINK = "40mbit", "100mbit"


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostsfetch")
    sample.generate(tmp / "data", files=8, total_size=32 * 2**20)
    fed = start_federation(tmp, "--hosts", "--sites", "2", "--t3-hosts", "4", "--data", str(tmp / "data"),
                           "--heartbeat", "1s", "--site-link", SITE_LINK, "--client-link", T3_LINK)
    yield fed
    assert fed.stop(timeout=30) == 0, fed.log()[-3000:]


def test_two_t3s_on_hosts_of_their_own_fetch_with_only_the_repository_and_trade(fed, tmp_path):
    procs = {h: bt_get_on(fed, h, tmp_path / h, *(("-v",) if h == "t3-1" else ())) for h in ("t3-1", "t3-2")}
    results = {h: result(p) for h, p in procs.items()}
    for h, (code, doc, err) in results.items():
        assert code == 0, (h, err)
        assert same_as_source(fed, tmp_path / h / fed.dataset), h
    # Its log says where it can be reached: every address, not the loopback its sibling workers would use.
    assert re.search(r"worker 1 listening on every address, port \d+", results["t3-1"][2]), results["t3-1"][2][-2000:]
    # They traded: bytes from the other T3's host address, named by it (which way depends on who is ahead).
    traded = {h: sum(n for src, n in results[h][1]["sources"].items() if src.startswith(fed.host(other).address + ":"))
              for h, other in (("t3-1", "t3-2"), ("t3-2", "t3-1"))}
    assert sum(traded.values()) > 0, {h: r[1]["sources"] for h, r in results.items()}


def test_a_t3_whose_partners_leave_mid_way_takes_the_sites_back_and_completes(fed, tmp_path):
    """Four T3s on two sites are a busy swarm: each lets sites go while the others stand in for them
    (btget/worker/steering.py). Three leave mid-way; the fourth takes the sites back and completes."""
    leavers = {h: bt_get_on(fed, h, tmp_path / h) for h in ("t3-1", "t3-2", "t3-3")}
    stayer = bt_get_on(fed, "t3-4", tmp_path / "t3-4")
    try:
        # Mid-way for the T3s that leave: a quarter of the dataset written by the first of them.
        wait_for(lambda: max(on_disk(tmp_path / h) for h in leavers) >= 8 * 2**20
                 or any(p.poll() is not None for p in leavers.values()), timeout=120,
                 what="the T3s that leave to be a quarter of the way")
        for p in leavers.values():
            p.send_signal(signal.SIGKILL)  # gone without a word: no 'stopped' announce, connections reset
    finally:
        for p in leavers.values():
            p.wait(30)
    code, doc, err = result(stayer)
    assert code == 0, err  # not exit 7 ("every seed left"): the sites it let go came back
    assert same_as_source(fed, tmp_path / "t3-4" / fed.dataset)
    assert sum(n for src, n in doc["sources"].items() if src.startswith(("site", "web seed site"))) > 0
