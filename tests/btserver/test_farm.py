"""Catalog → layout → farm on a real file system: pools, namespace, refused links."""

from __future__ import annotations

import json
import dataclasses
import os
from pathlib import Path

from btserver.config import ServerConfig

from btserver import farm
from btserver.holdings import scan
from btserver.inventory import Inventory


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_farm_links_point_at_pool_replicas_before_the_namespace(tmp_path):
    pnfs, pool1, pool2 = tmp_path / "pnfs", tmp_path / "pool1", tmp_path / "pool2"
    files = {"a.root": b"A" * 1000, "b.root": b"B" * 2000, "sub/c.root": b"C" * 3000}
    for lfn, data in files.items():
        write(pnfs / "mc" / lfn, data)
    write(pool1 / "0000A1", files["a.root"])
    write(pool2 / "0000C3", files["sub/c.root"])
    manifest = write(tmp_path / "m.json", json.dumps({"name": "mc.ds", "files": [
        {"lfn": "a.root", "size": 1000, "pfns": [str(pool1 / "0000A1"), str(pnfs / "mc/a.root")]},
        {"lfn": "b.root", "size": 2000, "pfns": [str(pool1 / "0000B2"), str(pnfs / "mc/b.root")]},
        {"lfn": "sub/c.root", "size": 3000, "pfns": [str(pool2 / "0000C3"), str(pnfs / "mc/sub/c.root")]},
    ]}).encode())
    cfg = ServerConfig(state=str(tmp_path / "state"), manifests=(str(manifest),),
                       storage_roots=(str(pnfs), str(pool1), str(pool2)))
    report = Inventory(cfg).prepare()
    assert report.problems == []
    farm_dir = tmp_path / "state" / "farm" / "mc.ds"
    assert os.readlink(farm_dir / "a.root") == str(pool1 / "0000A1")
    assert os.readlink(farm_dir / "b.root") == str(pnfs / "mc" / "b.root")
    assert os.readlink(farm_dir / "sub" / "c.root") == str(pool2 / "0000C3")
    assert sorted(str(p.relative_to(farm_dir)) for p in farm_dir.rglob("*") if p.is_symlink()) == sorted(files)
    assert (farm_dir / "sub" / "c.root").read_bytes() == files["sub/c.root"]


def test_symlink_escaping_the_roots_is_refused_and_reported(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    write(root / "good.ds" / "f1", b"1" * 100)
    write(root / "bad.ds" / "f1", b"2" * 100)
    secret = write(outside / "secret", b"s" * 10)
    os.symlink(secret, root / "bad.ds" / "f2")
    (outside / "elsewhere.ds").mkdir()
    write(outside / "elsewhere.ds" / "x", b"x")
    os.symlink(outside / "elsewhere.ds", root / "linked.ds")
    cfg = ServerConfig(state=str(tmp_path / "state"), roots=(str(root),))
    report = Inventory(cfg).prepare()
    # the escaping link is refused, as a problem of its own; the rest of the dataset is served
    assert [(p.name, [f["lfn"] for f in p.record()["files"]]) for p in report.prepared] == [("bad.ds", ["f1"]),
                                                                                   ("good.ds", ["f1"])]
    messages = [str(p) for p in report.problems]
    assert f"{root}/bad.ds/f2: link to {secret} leaves the storage roots; refused" in messages
    assert f"{root}/linked.ds: dataset directory is a symlink; refused" in messages
    assert sorted(os.listdir(tmp_path / "state" / "farm")) == ["bad.ds", "good.ds"]
    assert not (tmp_path / "state" / "farm" / "bad.ds" / "f2").exists()
    # ...unless the site says its datasets must be whole
    whole = Inventory(dataclasses.replace(cfg, require_whole=True)).prepare()
    assert [p.name for p in whole.prepared] == ["good.ds"]
    assert any("must be whole" in str(p) for p in whole.problems)


def test_manifest_pfn_outside_the_storage_roots_is_refused(tmp_path):
    pool, outside = tmp_path / "pool", tmp_path / "outside"
    write(outside / "f", b"o" * 10)
    write(pool / "g", b"g" * 10)
    manifest = write(tmp_path / "m.tsv", f"ds\tf\t10\t-\t{outside / 'f'}\nds\tg\t10\t-\t{pool / 'g'}\n".encode())
    cfg = ServerConfig(state=str(tmp_path / "state"), manifests=(str(manifest),), storage_roots=(str(pool),))
    report = Inventory(cfg).prepare()
    assert report.prepared == []
    assert any(p.problem.endswith("outside the storage roots; refused") and p.subject == "ds/f"
               for p in report.problems)


def test_unchanged_farm_is_left_alone_and_stale_farms_are_removed(tmp_path):
    root = tmp_path / "root"
    write(root / "one" / "f", b"1" * 10)
    write(root / "two" / "f", b"2" * 10)
    cfg = ServerConfig(state=str(tmp_path / "state"), roots=(str(root),))
    Inventory(cfg).prepare()
    farm_root = tmp_path / "state" / "farm"
    inode = (farm_root / "one").stat().st_ino
    (root / "two" / "f").unlink()
    (root / "two").rmdir()
    report = Inventory(cfg).prepare()
    assert [p.name for p in report.prepared] == ["one"]
    assert sorted(os.listdir(farm_root)) == ["one"]
    assert (farm_root / "one").stat().st_ino == inode  # not rebuilt


def test_a_changed_replica_rebuilds_the_farm_aside(tmp_path):
    root = tmp_path / "root"
    write(root / "ds" / "f", b"1" * 10)
    lay_before = scan([str(root)])
    cfg = ServerConfig(state=str(tmp_path / "state"), roots=(str(root),))
    Inventory(cfg).prepare()
    write(root / "ds" / "g", b"2" * 10)
    Inventory(cfg).prepare()
    assert sorted(os.listdir(tmp_path / "state" / "farm" / "ds")) == ["f", "g"]
    assert [d.name for d in lay_before.datasets] == ["ds"]
    assert not any(n.startswith(".") for n in os.listdir(tmp_path / "state" / "farm"))
    assert farm.probe(str(tmp_path / "state" / "farm" / "ds" / "g")).size == 10
