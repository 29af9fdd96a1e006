"""One bad replica must never become the dataset: real federations whose sites hold different copies.

Each site holds its own replica (`btswarm up --data` once per site): one with a
byte flipped in the middle of every file before it was ever hashed (bit rot, a
bad copy), one missing a file, one that dissents among three; with and without
the catalog's checksums. What a user checks: the bytes bt-get delivers, its
exit status and message, and what the repository says.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import urllib.request
import zlib
from pathlib import Path

import pytest

from btswarm.trees import compare_trees
from btswarm.topology import toml
from tests.faults.conftest import get_json, make_data, service_pid
from tests.e2e.conftest import start_federation
from tests.support import command, free_port, http_ok, wait_for
from torrents import sample

pytestmark = pytest.mark.slow

NAME = sample.SAMPLE_NAME
FILES, SIZE = 6, 6 * 2**20


def flip_middle(path: Path) -> None:
    """One byte flipped in the middle, size and mtime kept: what a checksum-less site cannot see."""
    st = path.stat()
    with open(path, "r+b") as f:
        f.seek(st.st_size // 2)
        byte = f.read(1)
        f.seek(st.st_size // 2)
        f.write(bytes([byte[0] ^ 0x01]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def replicas(tmp: Path, copies: int) -> list[Path]:
    return make_data(tmp, copies=copies, files=FILES, size=SIZE)


def record(fed) -> dict:
    return get_json(f"{fed.repo}/api/datasets/{NAME}")


def bt_get(fed, out: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([command("bt-get"), NAME, "--repo", fed.repo, "-o", str(out), "--json", *args],
                          capture_output=True, text=True, timeout=timeout)


def page(fed) -> str:
    with urllib.request.urlopen(f"{fed.repo}/datasets/{NAME}", timeout=5) as resp:
        return resp.read().decode()


# --- a corrupt replica, no catalog: nothing decides, nothing is delivered as OK --------------------

@pytest.fixture(scope="module")
def corrupt(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("corrupt")
    good, bad = replicas(tmp, 2)
    for f in sorted((bad / NAME).iterdir()):
        flip_middle(f)
    fed = start_federation(tmp, "--sites", "2", "--data", str(good), "--data", str(bad), "--heartbeat", "1s")
    fed.copies = (good, bad)
    yield fed
    assert fed.stop(timeout=30) == 0, fed.log()[-3000:]


def test_up_says_which_dataset_is_in_conflict_and_why(corrupt):
    # ready (the federation runs), and it said so rather than wait out its timeout
    assert f"warning: {NAME}: replicas disagree" in corrupt.log()
    assert "site2 holds a conflicting replica: 6 files hold other bytes" in corrupt.log()
    doc = record(corrupt)
    assert (doc["replicas"], doc["servable"]) == ("disputed", False)
    states = {v["site"]: v["state"] for v in doc["replica_sites"]}
    assert sorted(states.values()) == ["conflict", "current"]
    text = page(corrupt)
    assert "Replicas disagree" in text and "bt-repo choose" in text


def test_bt_get_refuses_rather_than_deliver_either_replica(corrupt, tmp_path):
    out = bt_get(corrupt, tmp_path)
    assert out.returncode == 6, out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert line.startswith(f"bt-get: error: {NAME}: replicas disagree and nothing decides between them"), line
    assert "--info-hash" in line
    assert not (tmp_path / NAME).exists() or not any((tmp_path / NAME).glob("*.root.1"))


def test_an_operator_choice_serves_the_chosen_replica_then_a_fixed_site_clears_the_conflict(corrupt, tmp_path):
    good, bad = corrupt.copies
    doc = record(corrupt)
    by_site = {v["site"]: v["info_hash"] for v in doc["replica_sites"]}
    chosen = subprocess.run([command("bt-repo"), "choose", NAME, by_site["site1"], "--state",
                             str(corrupt.state / "repo")], capture_output=True, text=True, timeout=30)
    assert chosen.returncode == 0, chosen.stderr
    assert f"{NAME}: serving {by_site['site1']} (operator)" in chosen.stdout
    out = bt_get(corrupt, tmp_path / "chosen")
    assert out.returncode == 0, out.stderr
    assert compare_trees(good / NAME, tmp_path / "chosen" / NAME) == []
    assert subprocess.run([command("bt-repo"), "choose", NAME, "--rules", "--state", str(corrupt.state / "repo")],
                          capture_output=True, timeout=30).returncode == 0
    assert record(corrupt)["servable"] is False

    # site2 repairs its replica (a fresh copy) and rescans: same bytes, same info-hash, no conflict
    shutil.rmtree(bad / NAME)
    shutil.copytree(good / NAME, bad / NAME)
    os.kill(service_pid(corrupt, "site2"), signal.SIGHUP)
    wait_for(lambda: record(corrupt)["replicas"] == "agree", timeout=60, interval=0.3,
             what="the conflict to clear once site2 holds the good replica")
    doc = record(corrupt)
    assert doc["servable"] is True and doc["sites"] == ["site1", "site2"] and doc["problem"] is None
    out = bt_get(corrupt, tmp_path / "fixed")
    assert out.returncode == 0, out.stderr
    assert compare_trees(good / NAME, tmp_path / "fixed" / NAME) == []


# --- an incomplete replica, no catalog: the whole dataset, from the site that has it ----------------

@pytest.fixture(scope="module")
def incomplete(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("incomplete")
    whole, part = replicas(tmp, 2)
    lost = sorted((part / NAME).iterdir())[-1]
    lost.unlink()
    # the partial site is site1 here: whatever publishes first, the whole dataset must win
    fed = start_federation(tmp, "--sites", "2", "--data", str(part), "--data", str(whole), "--heartbeat", "1s")
    fed.copies = (whole, part)
    fed.lost = lost.name
    yield fed
    assert fed.stop(timeout=30) == 0, fed.log()[-3000:]


def test_an_incomplete_replica_is_partial_and_the_whole_dataset_arrives(incomplete, tmp_path):
    whole, _ = incomplete.copies
    doc = record(incomplete)
    assert (doc["file_count"], doc["replicas"], doc["servable"], doc["sites"]) == (FILES, "partial", True, ["site2"])
    view = next(v for v in doc["replica_sites"] if v["site"] == "site1")
    assert (view["state"], view["missing"]) == ("partial", [incomplete.lost])
    assert f"site1 holds a partial replica (lacks {incomplete.lost})" in incomplete.log()
    out = bt_get(incomplete, tmp_path)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["exit_status"] == "OK" and len(result["files"]) == FILES
    assert compare_trees(whole / NAME, tmp_path / NAME) == []
    assert "Partial replicas" in page(incomplete)


def test_a_file_added_everywhere_is_a_new_version_that_replaces_the_old(incomplete, tmp_path):
    whole, part = incomplete.copies
    shutil.copy2(whole / NAME / incomplete.lost, part / NAME / incomplete.lost)  # site1 is whole again
    os.kill(service_pid(incomplete, "site1"), signal.SIGHUP)
    wait_for(lambda: record(incomplete)["replicas"] == "agree", timeout=60, interval=0.3,
             what="site1 to hold the whole dataset")
    before = record(incomplete)["info_hash"]
    extra = "DPD_IDCOMM.051203._00099.pool.root.1"
    for copy in (whole, part):
        (copy / NAME / extra).write_bytes(b"a new file of the dataset\n" * 1000)
    for site in ("site1", "site2"):
        os.kill(service_pid(incomplete, site), signal.SIGHUP)
    wait_for(lambda: (d := record(incomplete))["file_count"] == FILES + 1 and d["replicas"] == "agree", timeout=60,
             interval=0.3, what="the grown dataset to be served by both sites")
    doc = record(incomplete)
    assert doc["info_hash"] != before and doc["sites"] == ["site1", "site2"]
    assert {v["info_hash"]: v["relation"] for v in doc["versions"]}[doc["info_hash"]] == "new_version"
    out = bt_get(incomplete, tmp_path)
    assert out.returncode == 0, out.stderr
    assert compare_trees(whole / NAME, tmp_path / NAME) == []


# --- three sites, one dissents: the majority is the dataset ----------------------------------------

def test_the_majority_of_three_sites_is_served_and_the_dissenter_named(tmp_path):
    good, good2, bad = replicas(tmp_path, 3)
    flip_middle(sorted((bad / NAME).iterdir())[2])
    # the dissenter is site1: the first to come up is no more right than the others
    fed = start_federation(tmp_path, "--sites", "3", "--data", str(bad), "--data", str(good), "--data", str(good2),
                           "--heartbeat", "1s")
    try:
        doc = record(fed)
        assert (doc["replicas"], doc["servable"], doc["decided_by"], doc["sites"]) == \
            ("conflict", True, "majority", ["site2", "site3"])
        view = next(v for v in doc["replica_sites"] if v["site"] == "site1")
        assert view["state"] == "conflict" and view["differing"] == [sorted(p.name for p in (bad / NAME).iterdir())[2]]
        out = bt_get(fed, tmp_path / "out")
        assert out.returncode == 0, out.stderr
        assert compare_trees(good / NAME, tmp_path / "out" / NAME) == []
        assert "site1" not in json.loads(out.stdout)["sources"]
    finally:
        assert fed.stop(timeout=30) == 0, fed.log()[-3000:]


# --- with the catalog's checksums: the bad site refuses its own replica -------------------------------

def manifest(path: Path, data: Path, checksums: dict[str, str]) -> Path:
    files = [{"lfn": f.name, "size": f.stat().st_size, "adler32": checksums[f.name], "pfns": [str(f)]}
             for f in sorted((data / NAME).iterdir())]
    path.write_text(json.dumps({"name": NAME, "files": files}))
    return path


def adler32(path: Path) -> str:
    return f"{zlib.adler32(path.read_bytes()) & 0xFFFFFFFF:08x}"


@pytest.fixture
def catalog_sites(tmp_path, procs):
    """tracker, repository and two sites whose dataset comes from a manifest with the catalog's adler32."""
    good, bad = replicas(tmp_path, 2)
    truth = {f.name: adler32(f) for f in (good / NAME).iterdir()}
    victims = sorted((bad / NAME).iterdir())[1:3]
    for f in victims:
        flip_middle(f)
    secrets = {"site1": "s1", "site2": "s2"}
    tport, rport = free_port(), free_port()
    tracker, repo = f"http://127.0.0.1:{tport}", f"http://127.0.0.1:{rport}"
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "tracker.toml").write_text(toml({"tracker": {"listen": f"127.0.0.1:{tport}", "site_secrets": secrets,
                                                         "repo": repo}}))
    (conf / "repo.toml").write_text(toml({"repo": {"listen": f"127.0.0.1:{rport}", "state": str(tmp_path / "repo"),
                                                   "tracker": tracker, "site_secrets": secrets}}))
    procs.start("tracker", [command("bt-tracker"), "run", "--config", str(conf / "tracker.toml")])
    procs.start("repo", [command("bt-repo"), "run", "--config", str(conf / "repo.toml")])
    sites = {}
    for i, (site, data) in enumerate((("site1", good), ("site2", bad))):
        ip = f"127.0.0.{i + 2}"
        control = f"{ip}:{free_port(ip)}"
        (conf / f"{site}.toml").write_text(toml({"server": {
            "site": site, "secret": secrets[site], "listen": control, "peer_listen": f"{ip}:{free_port(ip)}",
            "state": str(tmp_path / site), "manifests": [str(manifest(tmp_path / f"{site}.json", data, truth))],
            "storage_roots": [str(data)], "tracker": tracker, "repo": repo, "heartbeat_interval": 1.0}}))
        procs.start(site, [command("bt-server"), "run", "--config", str(conf / f"{site}.toml")])
        sites[site] = f"http://{control}"
    for url in (tracker, repo, *sites.values()):
        wait_for(lambda url=url: http_ok(f"{url}/healthz"), timeout=30, what=f"{url} to answer")
    return {"repo": repo, "tracker": tracker, "sites": sites, "good": good, "victims": [f.name for f in victims],
            "truth": truth}


