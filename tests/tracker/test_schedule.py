"""tracker/schedule.py: which sites each T3 of a busy swarm is handed, rotation as T3s complete."""

from __future__ import annotations

import ipaddress

from tracker import schedule

SITES = ["site1", "site2", "site3"]


def t3(k: int) -> tuple[str, int]:
    return (f"127.0.0.{101 + k}", 6881)


def compact(*eps: tuple[str, int]) -> bytes:
    return b"".join(ipaddress.ip_address(ip).packed + port.to_bytes(2, "big") for ip, port in eps)


def test_a_lone_t3_is_handed_every_site():
    plan = schedule.SwarmPlan()
    assert schedule.assign(plan, t3(0), SITES, 0.0, 30) == "site1"
    assert schedule.share(plan, t3(0), SITES, 0.0) == frozenset(SITES)


def test_eight_t3s_are_spread_three_three_two_and_each_gets_only_its_site():
    plan = schedule.SwarmPlan()
    got = [schedule.assign(plan, t3(k), SITES, 0.0, 30) for k in range(8)]
    assert [got.count(s) for s in SITES] == [3, 3, 2]
    for k in range(3, 8):  # once every site has a leecher, each later T3 is handed its own site only
        assert schedule.share(plan, t3(k), SITES, 0.0) == {got[k]}


def test_two_t3s_on_three_sites_share_the_idle_third():
    plan = schedule.SwarmPlan()
    a, b = (schedule.assign(plan, t3(k), SITES, 0.0, 30) for k in range(2))
    assert (a, b) == ("site1", "site2")
    assert schedule.share(plan, t3(0), SITES, 0.0) == {"site1", "site3"}
    assert schedule.share(plan, t3(1), SITES, 0.0) == {"site2", "site3"}


def test_an_assignment_is_kept_across_announces():
    plan = schedule.SwarmPlan()
    first = [schedule.assign(plan, t3(k), SITES, 0.0, 30) for k in range(5)]
    assert [schedule.assign(plan, t3(k), SITES, 1.0, 30) for k in range(5)] == first


def test_rotation_a_completed_t3_frees_its_site_for_the_others():
    plan = schedule.SwarmPlan()
    for k in range(3):
        schedule.assign(plan, t3(k), SITES, 0.0, 30)
    assert schedule.share(plan, t3(0), SITES, 0.0) == {"site1"}
    schedule.leave(plan, t3(2))  # site3's only leecher completed
    assert schedule.share(plan, t3(0), SITES, 0.0) == {"site1", "site3"}
    assert schedule.assign(plan, t3(9), SITES, 0.0, 30) == "site3"  # the next arrival takes it


def test_a_vanished_t3_expires_and_a_site_that_stopped_seeding_is_reassigned():
    plan = schedule.SwarmPlan()
    schedule.assign(plan, t3(0), SITES, 0.0, 30)
    schedule.assign(plan, t3(1), SITES, 0.0, 30)
    assert schedule.share(plan, t3(0), SITES, 31.0) == frozenset(SITES)  # t3(1) gone: everything idle
    assert schedule.assign(plan, t3(0), ["site2", "site3"], 31.0, 30) == "site2"


def test_site_order_differs_by_swarm():
    firsts = {schedule.site_order(SITES, bytes([i]) * 20)[0] for i in range(30)}
    assert firsts == set(SITES)
    assert sorted(schedule.site_order(SITES, b"x" * 20)) == SITES


def test_keep_peers_drops_only_other_sites_seeds():
    site_of = {("127.0.0.11", 7000): "site1", ("127.0.0.12", 7000): "site2"}
    peers = compact(("127.0.0.11", 7000), ("127.0.0.12", 7000), t3(0), t3(1))
    kept = schedule.keep_peers(peers, site_of, frozenset({"site1"}))
    assert kept == compact(("127.0.0.11", 7000), t3(0), t3(1))
    assert schedule.has_site(kept, site_of)
    assert not schedule.has_site(compact(t3(0)), site_of)
    v6 = {("::1", 7000): "site2"}
    six = ipaddress.ip_address("::1").packed + (7000).to_bytes(2, "big")
    assert schedule.keep_peers(six, v6, frozenset({"site1"}), width=18) == b""
