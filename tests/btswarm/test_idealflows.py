"""scripts/idealflows.py: the Kumar-Ross schedule as TCP flows, bench_hosts.py's `--ideal` baseline. The plan
is pure; the flows themselves run on the hosts test bed (root), by the benchmark."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "idealflows.py"
spec = importlib.util.spec_from_file_location("idealflows", SCRIPT)
idealflows = importlib.util.module_from_spec(spec)
spec.loader.exec_module(idealflows)

SITES, MB = ["site1", "site2", "site3"], 1_000_000
R = C = 12.5 * MB  # 100 Mbit/s


def received(flows, host):
    return sum(b for (_, to), b in flows.items() if to == host)


def sent(flows, host):
    return sum(b for (src, _), b in flows.items() if src == host)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_each_t3_gets_the_dataset_and_every_uplink_is_busy_for_the_bound(n):
    t3s = [f"t3-{k}" for k in range(1, n + 1)]
    flows = idealflows.plan(100 * MB, n, SITES, t3s, R, C)
    bound = n * 100 * MB / (3 * R + n * C)  # the uplinks' term binds for two T3s or more here
    for t in t3s:
        assert received(flows, t) == pytest.approx(100 * MB, abs=n)
        assert sent(flows, t) == pytest.approx(C * bound, rel=1e-6)
    for s in SITES:
        assert sent(flows, s) == pytest.approx(R * bound, rel=1e-6)


def test_one_t3_takes_a_third_from_each_site_and_sends_nothing():
    flows = idealflows.plan(99 * MB, 1, SITES, ["t3-1"], R, C)
    assert flows == {(s, "t3-1"): 33 * MB for s in SITES}


def test_with_fast_t3s_the_sites_uplinks_bind_and_each_sends_its_share_once():
    # C ten times R: the bound is S/ΣR, the sites send one copy in all and the T3s pass the rest on.
    flows = idealflows.plan(90 * MB, 3, SITES, ["a", "b", "c"], R, 10 * C)
    assert sum(sent(flows, s) for s in SITES) == pytest.approx(90 * MB, abs=3)
    assert all(received(flows, t) == pytest.approx(90 * MB, abs=3) for t in "abc")