def test_with_catalog_checksums_the_bad_replica_is_refused_at_its_site_and_bt_get_verifies(catalog_sites, tmp_path):
    c = catalog_sites
    status = wait_for(lambda: (s := get_json(c["sites"]["site2"] + "/api/status"))["ready"] and s, timeout=60,
                      what="site2 to prepare its datasets")
    assert status["datasets"] == []  # not served, not published
    for lfn in c["victims"]:
        assert any(p.startswith(f"{NAME}/{lfn}: adler32 of the replica is ") and p.endswith(
            f", the catalog says {c['truth'][lfn]}") for p in status["problems"]), status["problems"]
    assert f"{NAME}: 2 of {FILES} files contradict the catalog's checksums; not published" in status["problems"]
    wait_for(lambda: http_ok(f"{c['repo']}/api/datasets/{NAME}"), timeout=60, what="site1 to publish")
    doc = get_json(f"{c['repo']}/api/datasets/{NAME}")
    assert doc["sites"] == ["site1"] and doc["replicas"] == "agree"
    assert {f["lfn"]: f["adler32"] for f in doc["files"]} == c["truth"]  # the catalog's, not a site's
    wait_for(lambda: any(s["name"] == "site1" and s["up"] and s["can_seed"] for s in
                         get_json(f"{c['tracker']}/api/sites")["sites"]), timeout=30, what="site1's heartbeat")
    out = subprocess.run([command("bt-get"), NAME, "--repo", c["repo"], "-o", str(tmp_path / "out"), "--json",
                          "--timeout", "60"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert {f["status"] for f in result["files"]} == {"verified"}
    assert compare_trees(c["good"] / NAME, tmp_path / "out" / NAME) == []
