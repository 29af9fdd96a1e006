"""Search and list from the shell against a whole federation (`btswarm up`: real tracker, repository, sites).

`bt-get --search QUERY` prints one aligned line per dataset with the sites holding it and the
seeds the tracker counts now; `bt-get NAME --list-files` the file table. The printed lines,
the JSON and the exit statuses are what is checked, as a physicist's script would.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.e2e.conftest import get_json
from tests.support import command, free_port, wait_for
from torrents.units import human_size

pytestmark = pytest.mark.slow


def bt_get(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([command("bt-get"), *args], capture_output=True, text=True, timeout=timeout)


def aligned(header: str, line: str, right: tuple[str, ...], left: tuple[str, ...]) -> bool:
    """Right-aligned cells end where their header ends; left-aligned ones start where theirs starts."""
    for h in right:
        end = header.index(h) + len(h)
        if line[end - 1] == " " or line[end:end + 1] not in ("", " "):
            return False
    for h in left:
        start = header.index(h)
        if line[start - 1] != " " or line[start] == " ":
            return False
    return True


def test_search_finds_a_part_of_the_name_with_sites_and_seeds(federation):
    name = federation.dataset
    record = get_json(f"{federation.repo}/api/datasets/{name}")
    result = bt_get("--search", "cosmic", "--repo", federation.repo)
    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert re.fullmatch(r" *SIZE  FILES  SEEDS  T2 +T3  DATASET", header), header
    assert len(rows) == 1, rows
    parts = rows[0].split()
    assert parts[:3] == [*human_size(record["total_size"]).split(), str(record["file_count"])]
    assert parts[3].isdigit(), parts  # seeds now: a count, not '?', the tracker answered
    assert parts[4:] == ["site1,site2", "-", name]
    assert aligned(header, rows[0], right=("SIZE", "FILES", "SEEDS"), left=("T2", "T3", "DATASET"))


def test_search_json_counts_the_seeds_of_a_running_bt_get(federation, tmp_path):
    name = federation.dataset
    seeding = subprocess.Popen([command("bt-get"), name, "--repo", federation.repo, "-o", str(tmp_path / "a"),
                                "--seed-time", "120s", "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def seeds() -> int:
            doc = json.loads(bt_get("--search", "DPD_IDCOMM", "--repo", federation.repo, "--json").stdout)
            return doc["datasets"][0]["seeds"] if (tmp_path / "a" / name).is_dir() else 0

        # The download ends, the bt-get seeds on: a seed in the swarm the tracker counts.
        wait_for(lambda: seeds() >= 1, timeout=90, what="a seed counted by the tracker", interval=0.5)
        result = bt_get("--search", "DPD_IDCOMM", "--repo", federation.repo, "--json")
        assert result.returncode == 0, result.stderr
        doc = json.loads(result.stdout)
        assert (doc["query"], doc["repo"], doc["total"], doc["shown"]) == ("DPD_IDCOMM", federation.repo, 1, 1)
        [row] = doc["datasets"]
        assert (row["name"], row["info_hash"], row["t2_sites"], row["t3_sites"]) == (
            name, federation.info_hash(name), ["site1", "site2"], [])
        assert row["seeds"] >= 1
        swarm = get_json(f"{federation.tracker_url}/api/swarms/{row['info_hash']}")
        assert swarm["seeds"] >= 1
    finally:
        seeding.terminate()
        seeding.wait(timeout=30)


def test_no_match_is_exit_3_with_a_sentence_and_json_still_parses(federation):
    result = bt_get("--search", "cosmix", "--repo", federation.repo)
    assert (result.returncode, result.stdout) == (3, "")
    assert result.stderr == (f"bt-get: error: cosmix: no dataset matches in {federation.repo} (any part of a name "
                             "matches: try fewer or shorter words)\n")
    result = bt_get("--search", "cosmix", "--repo", federation.repo, "--json")
    assert result.returncode == 3
    assert json.loads(result.stdout) == {"query": "cosmix", "repo": federation.repo, "total": 0, "shown": 0,
                                         "datasets": []}


def test_a_repository_that_is_down_or_is_not_one(federation):
    closed = f"http://127.0.0.1:{free_port()}"
    result = bt_get("--search", "cosmic", "--repo", closed)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == f"bt-get: error: {closed}: connection refused: is bt-repo running at this URL?\n"
    result = bt_get("--search", "cosmic", "--repo", federation.tracker_url)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith(f"bt-get: error: {federation.tracker_url}: not a btswarm repository")


def test_list_files_prints_the_torrents_files(federation, tmp_path):
    name = federation.dataset
    files = sorted(p for p in (federation.source).iterdir() if p.is_file())
    result = bt_get(name, "--list-files", "--repo", federation.repo)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{name}  {federation.info_hash(name)}"
    assert re.fullmatch(r" *SIZE +BYTES  ADLER32  LFN", lines[1])
    rows = [line.split() for line in lines[2:-1]]
    assert [(r[2], r[3], r[4]) for r in rows] == [(str(p.stat().st_size), "-", p.name) for p in files]
    total = sum(p.stat().st_size for p in files)
    assert lines[-1] == f"total: {len(files)} files, {human_size(total)} ({total} bytes)"
    result = bt_get(name, "--list-files", "--repo", federation.repo, "--json", "--nrandom", "3", "--seed", "1")
    doc = json.loads(result.stdout)
    assert (doc["file_count"], doc["of"]) == (3, len(files))
    picked = [f["lfn"] for f in doc["files"]]
    fetched = bt_get(name, "--repo", federation.repo, "--nrandom", "3", "--seed", "1", "--json", "-o",
                     str(tmp_path / "nrandom"), timeout=120)
    assert fetched.returncode == 0, fetched.stderr
    fetched_files = json.loads(fetched.stdout)["files"]
    assert sorted(f["lfn"] for f in fetched_files if f["status"] != "skipped") == sorted(picked)
    assert {f["status"] for f in fetched_files if f["lfn"] not in picked} == {"skipped"}
