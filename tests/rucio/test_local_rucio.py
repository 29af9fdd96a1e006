"""The local Rucio itself: a real server from the PyPI package, driven through Rucio's own client."""

from __future__ import annotations

from pathlib import Path

from btget.transfer.finish import adler32_of
from btswarm.localrucio import LocalRucio, pfn_path
from tests.rucio.conftest import make_files, unique


def test_it_answers_ping_and_logs_in_as_root(local_rucio):
    assert local_rucio.ping()
    assert local_rucio.client().whoami()["account"] == "root"
    assert LocalRucio.running_at(local_rucio.root).url == local_rucio.url
    # the database is bootstrapped once: a second start of the same directory keeps it
    assert (local_rucio.root / "bootstrapped").exists() and (local_rucio.root / "rucio.db").stat().st_size > 0


def test_a_dataset_registered_from_disk_lists_its_replicas_at_hashed_paths(local_rucio, tmp_path):
    rse, scope = unique("LR"), unique("lr")
    prefix = local_rucio.add_rse(rse, tmp_path / "rse")
    local_rucio.add_scope(scope)
    src = make_files(tmp_path / "src", {"a.root": 70_000, "b.root": 1})
    placed = local_rucio.register_dataset(rse, scope, "lr.ds", src)
    c = local_rucio.client()

    files = {f["name"]: f for f in c.list_files(scope, "lr.ds")}
    assert set(files) == {"a.root", "b.root"}
    for name, f in files.items():
        # Rucio's adler32 (registered) equals ours (bt-get's verifier): two implementations agree
        assert (f["bytes"], f["adler32"]) == ((src / name).stat().st_size, adler32_of(src / name))
    reps = list(c.list_replicas([{"scope": scope, "name": "lr.ds"}], schemes=["file"], rse_expression=rse))
    assert len(reps) == 2
    for rep in reps:
        (pfn,) = rep["rses"][rse]
        path = Path(pfn_path(pfn))
        # the `hash` lfn2pfn: PREFIX/SCOPE/h1/h2/LFN, where the file was placed
        assert path == placed[rep["name"]] and path.parent.parent.parent == prefix / scope
        assert path.read_bytes() == (src / rep["name"]).read_bytes()


def test_registering_again_is_harmless_and_a_second_rse_adds_its_replicas(local_rucio, tmp_path):
    scope, rse1, rse2 = unique("lr"), unique("LRA"), unique("LRB")
    local_rucio.add_scope(scope)
    local_rucio.add_scope(scope)
    for rse in (rse1, rse2, rse1):
        local_rucio.add_rse(rse, tmp_path / rse)
    src = make_files(tmp_path / "src", {"x.root": 5000})
    for rse in (rse1, rse1, rse2):
        local_rucio.register_dataset(rse, scope, "lr.two", src)
    (rep,) = local_rucio.client().list_replicas([{"scope": scope, "name": "lr.two"}], schemes=["file"])
    assert set(rep["rses"]) == {rse1, rse2}


def test_rucio_upload_into_an_rse_it_made_needs_no_quota_step(local_rucio, tmp_path):
    # `rucio upload` adds the replica, then a rule; with no account limit on the RSE the rule
    # fails with "not enough quota left" and the command still exits 0.
    import subprocess
    import sys

    rse, scope = unique("LU"), unique("lu")
    local_rucio.add_rse(rse, tmp_path / "rse")
    local_rucio.add_scope(scope)
    src = make_files(tmp_path / "up", {"later.root": 12_345})
    rucio = Path(sys.executable).parent / "rucio"
    proc = subprocess.run([str(rucio), "upload", "--rse", rse, "--scope", scope, str(src / "later.root")],
                          env=local_rucio.env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "quota" not in proc.stderr + proc.stdout
    (rule,) = local_rucio.client().list_replication_rules({"scope": scope, "name": "later.root"})
    assert (rule["rse_expression"], rule["state"]) == (rse, "OK")
    (rep,) = local_rucio.client().list_replicas([{"scope": scope, "name": "later.root"}], schemes=["file"])
    assert Path(pfn_path(rep["rses"][rse][0])).read_bytes() == (src / "later.root").read_bytes()
