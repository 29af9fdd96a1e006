"""Precomputed torrents through the real commands: no rehash when unchanged, same info-hash everywhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from torrents import metainfo
from torrents.sample import generate

from tests.support import command

NAME = "data08_cos.sample"


def bt_server(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([command("bt-server"), *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def scan(root: Path, state: Path, *extra: str) -> dict:
    out = bt_server("scan", "--json", "--root", str(root), "--state", str(state), *extra)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_unchanged_dataset_is_not_rehashed_and_a_changed_one_gets_a_new_info_hash(tmp_path):
    ds = generate(tmp_path / "root", name=NAME, files=5, total_size=2 * 2**20)
    state = tmp_path / "state"
    first = scan(tmp_path / "root", state)["datasets"]
    assert [(d["name"], d["files"], d["built"]) for d in first] == [(NAME, 5, True)]
    torrent = Path(first[0]["torrent"])
    mtime = torrent.stat().st_mtime_ns

    second = scan(tmp_path / "root", state)["datasets"]
    assert second[0]["built"] is False
    assert second[0]["info_hash"] == first[0]["info_hash"]
    assert torrent.stat().st_mtime_ns == mtime

    with open(ds / "DPD_IDCOMM.051203._00003.pool.root.1", "r+b") as f:
        f.write(b"changed")
    third = scan(tmp_path / "root", state)["datasets"]
    assert third[0]["built"] is True
    assert third[0]["info_hash"] != first[0]["info_hash"]
    meta = metainfo.parse(torrent.read_bytes())
    assert meta.info_hash == third[0]["info_hash"] and meta.private
    assert meta.announce == "http://127.0.0.1:6969/announce"


def test_every_tracker_goes_in_announce_list_without_changing_the_info_hash(tmp_path):
    generate(tmp_path / "root", name=NAME, files=3, total_size=2**20)
    state = tmp_path / "state"
    one = scan(tmp_path / "root", state, "--tracker", "http://127.0.0.1:7001")["datasets"][0]
    conf = tmp_path / "server.toml"
    conf.write_text('[server]\ntrackers = ["http://127.0.0.1:7001", "http://127.0.0.1:7002/"]\n')
    two = scan(tmp_path / "root", state, "--config", str(conf))["datasets"][0]
    assert two["built"] is False, "only the trackers changed: no rehash"
    assert two["info_hash"] == one["info_hash"]
    meta = metainfo.parse(Path(two["torrent"]).read_bytes())
    assert meta.announce == "http://127.0.0.1:7001/announce"
    assert meta.announce_list == (("http://127.0.0.1:7001/announce", "http://127.0.0.1:7002/announce"),)
    assert meta.trackers() == ["http://127.0.0.1:7001/announce", "http://127.0.0.1:7002/announce"]
    fresh = scan(tmp_path / "root", tmp_path / "fresh", "--config", str(conf))["datasets"][0]
    assert fresh["built"] is True and fresh["info_hash"] == one["info_hash"]
    assert Path(fresh["torrent"]).read_bytes() == Path(two["torrent"]).read_bytes()


def test_two_sites_with_the_same_files_compute_the_same_info_hash(tmp_path):
    generate(tmp_path / "site1", name=NAME, files=4, total_size=1 * 2**20)
    generate(tmp_path / "site2", name=NAME, files=4, total_size=1 * 2**20)
    # Site 2 keeps its replica behind links into a pool: the farm hides it.
    pool = tmp_path / "site2pool"
    shutil.move(tmp_path / "site2" / NAME, pool)
    (tmp_path / "site2" / NAME).mkdir()
    for f in sorted(pool.iterdir()):
        os.symlink(f, tmp_path / "site2" / NAME / f.name)
    one = scan(tmp_path / "site1", tmp_path / "s1", "--tracker", "http://127.0.0.1:1")["datasets"]
    two = scan(tmp_path / "site2", tmp_path / "s2", "--tracker", "http://127.0.0.9:2",
               "--config", str(_config(tmp_path, pool)))["datasets"]
    assert one[0]["info_hash"] == two[0]["info_hash"]
    made = bt_server("make-torrent", str(tmp_path / "site1" / NAME), "-o", str(tmp_path / "made.torrent"))
    assert made.returncode == 0, made.stderr
    assert made.stdout.split()[0] == one[0]["info_hash"]
    assert metainfo.parse((tmp_path / "made.torrent").read_bytes()).info_hash == one[0]["info_hash"]


def _config(tmp_path: Path, pool: Path) -> Path:
    path = tmp_path / "site2.toml"
    path.write_text(f'[server]\nstorage_roots = ["{pool}"]\n')
    return path


def test_make_torrent_options_and_refusals(tmp_path):
    ds = generate(tmp_path / "root", name=NAME, files=3, total_size=600_000)
    out = bt_server("make-torrent", str(ds), "-o", str(tmp_path / "h.torrent"), "--hybrid", "--no-private",
                    "--piece-size", "64K", "--tracker", "http://127.0.0.1:7000")
    assert out.returncode == 0, out.stderr
    meta = metainfo.parse((tmp_path / "h.torrent").read_bytes())
    assert meta.info_hash_v2 and not meta.private and meta.piece_length == 65536
    assert meta.announce == "http://127.0.0.1:7000/announce"
    assert [f.lfn for f in meta.data_files] == sorted(p.name for p in ds.iterdir())
    assert out.stdout.split()[0] == meta.info_hash

    bad = bt_server("make-torrent", str(ds), "--piece-size", "1000")
    assert bad.returncode == 1
    assert bad.stderr.strip() == "bt-server: error: --piece-size: 1000 is not a power of two of at least 16 KiB"


def test_scan_reports_refused_files_with_exit_status_3(tmp_path):
    root = tmp_path / "root"
    (root / "ds").mkdir(parents=True)
    (root / "ds" / "ok").write_bytes(b"x" * 10)
    outside = tmp_path / "outside"
    outside.write_bytes(b"secret")
    os.symlink(outside, root / "ds" / "escape")
    out = bt_server("scan", "--root", str(root), "--state", str(tmp_path / "state"))
    assert out.returncode == 8  # PROBLEMS
    assert f"bt-server: refused: {root}/ds/escape: link to {outside} leaves the storage roots; refused" in out.stderr


def test_scan_says_an_empty_dataset_directory_without_failing(tmp_path):
    root = tmp_path / "root"
    (root / "empty").mkdir(parents=True)
    (root / "ds").mkdir()
    (root / "ds" / "ok").write_bytes(b"x" * 10)
    out = bt_server("scan", "--root", str(root), "--state", str(tmp_path / "state"))
    assert out.returncode == 0, out.stderr
    assert "empty: dataset has no files" in out.stderr
    assert "ds" in out.stdout


def test_make_torrent_from_a_manifest_matches_the_directory(tmp_path):
    ds = generate(tmp_path / "root", name=NAME, files=3, total_size=500_000)
    pool = tmp_path / "pool"
    pool.mkdir()
    rows = []
    for i, f in enumerate(sorted(ds.iterdir())):
        replica = pool / f"{i:08X}"
        shutil.copy(f, replica)
        rows.append(f"{NAME}\t{f.name}\t{f.stat().st_size}\t-\t{replica}\t{f}")
    manifest = tmp_path / "m.tsv"
    manifest.write_text("# dataset lfn size adler32 pfns\n" + "\n".join(rows) + "\n")
    from_dir = bt_server("make-torrent", str(ds), "-o", str(tmp_path / "d.torrent"))
    from_manifest = bt_server("make-torrent", str(manifest), "-o", str(tmp_path / "m.torrent"))
    assert from_dir.returncode == 0 and from_manifest.returncode == 0, from_manifest.stderr
    assert from_manifest.stdout.split()[:2] == [from_dir.stdout.split()[0], NAME]
