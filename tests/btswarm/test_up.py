"""When is a one-host federation ready: the pure rule, with the states met in practice."""

from __future__ import annotations

from urllib.parse import quote

from btswarm.up import publication_gaps

ANNOUNCE = "http://127.0.0.1:7000/announce"
NAME = "data08_cos.00091949.physics_IDCosmic.merge.DPD_IDCOMM.o4_r653_p26_tid051203"


def status(info_hash: str = "a" * 40, ready: bool = True) -> dict:
    return {"ready": ready, "datasets": [{"name": NAME, "info_hash": info_hash}]}


def record(info_hash: str = "a" * 40, sites=("site1", "site2"), announce: str = ANNOUNCE) -> dict:
    return {"info_hash": info_hash, "sites": list(sites),
            "magnet": f"magnet:?xt=urn:btih:{info_hash}&dn={NAME}&tr={quote(announce, safe='')}"}


TRACKER = {"sites": [{"name": "site1", "up": True}, {"name": "site2", "up": True}]}


def test_ready_when_every_site_published_its_current_version_to_this_tracker():
    assert publication_gaps([NAME], {"site1": status(), "site2": status()}, {NAME: record()}, TRACKER, ANNOUNCE) == []


def test_a_record_left_by_an_earlier_run_is_not_ready():
    # Same state directory, other data: the repository still lists the old version from both sites.
    gaps = publication_gaps([NAME], {"site1": status("b" * 40), "site2": status("b" * 40)}, {NAME: record()},
                            TRACKER, ANNOUNCE)
    assert gaps == [f"{NAME}: not yet published by site1", f"{NAME}: not yet published by site2"]


def test_a_torrent_announcing_to_an_earlier_tracker_is_not_ready():
    gaps = publication_gaps([NAME], {"site1": status(), "site2": status()},
                            {NAME: record(announce="http://127.0.0.1:6000/announce")}, TRACKER, ANNOUNCE)
    assert gaps == [f"{NAME}: the repository's .torrent announces to another tracker"] * 2


def test_sites_still_hashing_or_without_heartbeat_are_named():
    tracker = {"sites": [{"name": "site1", "up": True}, {"name": "site2", "up": False}]}
    gaps = publication_gaps([NAME], {"site1": status(ready=False), "site2": status()}, {NAME: record()},
                            tracker, ANNOUNCE)
    assert gaps == ["site1: still preparing datasets", "site2: no heartbeat at the tracker yet"]
