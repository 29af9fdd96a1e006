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


# --- wired into the announcer ([tracker] schedule = true) ---------------------------------------------
async def test_the_announcer_hands_each_leecher_its_own_sites_seed_once_the_swarm_is_busy(make_client):
    import hashlib

    from tests.tracker.helpers import SECRETS, announce, beat_body, heartbeat, query
    from tests.tracker.test_stuck import endpoints
    from tracker.config import TrackerConfig

    h = hashlib.sha1(b"scheduled-swarm").digest()
    secrets = SECRETS
    client = await make_client(TrackerConfig(site_secrets=secrets, trust_ip=True, schedule=True))
    seeds = {f"site{k}": (f"127.0.0.{k + 1}", 6881) for k in (1, 2, 3)}
    for name, (ip, port) in seeds.items():
        body = beat_body(name, f"http://{ip}:1", [f"{ip}:{port}"], [h], seeding=[h])
        assert await heartbeat(client, name, body, secret=secrets[name]) == 200
        await announce(client, query(h, f"-LT2010-{name}seed000".encode()[:20], port=port, left=0, ip=ip))
    handed = []
    for k in range(4):
        answer = await announce(client, query(h, f"-TT0001-00000000000{k}".encode(), port=7000 + k,
                                               ip=f"127.0.0.{101 + k}"))
        handed.append(endpoints(answer) & set(seeds.values()))
    assert handed[0] == set(seeds.values())  # alone: every site
    assert len(handed[1]) == 2 and len(handed[2]) == 1 and len(handed[3]) == 1, handed
    assert handed[2] != handed[3]  # the third and fourth T3s: different sites
    # The third completes: its site is idle again and handed to the others.
    third = handed[2].pop()
    await announce(client, query(h, b"-TT0001-000000000002", port=7002, ip="127.0.0.103", left=0, event="completed"))
    again = await announce(client, query(h, b"-TT0001-000000000003", port=7003, ip="127.0.0.104"))
    assert third in endpoints(again)
