"""What a dataset is when sites disagree: btrepo.identity's rules, one scenario each (pure, milliseconds)."""

from __future__ import annotations

import dataclasses

from btrepo.identity import (DecidedBy, Decision, FileFacts, Relation, SiteState, VersionFacts, classify, compare,
                             decide)

GOOD = {f"f{i}.root": FileFacts(1000 + i, None, f"good{i}") for i in range(6)}
BAD = {lfn: dataclasses.replace(f, xxh3=f.xxh3.replace("good", "bad")) for lfn, f in GOOD.items()}
FIVE = {lfn: f for lfn, f in GOOD.items() if lfn != "f5.root"}
CATALOG = {lfn: dataclasses.replace(f, adler32=f"{i:08x}") for i, (lfn, f) in enumerate(GOOD.items())}


class Federation:
    """Versions as the repository stores them, published one at a time through `classify`."""

    def __init__(self) -> None:
        self.versions: dict[str, VersionFacts] = {}
        self.pinned: str | None = None

    def decision(self) -> Decision:
        return decide(list(self.versions.values()), self.pinned)

    def publish(self, site: str, info_hash: str, files: dict[str, FileFacts], declared: bool = False) -> Relation:
        if info_hash not in self.versions:  # judged against what is served and held before it
            served = self.versions.get(self.decision().current) if self.versions else None
            c = classify(files, site, served, declared=declared)
            self.versions[info_hash] = VersionFacts(info_hash, len(self.versions), files, frozenset(), c.relation,
                                                    c.base)
        for h, v in self.versions.items():  # a site holds one version of a dataset
            holders = v.holders | {site} if h == info_hash else v.holders - {site}
            self.versions[h] = dataclasses.replace(v, holders=holders)
        return self.versions[info_hash].relation

    def state(self, site: str) -> SiteState:
        return next(v.state for v in self.decision().sites if v.site == site)


def test_the_first_publication_is_the_dataset():
    fed = Federation()
    assert fed.publish("site1", "A", GOOD) is Relation.CREATED
    d = fed.decision()
    assert (d.current, d.decided_by, d.disputed, d.servable, d.conflict) == ("A", DecidedBy.ONLY, False, True, False)


def test_a_corrupt_replica_published_later_is_a_conflict_not_a_new_version():
    fed = Federation()
    fed.publish("site1", "A", GOOD)
    assert fed.publish("site2", "B", BAD) is Relation.CONFLICT
    d = fed.decision()
    # two sites, two contents, no catalog: nothing decides, and the name alone is not served
    assert (d.current, d.decided_by, d.disputed, d.servable, d.conflict) == \
        ("A", DecidedBy.FIRST_PUBLISHED, True, False, True)
    view = next(v for v in d.sites if v.site == "site2")
    assert view.state is SiteState.CONFLICT and view.difference.differing == tuple(sorted(GOOD))
    assert "replicas disagree" in d.summary("ds") and "site2 holds a conflicting replica: 6 files" in d.summary("ds")


def test_the_majority_wins_whoever_published_first():
    fed = Federation()
    fed.publish("site1", "B", BAD)
    fed.publish("site2", "A", GOOD)
    fed.publish("site3", "A", GOOD)
    d = fed.decision()
    assert (d.current, d.decided_by, d.disputed, d.servable) == ("A", DecidedBy.MAJORITY, False, True)
    assert fed.state("site1") is SiteState.CONFLICT and d.conflict


def test_catalog_checksums_decide_and_contradicted_bytes_are_never_served():
    fed = Federation()
    fed.publish("site2", "B", BAD)  # first, but its bytes differ from what site1 checked against the catalog
    fed.publish("site1", "A", CATALOG)
    d = fed.decision()
    assert (d.current, d.decided_by, d.disputed, d.contradicted) == ("A", DecidedBy.CATALOG, False, ("B",))
    assert fed.state("site2") is SiteState.CONTRADICTS_CATALOG
    fed.pinned = "B"  # not even an operator can make contradicted bytes the dataset
    assert fed.decision().current == "A"


def test_a_replica_that_lacks_a_file_is_partial_whichever_came_first():
    fed = Federation()
    fed.publish("site1", "A", GOOD)
    assert fed.publish("site2", "P", FIVE) is Relation.PARTIAL
    d = fed.decision()
    assert (d.current, d.servable) == ("A", True)
    view = next(v for v in d.sites if v.site == "site2")
    assert view.state is SiteState.PARTIAL and view.difference.missing == ("f5.root",)
    assert not d.conflict

    later = Federation()
    later.publish("site2", "P", FIVE)
    assert later.publish("site1", "A", GOOD) is Relation.NEW_VERSION  # the whole dataset replaces the part
    assert later.decision().current == "A" and later.state("site2") is SiteState.PARTIAL


