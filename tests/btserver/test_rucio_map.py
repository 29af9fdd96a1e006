"""Replicas at an RSE → a dataset (btserver.rucio_map): PFN map, problems per file, the snapshot. Pure.

The answers below have the shape of Rucio 41's (`GET /dids/{scope}/{name}/files`,
`POST /replicas/list`); the same code runs against a real server in tests/rucio/.
"""

from __future__ import annotations

import pytest

from btserver import publisher, rucio_map
from btserver.holdings import Catalog
from torrents.did import DID

RSE = "UC_T2_DATADISK"
DID1 = DID("data18", "data18.ds1")
MAP = {"root://door.uc:1094//pnfs/uc/atlasdatadisk/": "/pnfs/uc/atlasdatadisk/",
       "file://localhost/pnfs/uc/atlasdatadisk/": "/pnfs/uc/atlasdatadisk/",
       "root://door.uc:1094//pnfs/uc/atlasdatadisk/rucio/special/": "/special/"}


def content(*names: str) -> list[dict]:
    return [{"scope": "data18", "name": n, "bytes": 10 + i, "adler32": f"0000000{i}", "guid": None}
            for i, n in enumerate(names)]


def replica(name: str, *pfns: tuple[str, int], rse: str = RSE) -> dict:
    return {"scope": "data18", "name": name, "bytes": 10, "adler32": "00000000",
            "pfns": {p: {"rse": rse, "type": "DISK", "domain": "wan", "priority": prio} for p, prio in pfns},
            "rses": {rse: [p for p, _ in pfns]}}


def test_pfns_map_by_the_longest_prefix_and_never_climb_out():
    assert rucio_map.pfn_to_path("root://door.uc:1094//pnfs/uc/atlasdatadisk/rucio/data18/ab/cd/f.root", MAP) \
        == "/pnfs/uc/atlasdatadisk/rucio/data18/ab/cd/f.root"
    assert rucio_map.pfn_to_path("root://door.uc:1094//pnfs/uc/atlasdatadisk/rucio/special/x", MAP) == "/special/x"
    assert rucio_map.pfn_to_path("davs://door.uc:2880/pnfs/uc/atlasdatadisk/x", MAP) is None
    assert rucio_map.pfn_to_path("root://door.uc:1094//pnfs/uc/atlasdatadisk/../../etc/passwd", MAP) is None
    assert rucio_map.local_roots(MAP) == ["/pnfs/uc/atlasdatadisk", "/special"]


def test_a_complete_replica_becomes_a_dataset_named_by_its_did_with_rucio_sizes_and_checksums():
    reps = [replica("f1.root", ("root://door.uc:1094//pnfs/uc/atlasdatadisk/rucio/data18/11/22/f1.root", 2),
                    ("file://localhost/pnfs/uc/atlasdatadisk/rucio/data18/11/22/f1.root", 1)),
            replica("f0.root", ("root://door.uc:1094//pnfs/uc/atlasdatadisk/rucio/data18/33/44/f0.root", 1))]
    ds, problems = rucio_map.dataset_from_rucio(DID1, content("f0.root", "f1.root"), reps, RSE, MAP)
    assert problems == []
    assert ds.name == "data18:data18.ds1" and ds.did == DID1
    assert [(f.lfn, f.size, f.adler32) for f in ds.files] == [("f0.root", 10, "00000000"), ("f1.root", 11, "00000001")]
    # both PFNs map to one path: listed once
    assert ds.files[1].pfns == ("/pnfs/uc/atlasdatadisk/rucio/data18/11/22/f1.root",)
    assert ds.record()["did"] == {"scope": "data18", "name": "data18.ds1"}


def test_lower_priority_value_first():
    reps = [replica("f0.root", ("root://door.uc:1094//pnfs/uc/atlasdatadisk/b", 2),
                    ("root://door.uc:1094//pnfs/uc/atlasdatadisk/a", 1))]
    ds, _ = rucio_map.dataset_from_rucio(DID1, content("f0.root"), reps, RSE, MAP)
    assert ds.files[0].pfns == ("/pnfs/uc/atlasdatadisk/a", "/pnfs/uc/atlasdatadisk/b")


