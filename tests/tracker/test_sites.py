"""Heartbeats: signed, checked, and nothing changes on a bad one; the read API shows sites."""

from __future__ import annotations

import hashlib
import json
import time

from torrents import auth
from tracker.app import ANNOUNCER

from tests.tracker.helpers import SECRETS, announce, beat_body, heartbeat, query

H = hashlib.sha1(b"dataset").digest()


async def sites_json(client) -> list[dict]:
    async with client.session.get(client.make_url("/api/sites")) as resp:
        assert resp.status == 200
        return (await resp.json())["sites"]


async def test_signed_heartbeat_publishes_info_hashes(make_client):
    client = await make_client()
    refused = await announce(client, query(H))
    assert refused == {b"failure reason": b"unknown info_hash: not published in this federation"}
    assert await heartbeat(client, "site1", beat_body("site1", "http://127.0.0.2:8700", ["127.0.0.2:6881"],
                                                      [H], load=2, capacity=7)) == 200
    [site] = await sites_json(client)
    assert site["name"] == "site1" and site["up"] and site["can_seed"] == 1 and site["load"] == 2
    assert site["peers"] == ["127.0.0.2:6881"] and site["control_url"] == "http://127.0.0.2:8700"
    assert b"peers" in await announce(client, query(H, left=0))


async def test_bad_heartbeats_get_401_and_change_nothing(make_client):
    client = await make_client()
    body = beat_body("site1", "http://127.0.0.2:8700", ["127.0.0.2:6881"], [H])
    raw = json.dumps(body).encode()
    path = "/api/sites/site1/heartbeat"
    replay = auth.sign(SECRETS["site1"], "site1", "POST", path, raw)
    assert await heartbeat(client, "site1", body, headers=replay) == 200
    before = await sites_json(client)
    other = beat_body("site1", "http://127.0.0.9:8700", ["127.0.0.9:6881"], [hashlib.sha1(b"other").digest()])
    other_raw = json.dumps(other).encode()
    cases = {
        "unsigned": dict(headers={}),
        "wrong key": dict(secret="not-the-secret"),
        "stale": dict(headers=auth.sign(SECRETS["site1"], "site1", "POST", path, other_raw, now=time.time() - 3600)),
        "path site is not the signer": dict(signer="site2", path_site="site1"),
        "unknown site": dict(headers=auth.sign("x", "nobody", "POST", path, other_raw)),
    }
    for what, kw in cases.items():
        assert await heartbeat(client, "site1", other, **kw) == 401, what
    assert await heartbeat(client, "site1", body, headers=replay) == 401, "replayed"
    assert await sites_json(client) == before
    refused = await announce(client, query(hashlib.sha1(b"other").digest()))
    assert b"failure reason" in refused


async def test_malformed_heartbeat_body_is_400(make_client):
    client = await make_client()
    bad = beat_body("site1", "http://127.0.0.2:8700", ["127.0.0.2:6881"], [H])
    bad["can_seed"] = ["not-hex"]
    assert await heartbeat(client, "site1", bad) == 400
    assert await sites_json(client) == []


async def test_site_is_down_after_three_missed_heartbeats(make_client):
    from tracker.sites import SiteRegistry
    now = [100.0]
    registry = SiteRegistry(heartbeat_interval=10, clock=lambda: now[0])
    client = await make_client(sites=registry)
    assert await heartbeat(client, "site1", beat_body("site1", "http://127.0.0.2:8700", [], [H])) == 200
    now[0] += 30
    assert (await sites_json(client))[0]["up"] is True
    now[0] += 1
    assert (await sites_json(client))[0]["up"] is False


