"""layout: the pure plan of symlink farms (file system replaced by a dict)."""

from __future__ import annotations

from torrents.dataset import Dataset, DatasetFile

from btserver.layout import Target, inside, plan_dataset

ROOTS = ["/pnfs/site", "/dcache/pool1", "/dcache/pool2"]


def probe_of(files: dict[str, tuple[str, int]]):
    return lambda pfn: Target(*files[pfn]) if pfn in files else None


def test_pool_replica_is_chosen_before_the_namespace_path():
    ds = Dataset("ds", (DatasetFile("a.root", 10, None, ("/dcache/pool2/0001", "/pnfs/site/ds/a.root")),))
    fs = {"/dcache/pool2/0001": ("/dcache/pool2/0001", 10), "/pnfs/site/ds/a.root": ("/pnfs/site/ds/a.root", 10)}
    lay = plan_dataset(ds, ROOTS, probe_of(fs))
    assert lay.ok and [(l.lfn, l.target) for l in lay.links] == [("a.root", "/dcache/pool2/0001")]
    assert lay.problems == ()


def test_unreadable_or_wrong_size_replica_falls_back_to_the_next():
    ds = Dataset("ds", (DatasetFile("a", 10, None, ("/dcache/pool1/x", "/dcache/pool2/y", "/pnfs/site/a")),))
    fs = {"/dcache/pool2/y": ("/dcache/pool2/y", 9), "/pnfs/site/a": ("/pnfs/site/a", 10)}
    lay = plan_dataset(ds, ROOTS, probe_of(fs))
    assert [l.target for l in lay.links] == ["/pnfs/site/a"]


def test_pfn_resolving_outside_the_roots_is_refused_and_reported():
    ds = Dataset("ds", (DatasetFile("a", 10, None, ("/pnfs/site/ds/a",)),
                        DatasetFile("b", 5, None, ("/pnfs/site/ds/b",))))
    # The namespace entry is a link to /etc/shadow: it resolves outside.
    fs = {"/pnfs/site/ds/a": ("/etc/shadow", 10), "/pnfs/site/ds/b": ("/pnfs/site/ds/b", 5)}
    lay = plan_dataset(ds, ROOTS, probe_of(fs))
    assert not lay.ok and lay.links == ()
    messages = [str(p) for p in lay.problems]
    assert "ds/a: /pnfs/site/ds/a resolves to /etc/shadow, outside the storage roots; refused" in messages
    assert "ds: 1 of 2 files have no usable replica; not served" in messages


def test_refused_candidate_is_reported_even_when_a_later_one_is_used():
    ds = Dataset("ds", (DatasetFile("a", 1, None, ("/tmp/evil", "/pnfs/site/a")),))
    fs = {"/tmp/evil": ("/tmp/evil", 1), "/pnfs/site/a": ("/pnfs/site/a", 1)}
    lay = plan_dataset(ds, ROOTS, probe_of(fs))
    assert lay.ok and lay.links[0].target == "/pnfs/site/a"
    assert [p.problem for p in lay.problems] == ["/tmp/evil resolves to /tmp/evil, outside the storage roots; refused"]


def test_no_roots_given_means_anywhere():
    ds = Dataset("ds", (DatasetFile("a", 1, None, ("/tmp/x",)),))
    assert plan_dataset(ds, None, probe_of({"/tmp/x": ("/tmp/x", 1)})).ok


def test_inside_is_by_path_component_not_by_prefix():
    assert inside("/dcache/pool1/a", ["/dcache/pool1"])
    assert inside("/dcache/pool1", ["/dcache/pool1/"])
    assert not inside("/dcache/pool10/a", ["/dcache/pool1"])
    assert not inside("/dcache/pool1/../etc/passwd", ["/dcache/pool1"])