def test_each_file_that_keeps_the_dataset_back_is_a_problem_and_the_dataset_is_withheld():
    reps = [replica("f0.root", ("root://door.uc:1094//pnfs/uc/atlasdatadisk/f0", 1)),
            replica("f2.root", ("davs://elsewhere:443/f2", 1)),
            replica("f3.root", ("root://door.uc:1094//pnfs/uc/atlasdatadisk/f3", 1), rse="OTHER_RSE")]
    ds, problems = rucio_map.dataset_from_rucio(DID1, content("f0.root", "f1.root", "f2.root", "f3.root"), reps,
                                                RSE, MAP)
    assert ds is None
    text = [str(p) for p in problems]
    assert text[:3] == ["data18:data18.ds1/f1.root: no replica at UC_T2_DATADISK",
                        "data18:data18.ds1/f2.root: no pfn_map prefix matches its PFN at UC_T2_DATADISK "
                        "(davs://elsewhere:443/f2)",
                        "data18:data18.ds1/f3.root: no replica at UC_T2_DATADISK"]
    assert text[3] == "data18:data18.ds1: 3 of 4 files not usable at UC_T2_DATADISK; not served until complete"
    assert {p.dataset for p in problems} == {"data18:data18.ds1"}


def test_an_empty_dataset_and_clashing_names_are_withheld():
    assert rucio_map.dataset_from_rucio(DID1, [], [], RSE, MAP)[0] is None
    clash = [{"scope": s, "name": "same.root", "bytes": 1, "adler32": None} for s in ("data18", "user.x")]
    reps = [{**replica("same.root", ("file://localhost/pnfs/uc/atlasdatadisk/" + s, 1)), "scope": s}
            for s in ("data18", "user.x")]
    ds, problems = rucio_map.dataset_from_rucio(DID1, clash, reps, RSE, MAP)
    assert ds is None and "listed twice" in str(problems[0])


def test_the_snapshot_round_trips_and_a_damaged_one_is_refused():
    reps = [replica("f0.root", ("root://door.uc:1094//pnfs/uc/atlasdatadisk/f0", 1))]
    ds, _ = rucio_map.dataset_from_rucio(DID1, content("f0.root"), reps, RSE, MAP)
    _, problems = rucio_map.dataset_from_rucio(DID("data18", "b"), content("x"), [], RSE, MAP)
    cat = Catalog((ds,), tuple(problems), containers={"data18:cont": (str(DID1), "data18:b")})
    back = rucio_map.catalog_from_json(rucio_map.catalog_to_json(cat, 123.0))
    assert back == cat and back.datasets[0].did == DID1 and back.datasets[0].files[0].pfns == ds.files[0].pfns
    assert back.containers == {"data18:cont": (str(DID1), "data18:b")}
    saved = rucio_map.catalog_to_json(cat, 123.0)
    del saved["containers"]  # a snapshot from before containers were kept
    assert rucio_map.catalog_from_json(saved).containers == {}


@pytest.mark.parametrize("sent, now, changes", [
    ({}, {"s:c": ("s:a",)}, {"s:c": ("s:a",)}),  # new
    ({"s:c": ("s:a",)}, {"s:c": ("s:a",)}, {}),  # unchanged: nothing sent
    ({"s:c": ("s:a",)}, {"s:c": ("s:a", "s:b")}, {"s:c": ("s:a", "s:b")}),  # attached
    ({"s:c": ("s:a",), "s:d": ("s:b",)}, {"s:d": ("s:b",)}, {"s:c": ()}),  # gone from Rucio: withdrawn
    ({}, {"s:e": ()}, {"s:e": ()}),  # an empty container: said, so a site's earlier word is replaced
])
def test_a_refresh_tells_the_repository_only_the_containers_that_changed(sent, now, changes):
    assert publisher.container_changes(sent, now) == changes
    for bad in ({}, {"version": 1, "datasets": [{"did": None}]}, [1]):
        with pytest.raises(Exception) as err:
            rucio_map.catalog_from_json(bad)
        assert "snapshot" in str(err.value)
