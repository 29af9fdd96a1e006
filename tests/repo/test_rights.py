"""Who may change what is served: btrepo.rights' rules and the T3's place in identity's vote (pure)."""

from __future__ import annotations

import dataclasses

from btrepo import rights
from btrepo.identity import DecidedBy, FileFacts, Relation, VersionFacts, classify, decide

GOOD = {f"f{i}.root": FileFacts(1000 + i, None, f"good{i}") for i in range(3)}
BAD = {lfn: dataclasses.replace(f, xxh3=f.xxh3.replace("good", "bad")) for lfn, f in GOOD.items()}
CATALOG = {lfn: dataclasses.replace(f, adler32=f"{i:08x}") for i, (lfn, f) in enumerate(GOOD.items())}


def test_a_t2_is_never_refused_for_its_kind():
    assert rights.refusal_by_kind("site1", "T2", info_hash="b" * 40, served="a" * 40, declared=True) is None
    assert rights.refusal_by_kind("site1", "T2", info_hash="b" * 40, served=None, declared=False) is None


def test_a_t3_may_only_add_itself_to_the_served_version():
    served = "a" * 40
    assert rights.refusal_by_kind("t3", "T3", info_hash=served, served=served, declared=False) is None
    assert rights.refusal_by_kind("t3", "T3", info_hash="b" * 40, served=served, declared=False) == (
        f"t3 is a T3: it may only add itself as a holder of the served version {served}, not publish {'b' * 40} "
        "(other bytes or files, or the same built with other settings)")
    assert rights.refusal_by_kind("t3", "T3", info_hash=served, served=served, declared=True) == (
        "t3 is a T3: it may not declare a new version (only a storage site holding the dataset may); it may only "
        f"add itself as a holder of the served version {served}")
    assert rights.refusal_by_kind("t3", "T3", info_hash=served, served=None, declared=False) == (
        "t3 is a T3: it may only add itself as a holder of a version the repository serves, and no storage site "
        "has published this dataset")


def test_a_new_version_only_from_a_keeper_or_a_curator():
    served = VersionFacts("a" * 40, 1, GOOD, frozenset({"site1"}))
    assert rights.refusal_of_new_version("site1", served=served, confirmed=False, keepers={"site1"},
                                         curators=()) is None
    assert rights.refusal_of_new_version("site2", served=served, confirmed=False, keepers={"site1", "site3"},
                                         curators=()) == (
        f"site2 may not publish a new version: it has never held the served version {'a' * 40} (the sites that "
        "may: site1, site3; or a site in [repo] curators)")
    assert rights.refusal_of_new_version("site2", served=served, confirmed=False, keepers={"site1"},
                                         curators=("site2",)) is None
    # Files added to the served ones (undeclared, same bytes): nothing taken away, any T2 may.
    assert rights.refusal_of_new_version("site2", served=served, confirmed=False, keepers={"site1"},
                                         curators=(), adds_only=True) is None


def test_never_over_a_catalog_confirmed_version_unless_the_catalog_confirms_the_new_one():
    served = VersionFacts("a" * 40, 1, CATALOG, frozenset({"site1"}))
    assert served.catalog_confirmed
    assert rights.refusal_of_new_version("site1", served=served, confirmed=False, keepers={"site1"},
                                         curators=("site1",)) == (
        f"site1 may not publish a new version: the served version {'a' * 40} is confirmed by the catalog's "
        "checksums, and a new version must be too (every file with the catalog's adler32)")
    assert rights.refusal_of_new_version("site1", served=served, confirmed=True, keepers={"site1"},
                                         curators=()) is None


def test_a_t3_holder_never_votes():
    # site1 (a T2) holds A; a T3 holds B, a rival (stored before T3s were refused): A is served, undisputed.
    a = VersionFacts("A", 1, GOOD, frozenset({"site1"}))
    b = VersionFacts("B", 2, BAD, frozenset({"t3"}), Relation.CONFLICT, "A", t3=frozenset({"t3"}))
    d = decide([a, b])
    assert (d.current, d.disputed, d.decided_by) == ("A", False, DecidedBy.MAJORITY)
    # Two T3s beside one T2: still the T2's version.
    b2 = dataclasses.replace(b, holders=frozenset({"t3", "t3b"}), t3=frozenset({"t3", "t3b"}))
    assert decide([a, b2]).current == "A"
    # A newer generation that only T3s hold is not the live one.
    c = VersionFacts("C", 3, BAD, frozenset({"t3"}), Relation.NEW_VERSION, "A", t3=frozenset({"t3"}))
    assert decide([a, c]).current == "A"


def test_the_only_t2_holding_a_dataset_may_change_it_whatever_t3s_hold_it_too():
    served = VersionFacts("A", 1, GOOD, frozenset({"site1", "t3"}), t3=frozenset({"t3"}))
    assert classify(BAD, "site1", served).relation is Relation.NEW_VERSION


def test_why_the_served_version_changed():
    assert rights.publication_why("created", "first version", False) == "first publication"
    assert rights.publication_why("new_version", "files added (x.root)", True) == "new version: files added (x.root)"
    assert rights.publication_why("site_added", "", False) == "publication (site added)"
    change = rights.Change("2026-01-01T00:00:00Z", "b" * 40, "a" * 40, "site1", "first publication",
                           DecidedBy.ONLY)
    assert change.to_json() == {"at": "2026-01-01T00:00:00Z", "info_hash": "b" * 40, "previous": "a" * 40,
                                "who": "site1", "why": "first publication", "decided_by": "only",
                                "served_because": "no rival contests it"}