def test_a_file_added_is_a_new_version_and_the_other_sites_catch_up():
    fed = Federation()
    fed.publish("site1", "A", FIVE)
    fed.publish("site2", "A", FIVE)
    assert fed.publish("site1", "A2", GOOD) is Relation.NEW_VERSION
    assert fed.decision().current == "A2" and fed.state("site2") is SiteState.PARTIAL
    fed.publish("site2", "A2", GOOD)
    d = fed.decision()
    assert d.current == "A2" and {v.state for v in d.sites} == {SiteState.CURRENT}


def test_a_site_that_fixes_its_replica_clears_the_conflict():
    fed = Federation()
    fed.publish("site1", "A", GOOD)
    fed.publish("site2", "B", BAD)
    assert fed.decision().conflict
    fed.publish("site2", "A", GOOD)
    d = fed.decision()
    assert (d.current, d.conflict, d.disputed, d.decided_by) == ("A", False, False, DecidedBy.MAJORITY)


def test_the_only_site_holding_a_dataset_may_change_it():
    fed = Federation()
    fed.publish("site1", "A", GOOD)
    assert fed.publish("site1", "B", BAD) is Relation.NEW_VERSION
    d = fed.decision()
    assert (d.current, d.disputed) == ("B", False)
    # ...but a file lost at that site is a partial replica, not the new dataset
    fed2 = Federation()
    fed2.publish("site1", "A", GOOD)
    assert fed2.publish("site1", "P", FIVE) is Relation.PARTIAL
    d2 = fed2.decision()
    assert (d2.current, d2.held, d2.servable) == ("A", False, False)
    assert "no site holds the whole dataset" in d2.summary("ds")


def test_a_change_at_one_of_two_sites_waits_for_the_other_or_a_declaration():
    fed = Federation()
    fed.publish("site1", "A", GOOD)
    fed.publish("site2", "A", GOOD)
    assert fed.publish("site1", "B", BAD) is Relation.CONFLICT
    assert fed.decision().disputed
    fed.publish("site2", "B", BAD)  # the other site changed too
    assert (fed.decision().current, fed.decision().disputed) == ("B", False)

    declared = Federation()
    declared.publish("site1", "A", GOOD)
    declared.publish("site2", "A", GOOD)
    assert declared.publish("site1", "B", BAD, declared=True) is Relation.NEW_VERSION
    d = declared.decision()
    assert (d.current, d.disputed) == ("B", False) and declared.state("site2") is SiteState.OUTDATED


def test_changed_catalog_checksums_are_a_new_version():
    changed = {lfn: dataclasses.replace(f, adler32="ffffffff", xxh3="new") if lfn == "f0.root" else f
               for lfn, f in CATALOG.items()}
    fed = Federation()
    fed.publish("site1", "A", CATALOG)
    fed.publish("site2", "A", CATALOG)
    assert fed.publish("site1", "A2", changed) is Relation.NEW_VERSION
    assert fed.decision().current == "A2" and fed.state("site2") is SiteState.OUTDATED


def test_an_operator_choice_settles_a_tie():
    fed = Federation()
    fed.publish("site1", "B", BAD)
    fed.publish("site2", "A", GOOD)
    fed.pinned = "A"
    d = fed.decision()
    assert (d.current, d.decided_by, d.disputed, d.servable) == ("A", DecidedBy.OPERATOR, False, True)
    assert fed.state("site1") is SiteState.CONFLICT


def test_a_reverted_dataset_serves_what_its_site_holds_again():
    fed = Federation()
    fed.publish("site1", "A", GOOD)
    fed.publish("site1", "B", BAD)
    fed.publish("site1", "A", GOOD)
    assert fed.decision().current == "A"


def test_unknown_contents_compare_by_size():
    legacy = {lfn: dataclasses.replace(f, xxh3=None) for lfn, f in GOOD.items()}
    assert compare(GOOD, legacy).same_files
    assert compare(GOOD, {**legacy, "f0.root": FileFacts(1)}).differing == ("f0.root",)


def test_a_decision_round_trips_through_json():
    fed = Federation()
    fed.publish("site1", "A", GOOD)
    fed.publish("site2", "B", BAD)
    fed.publish("site3", "P", FIVE)
    d = fed.decision()
    assert Decision.from_json(d.to_json()) == d
