"""When is a one-host federation ready: the pure rule, with the states met in practice."""

from __future__ import annotations

from urllib.parse import quote

from btswarm.up import readiness

ANNOUNCE = "http://127.0.0.1:7000/announce"
NAME = "data08_cos.00091949.physics_IDCosmic.merge.DPD_IDCOMM.o4_r653_p26_tid051203"


def status(info_hash: str | None = "a" * 40, ready: bool = True, problems=()) -> dict:
    return {"ready": ready, "datasets": [{"name": NAME, "info_hash": info_hash}] if info_hash else [],
            "problems": list(problems)}


def record(info_hash: str = "a" * 40, sites=("site1", "site2"), announce: str = ANNOUNCE, **more) -> dict:
    return {"info_hash": info_hash, "sites": list(sites),
            "magnet": f"magnet:?xt=urn:btih:{info_hash}&dn={NAME}&tr={quote(announce, safe='')}", **more}


def publication_gaps(*args) -> list[str]:
    state = readiness(*args)
    assert not state.failures and not state.warnings
    return list(state.waiting)


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


def test_a_dataset_no_site_can_serve_fails_at_once_with_the_reasons():
    problem = f"{NAME}/f1.root: adler32 of the replica is 00000001, the catalog says 0a0b0c0d"
    state = readiness([NAME], {"site1": status(None, problems=[problem]), "site2": status(None, problems=[problem])},
                      {}, TRACKER, ANNOUNCE)
    assert state.failures == (f"site1 cannot serve {NAME}: {problem}", f"site2 cannot serve {NAME}: {problem}")
    # one site refusing it while the other serves it is said, not waited for
    state = readiness([NAME], {"site1": status(), "site2": status(None, problems=[problem])},
                      {NAME: record(sites=("site1",))}, TRACKER, ANNOUNCE)
    assert state.ready and state.warnings == (f"site2 cannot serve {NAME}: {problem}",)


def test_a_site_whose_preparation_crashed_fails_at_once():
    crashed = {**status(None), "error": "preparing datasets failed: OSError: [Errno 5] Input/output error"}
    state = readiness([NAME], {"site1": status(), "site2": crashed}, {NAME: record(sites=("site1",))}, TRACKER,
                      ANNOUNCE)
    assert state.failures == ("site2: preparing datasets failed: OSError: [Errno 5] Input/output error",)


def test_replicas_nothing_decides_between_are_said_at_once():
    disputed = record(sites=("site1",), servable=False, problem=f"{NAME}: replicas disagree ...",
                      replica_sites=[{"site": "site1", "info_hash": "a" * 40, "state": "current"},
                                     {"site": "site2", "info_hash": "b" * 40, "state": "conflict"}])
    state = readiness([NAME], {"site1": status(), "site2": status("b" * 40)}, {NAME: disputed}, TRACKER, ANNOUNCE)
    assert state.ready and state.warnings == (
        f"{NAME}: replicas disagree ... (bt-get {NAME} refuses until this is settled: docs/repository.md)",)


def test_a_dissenting_site_is_a_warning_while_the_dataset_is_served():
    decided = record(sites=("site1", "site3"), servable=True, problem=f"{NAME}: site2 holds a partial replica",
                     replica_sites=[{"site": "site2", "info_hash": "b" * 40, "state": "partial"}])
    tracker = {"sites": [{"name": s, "up": True} for s in ("site1", "site2", "site3")]}
    state = readiness([NAME], {"site1": status(), "site2": status("b" * 40), "site3": status()}, {NAME: decided},
                      tracker, ANNOUNCE)
    assert state.ready and state.warnings == (f"{NAME}: site2 holds a partial replica",)
    # ...but a site whose new replica the repository has not judged yet is waited for
    state = readiness([NAME], {"site1": status(), "site2": status("c" * 40), "site3": status()}, {NAME: decided},
                      tracker, ANNOUNCE)
    assert state.waiting == (f"{NAME}: not yet published by site2",)


def test_the_banner_s_try_lines_plain_shaped_and_restricted(tmp_path):
    import dataclasses
    from btswarm import topology
    from btswarm.up import banner

    site = topology.Site("site1", "127.0.0.2", 7010, 7011, "s", 7520)
    fed = topology.Layout(state=tmp_path, data=tmp_path / "data", tracker_port=7000, repo_port=7001, sites=(site,))
    tail = banner(fed, [NAME]).splitlines()[-3:]
    assert tail == ["try:", f"  bt-get {NAME} --repo http://127.0.0.1:7001 -o /tmp/btswarm-get", "Ctrl-C stops it."]
    shaped = banner(fed, [NAME], netns_name="btswarm-x").splitlines()[-2:]
    assert shaped == [f"  btswarm run --state {tmp_path} -- bt-get {NAME} -o /tmp/btswarm-get", "Ctrl-C stops it."]
    members = topology.Members(("data08_cos",), "aud", tmp_path / "ca.pem", tmp_path / "ca.key", {})
    restricted = banner(dataclasses.replace(fed, members=members, issuer_port=7770),
                        ["plain.ds", f"data08_cos:{NAME}"], netns_name="btswarm-x").splitlines()
    assert f"members only: data08_cos (token issuer https://127.0.0.1:7770, CA {tmp_path / 'ca.pem'})" in restricted
    assert restricted[-3].startswith(f"  btswarm token --state {tmp_path}    # a member's token")
    assert restricted[-2] == (f"  btswarm run --state {tmp_path} -- bt-get data08_cos:{NAME} --config "
                              f"{tmp_path / 'config' / 'get.toml'} -o /tmp/btswarm-get")