async def test_a_seed_the_site_no_longer_reports_is_forgotten_at_its_next_heartbeat(make_client):
    # The site's 'stopped' announce was lost: without this, the swarm would keep a seed that
    # turns peers away, and no start would be asked of any site for two intervals.
    client = await make_client()
    site = beat_body("site1", "http://127.0.0.1:8700", ["127.0.0.1:7001"], [H], seeding=[H])
    assert await heartbeat(client, "site1", site) == 200
    await announce(client, query(H, peer_id=b"-LT2110-site1seed000", port=7001, left=0))

    async def seeds() -> int:
        async with client.session.get(client.make_url(f"/api/swarms/{H.hex()}")) as resp:
            return (await resp.json())["seeds"] if resp.status == 200 else 0

    assert await seeds() == 1
    assert await heartbeat(client, "site1", {**site, "seeding": []}) == 200
    assert await seeds() == 0


async def test_holders_are_the_sites_up_that_list_the_info_hash_now(make_client):
    """What the repository lists web seeds by: a site that drops H from can_seed, or goes down, is left out."""
    from tracker.sites import SiteRegistry
    now = [100.0]
    client = await make_client(sites=SiteRegistry(heartbeat_interval=10, clock=lambda: now[0]))

    async def holders() -> list[str]:
        async with client.session.get(client.make_url(f"/api/swarms/{H.hex()}")) as resp:
            return (await resp.json())["holders"] if resp.status == 200 else []

    for site, ip in (("site1", "127.0.0.2"), ("site2", "127.0.0.3")):
        assert await heartbeat(client, site, beat_body(site, f"http://{ip}:8700", [f"{ip}:6881"], [H])) == 200
    assert await holders() == ["site1", "site2"]
    assert await heartbeat(client, "site1", beat_body("site1", "http://127.0.0.2:8700", ["127.0.0.2:6881"], [])) == 200
    assert await holders() == ["site2"]
    assert await heartbeat(client, "site1", beat_body("site1", "http://127.0.0.2:8700", ["127.0.0.2:6881"], [H])) == 200
    now[0] += 25
    assert await heartbeat(client, "site1", beat_body("site1", "http://127.0.0.2:8700", ["127.0.0.2:6881"], [H])) == 200
    now[0] += 10  # site2's last beat is 35 s old: three missed
    assert await holders() == ["site1"]


async def test_a_heartbeat_that_claims_another_kind_than_configured_is_403_and_changes_nothing(make_client, caplog):
    from tracker.config import TrackerConfig
    client = await make_client(TrackerConfig(site_secrets=SECRETS, site_kinds={"site3": "T3"}))
    t3_as_t2 = {**beat_body("site3", "http://127.0.0.4:8700", ["127.0.0.4:6881"], [H]), "kind": "T2"}
    path = "/api/sites/site3/heartbeat"
    raw = json.dumps(t3_as_t2).encode()
    async with client.session.post(client.make_url(path), data=raw,
                                   headers=auth.sign(SECRETS["site3"], "site3", "POST", path, raw)) as resp:
        assert resp.status == 403
        assert (await resp.json())["error"] == (
            'site3: claims to be a T2 site but [tracker] site_kinds makes it a T3: set [server] kind = "T3" at '
            "site3, or ask the federation's operators to change [tracker] site_kinds")
    assert "heartbeat from site3 refused: claims to be a T2 site" in caplog.text
    assert await heartbeat(client, "site1", {**beat_body("site1", "http://127.0.0.2:8700", [], [H]),
                                             "kind": "T3"}) == 403
    assert await sites_json(client) == []
    # The configured kind, or none said: accepted, and listed with the configured kind.
    assert await heartbeat(client, "site3", {**t3_as_t2, "kind": "T3"}) == 200
    assert await heartbeat(client, "site1", beat_body("site1", "http://127.0.0.2:8700", [], [H])) == 200
    assert [(s["name"], s["kind"]) for s in await sites_json(client)] == [("site1", "T2"), ("site3", "T3")]


def test_site_kinds_name_sites_with_a_secret_and_known_kinds():
    import pytest

    from torrents.errors import ConfigError
    from tracker.config import TrackerConfig
    with pytest.raises(ConfigError, match=r"\[tracker\] site_kinds: t3x: no secret for it in site_secrets"):
        TrackerConfig(site_secrets=SECRETS, site_kinds={"t3x": "T3"}).check_roles()
    with pytest.raises(ConfigError, match="site_kinds: site3: kind must be one of T2, T3, got 'T0'"):
        TrackerConfig(site_secrets=SECRETS, site_kinds={"site3": "T0"})


