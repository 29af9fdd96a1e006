"""torrents.fingerprint: unchanged files keep their fingerprint; any change gives a new one."""

from __future__ import annotations

import os
import shutil

import pytest

from torrents.fingerprint import fingerprint

LFN1 = "DPD_IDCOMM.051203._00001.pool.root.1"
LFN2 = "DPD_IDCOMM.051203._00002.pool.root.1"
MTIME = 1_234_567_890_000_000_000


@pytest.fixture
def farm(tmp_path):
    """Two pool files and a symlink farm pointing at them, with fixed mtimes."""
    pool = tmp_path / "pool"
    pool.mkdir()
    farm = tmp_path / "farm"
    farm.mkdir()
    for lfn, data in ((LFN1, b"one"), (LFN2, b"two two")):
        (pool / lfn).write_bytes(data)
        os.utime(pool / lfn, ns=(MTIME, MTIME))
        os.symlink(pool / lfn, farm / lfn)
    return farm


def entries(farm):
    return [(LFN1, farm / LFN1), (LFN2, farm / LFN2)]


def test_same_files_same_value(farm):
    a = fingerprint(entries(farm))
    assert a == fingerprint(entries(farm))
    assert a == fingerprint(list(reversed(entries(farm))))  # order of the listing does not matter
    assert len(a) == 32 and int(a, 16) >= 0


def test_reading_the_files_does_not_change_it(farm):
    # metadata only, never the contents: reading (atime) changes nothing
    a = fingerprint(entries(farm))
    (farm / LFN1).read_bytes()
    assert fingerprint(entries(farm)) == a


def test_a_rewrite_that_keeps_size_and_mtime_changes_it(farm):
    # a replica repaired with rsync -a or cp -p: same size, same mtime, other bytes
    a = fingerprint(entries(farm))
    target = os.path.realpath(farm / LFN1)
    with open(target, "r+b") as f:
        f.write(b"ONE")
    os.utime(target, ns=(MTIME, MTIME))
    assert fingerprint(entries(farm)) != a


def test_a_fresh_copy_with_the_same_times_changes_it(farm):
    a = fingerprint(entries(farm))
    target = os.path.realpath(farm / LFN1)
    shutil.copy2(target, target + ".new")
    os.replace(target + ".new", target)
    assert fingerprint(entries(farm)) != a


def test_touching_mtime_changes_it(farm):
    a = fingerprint(entries(farm))
    os.utime(os.path.realpath(farm / LFN2), ns=(MTIME + 1, MTIME + 1))
    assert fingerprint(entries(farm)) != a


def test_changing_size_changes_it(farm):
    a = fingerprint(entries(farm))
    target = os.path.realpath(farm / LFN1)
    with open(target, "ab") as f:
        f.write(b"!")
    os.utime(target, ns=(MTIME, MTIME))
    assert fingerprint(entries(farm)) != a


def test_retargeting_a_symlink_changes_it(farm, tmp_path):
    a = fingerprint(entries(farm))
    replica = tmp_path / "disk2" / "replica"
    replica.parent.mkdir()
    replica.write_bytes(b"one")
    os.utime(replica, ns=(MTIME, MTIME))  # same size and mtime: only the target differs
    (farm / LFN1).unlink()
    os.symlink(replica, farm / LFN1)
    assert fingerprint(entries(farm)) != a


def test_renaming_an_lfn_changes_it(farm):
    a = fingerprint(entries(farm))
    assert fingerprint([("renamed", farm / LFN1), (LFN2, farm / LFN2)]) != a


def test_adding_or_removing_a_file_changes_it(farm):
    assert fingerprint(entries(farm)[:1]) != fingerprint(entries(farm))


def test_changing_extra_changes_it(farm):
    a = fingerprint(entries(farm), extra="piece_length=262144 private=1 v1")
    assert a == fingerprint(entries(farm), extra="piece_length=262144 private=1 v1")
    assert a != fingerprint(entries(farm), extra="piece_length=524288 private=1 v1")
    assert a != fingerprint(entries(farm))


def test_extra_and_lfn_do_not_run_together(farm):
    # "ab" + LFN "c" must not read the same as "a" + LFN "bc"
    assert fingerprint([("c", farm / LFN1)], extra="ab") != fingerprint([("bc", farm / LFN1)], extra="a")


def test_missing_file_is_an_os_error(farm):
    os.unlink(os.path.realpath(farm / LFN1))
    with pytest.raises(FileNotFoundError):
        fingerprint(entries(farm))
