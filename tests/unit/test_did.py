"""Rucio DIDs as btswarm dataset names (torrents.did)."""

from __future__ import annotations

import pytest

from torrents.dataset import Dataset, DatasetFile
from torrents.did import DID, as_did, from_record, parse_did, parse_pattern
from torrents.errors import DatasetError


def test_a_did_splits_at_the_first_colon_and_prints_back():
    did = parse_did("data18_13TeV:data18_13TeV.00348895.physics_Main.deriv.DAOD_PHYS.r13286_p4910")
    assert did == DID("data18_13TeV", "data18_13TeV.00348895.physics_Main.deriv.DAOD_PHYS.r13286_p4910")
    assert str(did) == "data18_13TeV:data18_13TeV.00348895.physics_Main.deriv.DAOD_PHYS.r13286_p4910"
    assert parse_did("user.jdoe:user.jdoe.test-1").scope == "user.jdoe"


@pytest.mark.parametrize("text, problem", [
    ("nocolon", "expected SCOPE:NAME"),
    (":name", "bad scope"),
    ("a" * 26 + ":name", "bad scope"),
    ("sc ope:name", "bad scope"),
    ("scope:", "bad DID name"),
    ("scope:.hidden", "bad DID name"),
    ("scope:a/b", "'/'"),
    ("scope:a:b", "bad DID name"),
    ("scope:" + "n" * 250, "longer than 255"),
])
def test_what_cannot_name_a_dataset_is_refused_with_the_reason(text, problem):
    with pytest.raises(DatasetError) as err:
        parse_did(text)
    assert problem in err.value.problem
    assert as_did(text) is None


def test_patterns_take_stars_and_match_again_locally():
    p = parse_pattern("data18:data18.0034*.DAOD_*")
    assert p.wildcard and str(p) == "data18:data18.0034*.DAOD_*"
    assert p.matches(DID("data18", "data18.00348895.DAOD_PHYS"))
    # SQL LIKE would let '_' match any character; the local check does not
    assert not parse_pattern("s:a_b*").matches(DID("s", "aXb.1"))
    assert not p.matches(DID("other", "data18.00348895.DAOD_PHYS"))
    assert not parse_pattern("s:exact.name").wildcard
    for bad in ("s:a?b", "s:[ab]*", "nocolon*", "s:"):
        with pytest.raises(DatasetError):
            parse_pattern(bad)


def test_a_dataset_named_by_its_did_carries_it_in_its_record():
    did = DID("demo", "ds.1")
    ds = Dataset("demo:ds.1", (DatasetFile("f.root", 3, "0000abcd"),), did=did)
    assert ds.record()["did"] == {"scope": "demo", "name": "ds.1"}
    assert "did" not in Dataset("plain", (DatasetFile("f", 1),)).record()
    assert from_record(ds.record()["did"]) == did and from_record(None) is None
    with pytest.raises(DatasetError, match="named otherwise"):
        Dataset("demo:other", (DatasetFile("f", 1),), did=did)
    with pytest.raises(DatasetError):
        from_record({"scope": "demo"})