async def test_a_dataset_no_site_offers_any_more_stays_known_until_the_repository_says(make_client):
    # Both sites stop offering a replica they cannot read; the tracker's copy of the repository's list
    # may be a poll behind the publication. Its bt-get must hear of the sites, not "not published".
    client = await make_client()
    announcer = client.server.app[ANNOUNCER]
    announcer.set_published([])  # the repository's list, read before the site published H
    assert await heartbeat(client, "site1", beat_body("site1", "http://127.0.0.2:8700", [], [H])) == 200
    assert await heartbeat(client, "site1", beat_body("site1", "http://127.0.0.2:8700", [], [])) == 200
    assert b"failure reason" not in await announce(client, query(H))
    announcer.set_published([H])  # the next poll has it
    assert b"failure reason" not in await announce(client, query(H))
    announcer.set_published([])  # and the one after that no longer does: the dataset left the federation
    refused = await announce(client, query(H))
    assert refused == {b"failure reason": b"unknown info_hash: not published in this federation"}


async def test_the_bytes_sites_sent_show_per_site_and_per_swarm(make_client):
    client = await make_client()
    other = hashlib.sha1(b"other").digest()
    one = {**beat_body("site1", "http://127.0.0.2:8700", ["127.0.0.2:6881"], [H, other]),
           "uploaded": {H.hex(): 3_000_000, other.hex(): 5}}
    two = {**beat_body("site2", "http://127.0.0.3:8700", ["127.0.0.3:6881"], [H]), "uploaded": {H.hex(): 1_000}}
    assert await heartbeat(client, "site1", one) == 200 and await heartbeat(client, "site2", two) == 200
    # A site that holds H and sent none of it: listed with 0 (the repository counts its first send from there).
    assert await heartbeat(client, "site3", beat_body("site3", "http://127.0.0.4:8700", [], [H])) == 200
    assert {s["name"]: s["uploaded"] for s in await sites_json(client)} == {"site1": 3_000_005, "site2": 1_000,
                                                                           "site3": 0}
    await announce(client, query(H))  # a leecher: the swarm is listed
    async with client.session.get(client.make_url("/api/swarms")) as resp:
        [row] = [r for r in (await resp.json())["swarms"] if r["info_hash"] == H.hex()]
    assert row["site_uploaded"] == 3_001_000
    assert row["uploaded_by_site"] == {"site1": 3_000_000, "site2": 1_000, "site3": 0}
    async with client.session.get(client.make_url(f"/api/swarms/{other.hex()}")) as resp:
        assert (await resp.json())["site_uploaded"] == 5


async def test_a_malformed_uploaded_is_400_and_changes_nothing(make_client):
    client = await make_client()
    good = {**beat_body("site1", "http://127.0.0.2:8700", [], [H]), "uploaded": {H.hex(): 7}}
    assert await heartbeat(client, "site1", good) == 200
    before = await sites_json(client)
    for bad in ([H.hex()], {H.hex().upper(): 1}, {"not-hex": 1}, {H.hex(): -1}, {H.hex(): True}, {H.hex(): 1.5},
                {H.hex(): "7"}, {hashlib.sha1(i.to_bytes(4, "big")).hexdigest(): 1 for i in range(200_001)}):
        assert await heartbeat(client, "site1", {**good, "uploaded": bad, "load": 3}) == 400, str(bad)[:80]
    assert await sites_json(client) == before
    # A site older than the field says nothing of it: nothing sent.
    assert await heartbeat(client, "site2", beat_body("site2", "http://127.0.0.3:8700", [], [H])) == 200
    assert {s["name"]: s["uploaded"] for s in await sites_json(client)} == {"site1": 7, "site2": 0}
