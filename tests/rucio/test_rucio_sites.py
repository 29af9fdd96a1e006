"""A federation whose sites read their datasets from a real Rucio (`btswarm up --rucio`), end to end.

Two sites, each on its own POSIX RSE of the session's local Rucio; the
test registers datasets there through Rucio's client library, as a
production system would, and checks what a user would: the info-hashes,
the repository, `bt-get scope:name` and the bytes on disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from btswarm import federation as fedlib
from btswarm.trees import compare_trees
from tests.rucio.conftest import RucioFederation, make_files, register
from tests.support import command, wait_for

pytestmark = pytest.mark.slow


def rse_path(fed: RucioFederation, site: str, lfn: str) -> Path:
    from btswarm.localrucio import pfn_path

    return Path(pfn_path(fed.rucio.pfns(fed.rse(site), fed.scope, [lfn])[lfn]))


def test_two_sites_on_two_rses_compute_the_same_info_hash(fed):
    (did,) = fed.datasets
    hashes = {s.name: {d["name"]: d["info_hash"] for d in fed.site_status(s.name)["datasets"]}[did]
              for s in fed.sites}
    record = fed.record(did)
    assert hashes["site1"] == hashes["site2"] == record["info_hash"]
    assert sorted(record["sites"]) == ["site1", "site2"]
    scope, name = did.split(":", 1)
    assert record["did"] == {"scope": scope, "name": name}
    # the file table shows the catalog's checksums
    rucio_files = {f["name"]: f for f in fed.rucio.client().list_files(scope, name)}
    assert {f["lfn"]: (f["size"], f["adler32"]) for f in record["files"]} == \
        {n: (f["bytes"], f["adler32"]) for n, f in rucio_files.items()}
    # the two RSEs keep the files at their own hashed paths, not where the sample was made
    assert rse_path(fed, "site1", record["files"][0]["lfn"]) != rse_path(fed, "site2", record["files"][0]["lfn"])


def test_bt_get_scope_name_lands_in_dir_name_with_bytes_and_checksums_of_rucio(fed, tmp_path):
    from rucio.common.checksum import adler32  # Rucio's implementation, not ours

    (did,) = fed.datasets
    scope, name = did.split(":", 1)
    result = fed.bt_get(did, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    got = tmp_path / "out" / name
    assert doc["directory"] == str(got)
    source = Path(fed.data) / name
    assert compare_trees(source, got) == []
    rucio_files = {f["name"]: f["adler32"] for f in fed.rucio.client().list_files(scope, name)}
    assert {p.name: adler32(str(p)) for p in got.iterdir() if p.is_file()} == rucio_files
    assert {f["status"] for f in doc["files"]} == {"verified"}  # bt-get's own check against the record
    # as `rucio download` lays it out: DIR/scope/name/
    again = fed.bt_get(did, tmp_path / "scoped", "--scope-subdir", "--nrandom", "2")
    assert again.returncode == 0, again.stderr
    assert len([p for p in (tmp_path / "scoped" / scope / name).iterdir() if p.is_file()]) == 2


def test_bt_get_of_a_thousand_small_files_verifies_every_time(fed, tmp_path):
    """Many small files with catalog checksums: bt-get's whole-file check must read what is on
    disk, not what libtorrent has yet to write (before the flush fix: exit 5 in 4 runs of 6)."""
    name = "fed.many.001"
    register(fed, name, make_files(tmp_path / "many", {f"m{i:04d}.root": 32 * 1024 for i in range(1000)}),
             {"site1": None, "site2": None})
    did = f"{fed.scope}:{name}"
    fed.published_by(did, ["site1", "site2"], timeout=90)
    for k in range(3):
        result = fed.bt_get(did, tmp_path / f"out{k}")
        assert result.returncode == 0, (k, result.stderr)
        assert {f["status"] for f in json.loads(result.stdout)["files"]} == {"verified"}


def test_the_repository_finds_datasets_by_scope_and_by_name(fed):
    (did,) = fed.datasets
    scope, name = did.split(":", 1)
    for query in (f"scope={scope}", f"q={scope}", f"q={did}", "q=IDCosmic"):
        doc = fedlib.get_json(f"{fed.repo}/api/datasets?{query}")
        assert did in [d["name"] for d in doc["datasets"]], query
    assert fedlib.get_json(f"{fed.repo}/api/datasets?scope=not{scope}")["total"] == 0


def built_at(fed: RucioFederation, site: str, did: str) -> int:
    """When the site built the dataset's .torrent (its torrent cache's record)."""
    return json.loads((fed.state / "sites" / site / "torrents" / f"{did}.json").read_text())["built_at"]


def test_a_dataset_registered_in_rucio_appears_after_one_refresh(fed, tmp_path):
    (known,) = fed.datasets
    before = {site: built_at(fed, site, known) for site in ("site1", "site2")}
    name = "fed.new.001"
    register(fed, name, make_files(tmp_path / "new", {"n1.root": 40_000, "n2.root": 3}),
             {"site1": None, "site2": None})
    registered = time.time()
    did = f"{fed.scope}:{name}"
    record = fed.published_by(did, ["site1", "site2"])
    assert record["did"] == {"scope": fed.scope, "name": name} and record["file_count"] == 2
    for site in ("site1", "site2"):
        status = fed.site_status(site)
        assert status["rucio"]["state"] == "ok" and status["rucio"]["last_success"] >= registered - 1.5
    # refreshes came and went (one a second): the unchanged dataset was not hashed again
    assert {site: built_at(fed, site, known) for site in ("site1", "site2")} == before


def test_a_file_missing_at_one_rse_leaves_that_site_out_while_the_other_seeds(fed, tmp_path):
    name = "fed.partial.001"
    src = make_files(tmp_path / "partial", {"p1.root": 30_000, "p2.root": 20_000, "p3.root": 10})
    register(fed, name, src, {"site1": None, "site2": ["p1.root", "p3.root"]})
    did = f"{fed.scope}:{name}"
    fed.published_by(did, ["site1"])
    missing = f"{did}/p2.root: no replica at {fed.rse('site2')}"
    status = wait_for(lambda: (lambda s: s if missing in s["problems"] else None)(fed.site_status("site2")),
                      20, "site2 to list the missing replica")
    assert did in status["rucio"]["withheld"] and did not in {d["name"] for d in status["datasets"]}
    result = fed.bt_get(did, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert compare_trees(src, tmp_path / "out" / name) == []
    sources = json.loads(result.stdout)["sources"]
    assert sources.get("site1", 0) > 0 and "site2" not in sources, sources


def test_a_replica_missing_or_of_the_wrong_size_on_disk_keeps_that_site_out(fed, tmp_path):
    name = "fed.short.001"
    src = make_files(tmp_path / "short", {"s1.root": 25_000, "s2.root": 4_000, "s3.root": 9})
    r = fed.rucio
    for site in ("site1", "site2"):
        r.register_files(fed.rse(site), fed.scope, r.place(fed.rse(site), fed.scope, {p.name: p for p in src.iterdir()}))
    os.truncate(rse_path(fed, "site2", "s1.root"), 24_000)  # Rucio still says 25,000 bytes
    rse_path(fed, "site2", "s3.root").unlink()  # ... and that s3.root is there
    r.add_dataset(fed.scope, name, ["s1.root", "s2.root", "s3.root"])
    did = f"{fed.scope}:{name}"
    fed.published_by(did, ["site1"])
    problems = wait_for(lambda: (lambda ps: ps if len(ps) == 2 else None)(
        [p for p in fed.site_status("site2")["problems"] if p.startswith(f"{did}/")]), 20,
        "site2 to report the short and the missing replica")
    assert problems[0].startswith(f"{did}/s1.root: no usable replica") and "size 24000, expected 25000" in problems[0]
    assert problems[1].startswith(f"{did}/s3.root: no usable replica") and "not a readable file" in problems[1]
    assert did not in {d["name"] for d in fed.site_status("site2")["datasets"]}


def test_a_replica_corrupted_on_disk_is_caught_by_the_adler32_check(fed, tmp_path):
    from rucio.common.checksum import adler32

    name = "fed.corrupt.001"
    src = make_files(tmp_path / "corrupt", {"c1.root": 50_000, "c2.root": 7})
    r = fed.rucio
    for site in ("site1", "site2"):  # copies, not links: each RSE has its own bytes
        r.register_files(fed.rse(site), fed.scope, r.place(fed.rse(site), fed.scope, {p.name: p for p in src.iterdir()}))
    bad = rse_path(fed, "site2", "c1.root")
    data = bytearray(bad.read_bytes())
    data[1000] ^= 0xFF  # same size, other bytes: only the checksum can tell
    bad.write_bytes(bytes(data))
    r.add_dataset(fed.scope, name, ["c1.root", "c2.root"])
    did = f"{fed.scope}:{name}"
    record = fed.published_by(did, ["site1"])

    def decided() -> dict | None:  # site2 either refused the replica or serves what it hashed
        status = fed.site_status("site2")
        refused = any(p.startswith(f"{did}/c1.root") for p in status["problems"])
        return status if refused or did in {d["name"] for d in status["datasets"]} else None

    status = wait_for(decided, 20, "site2 to prepare the dataset")
    assert did not in {d["name"] for d in status["datasets"]}
    # the builder's adler32 of site2's bytes, against the one Rucio registered
    catalog = {f["name"]: f["adler32"] for f in r.client().list_files(fed.scope, name)}["c1.root"]
    assert f"{did}/c1.root: adler32 of the replica is {adler32(str(bad))}, the catalog says {catalog}" \
        in status["problems"], status["problems"]
    time.sleep(2)  # another refresh: still never published from site2
    assert fed.record(did)["sites"] == ["site1"] and fed.record(did)["info_hash"] == record["info_hash"]


def test_rucio_unreachable_is_reported_and_known_datasets_keep_seeding(fed, tmp_path):
    (did,) = fed.datasets
    fed.rucio.stop()
    try:
        statuses = wait_for(lambda: (lambda ss: ss if all(s["rucio"]["state"] == "unreachable" for s in ss) else None)(
            [fed.site_status(s.name) for s in fed.sites]), 20, "both sites to find Rucio gone")
        for status in statuses:
            assert any(p.startswith("rucio: ") and "cannot reach" in p for p in status["problems"])
            assert did in {d["name"] for d in status["datasets"]}
        result = fed.bt_get(did, tmp_path / "out")
        assert result.returncode == 0, result.stderr
        assert compare_trees(Path(fed.data) / did.split(":", 1)[1], tmp_path / "out" / did.split(":", 1)[1]) == []
        failures = fed.site_status("site1")["rucio"]["failures"]
        assert 1 <= failures <= 10  # backing off, not hammering: 1 s, 2 s, 4 s... within these ~10 s
    finally:
        fed.rucio.start()
    wait_for(lambda: all(fed.site_status(s.name)["rucio"]["state"] == "ok" for s in fed.sites), 30,
             "both sites to reach Rucio again")


def test_btswarm_up_rucio_runs_its_own_rucio_and_stops_it(tmp_path):
    """Without --rucio-dir: a Rucio of its own in STATE/rucio, started first and stopped last."""
    proc, handle = fedlib.launch(tmp_path / "state", ["--rucio", "--sites", "1", "--sample-files", "3",
                                                      "--sample-size", "1M", "--heartbeat", "1s"],
                                 ready_file=tmp_path / "ready.json", log_path=tmp_path / "up.log", timeout=120)
    try:
        from btswarm.localrucio import LocalRucio

        assert handle.ready.rucio.dir == tmp_path / "state" / "rucio"
        own = LocalRucio.running_at(tmp_path / "state" / "rucio")
        assert own is not None and own.url == handle.ready.rucio.url
        (did,) = handle.datasets
        assert did.startswith("demo:") and handle.site_status("site1")["rucio"]["state"] == "ok"
        got = subprocess.run([command("bt-get"), did, "--repo", handle.repo, "-o", str(tmp_path / "out"), "-q"],
                             capture_output=True, text=True, timeout=120)
        assert got.returncode == 0, got.stderr
        assert compare_trees(handle.data / did.split(":", 1)[1], tmp_path / "out" / did.split(":", 1)[1]) == []
    finally:
        assert fedlib.stop(proc, timeout=30) == 0, (tmp_path / "up.log").read_text()[-3000:]
    assert not own.ping()  # stopped with the federation
