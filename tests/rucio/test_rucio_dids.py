"""Rucio containers and file DIDs through a federation on a real Rucio (`btswarm up --rucio`), end to end.

The containers are made with Rucio's own command line (`rucio add-container`,
`rucio attach`), as a physicist or a production system makes them; the
sites learn them at their next refresh and tell the repository, and
`bt-get scope:container` fetches each dataset into DIR/<dataset>/.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from btswarm import federation as fedlib
from btswarm.trees import compare_trees
from tests.rucio.conftest import make_files, register
from tests.support import command, wait_for
from torrents.units import human_size

pytestmark = pytest.mark.slow


def rucio(fed, *args: str) -> None:
    """Rucio's command line, logged in as the local Rucio's root."""
    result = subprocess.run([command("rucio"), *args], env=fed.rucio.env(), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, (args, result.stdout, result.stderr)


def did_doc(fed, did: str) -> dict | None:
    try:
        return fedlib.get_json(f"{fed.repo}/api/dids/{did}")
    except OSError:
        return None


def test_bt_get_of_a_container_fetches_each_dataset_and_names_the_one_no_site_serves(fed, tmp_path):
    sources = {"fed.part.001": make_files(tmp_path / "p1", {"a1.root": 300_000, "a2.root": 5}),
               "fed.part.002": make_files(tmp_path / "p2", {"b1.root": 200_000})}
    for name, src in sources.items():
        register(fed, name, src, {"site1": None, "site2": None})
    container, empty = f"{fed.scope}:fed.cont.001", f"{fed.scope}:fed.empty.001"
    rucio(fed, "add-container", container)
    rucio(fed, "add-dataset", empty)  # no file: no site can serve it
    rucio(fed, "attach", container, *(f"{fed.scope}:{n}" for n in sources), empty)
    members = sorted([f"{fed.scope}:{n}" for n in sources] + [empty])
    for name in sources:
        fed.published_by(f"{fed.scope}:{name}", ["site1", "site2"])
    assert wait_for(lambda: (lambda d: d if d and d.get("sites") == ["site1", "site2"] else None)(
        did_doc(fed, container)), 45, "both sites' word of the container") == \
        {"did": container, "type": "container", "datasets": members, "sites": ["site1", "site2"]}

    result = fed.bt_get(container, tmp_path / "out")
    assert result.returncode == 3, result.stderr  # NOT_FOUND: the empty dataset
    assert result.stderr.count("bt-get: error: ") == 1 and f"bt-get: error: {empty}: no such dataset" in result.stderr
    doc = json.loads(result.stdout)
    (entry,) = doc["targets"]
    assert (entry["target"], entry["kind"], entry["exit_code"]) == (container, "container", 3)
    assert entry["error"].startswith(f"1 of 3 datasets failed; first: {empty}: no such dataset")
    assert [(d["dataset"], d["exit_status"]) for d in entry["datasets"]] == \
        [(m, "NOT_FOUND" if m == empty else "OK") for m in members]
    total = sum(p.stat().st_size for src in sources.values() for p in src.iterdir())
    assert doc["totals"]["datasets"] == 3 and doc["totals"]["bytes_total"] == doc["totals"]["bytes_done"] == total
    assert (doc["exit_status"], doc["exit_code"]) == ("NOT_FOUND", 3)
    for name, src in sources.items():  # OUT/<dataset>/, every file verified against Rucio's adler32
        assert compare_trees(src, tmp_path / "out" / name) == []
    for d in entry["datasets"]:
        if d["dataset"] != empty:
            assert {f["status"] for f in d["files"]} == {"verified"}

    # Once the empty dataset is detached, the container is whole: exit 0, the summary says so.
    rucio(fed, "detach", container, empty)
    whole = [m for m in members if m != empty]
    wait_for(lambda: (lambda d: d if d and d["datasets"] == whole else None)(did_doc(fed, container)), 45,
             "the sites to drop the detached dataset")
    again = subprocess.run([command("bt-get"), container, "--repo", fed.repo, "-o", str(tmp_path / "out")],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-3:] == ["1 target", f"  ok  {container}: 2 datasets, {human_size(total)}",
                                              "  status ok (exit 0)"]


def test_bt_get_of_a_file_did_fetches_that_file_of_its_dataset(fed, tmp_path):
    (did,) = fed.datasets
    scope, name = did.split(":", 1)
    lfn = sorted(f["lfn"] for f in fed.record(did)["files"])[1]
    assert did_doc(fed, f"{scope}:{lfn}") == {"did": f"{scope}:{lfn}", "type": "file", "file": lfn,
                                               "datasets": [did]}
    result = fed.bt_get(f"{scope}:{lfn}", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)  # one dataset's document, as for `bt-get DATASET --files LFN`
    assert doc["dataset"] == did and doc["directory"] == str(tmp_path / "out" / name)
    assert {f["lfn"]: f["status"] for f in doc["files"] if f["status"] != "skipped"} == {lfn: "verified"}
    got = [p for p in (tmp_path / "out" / name).rglob("*") if p.is_file() and ".bt-get" not in p.parts]
    assert got == [tmp_path / "out" / name / lfn]
    assert got[0].read_bytes() == (Path(fed.data) / name / lfn).read_bytes()
    # a file DID names its one file: --files says so
    other = fed.bt_get(f"{scope}:{lfn}", tmp_path / "out2", "--files", "*")
    assert other.returncode == 2
    assert other.stderr == f"bt-get: error: --files: not with a file DID (it names one file: {lfn} of {did})\n"
    # a DID that names nothing keeps the dataset's answer
    missing = fed.bt_get(f"{scope}:no.such.thing", tmp_path / "out3")
    assert missing.returncode == 3 and "no such dataset" in missing.stderr
