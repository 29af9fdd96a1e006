"""torrents.sample.generate: the same arguments give the same bytes anywhere."""

from __future__ import annotations

import hashlib
import os

from torrents.dataset import from_directory, validate_lfn, validate_name
from torrents.sample import SAMPLE_NAME, generate, sample_lfn


def digest_tree(root) -> dict[str, str]:
    return {p.name: hashlib.sha1(p.read_bytes()).hexdigest() for p in sorted(root.iterdir())}


def test_two_directories_get_the_same_bytes(tmp_path):
    a = generate(tmp_path / "site1", files=5, total_size=200_000)
    b = generate(tmp_path / "site2", files=5, total_size=200_000)
    assert a == tmp_path / "site1" / SAMPLE_NAME
    assert digest_tree(a) == digest_tree(b)


def test_names_and_sizes(tmp_path):
    root = generate(tmp_path, files=12, total_size=1_200_000, jitter=0.3)
    names = sorted(p.name for p in root.iterdir())
    assert names == [sample_lfn(i) for i in range(1, 13)]
    assert names[0] == "DPD_IDCOMM.051203._00001.pool.root.1"
    sizes = [(root / n).stat().st_size for n in names]
    assert max(sizes) / min(sizes) <= 1.3 / 0.7 + 1e-6  # each the mean ± 30 %, scaled to the exact total
    assert len(set(sizes)) > 1
    assert sum(sizes) == 1_200_000  # --sample-size 96M is 96 MiB, not about it
    assert validate_name(SAMPLE_NAME) == SAMPLE_NAME
    assert all(validate_lfn(n) == (n,) for n in names)


def test_it_is_a_valid_dataset(tmp_path):
    ds = from_directory(generate(tmp_path, files=3, total_size=30_000))
    assert ds.name == SAMPLE_NAME
    assert [f.lfn for f in ds.files] == [sample_lfn(i) for i in (1, 2, 3)]


def test_the_content_depends_on_the_seed_and_looks_random(tmp_path):
    a = generate(tmp_path / "a", files=2, total_size=20_000)
    b = generate(tmp_path / "b", files=2, total_size=20_000, seed=1)
    assert digest_tree(a) != digest_tree(b)
    data = (a / sample_lfn(1)).read_bytes()
    assert len(set(data)) > 250  # random bytes, not a constant fill
    assert data != (a / sample_lfn(2)).read_bytes()[:len(data)]


def test_names_and_counts_are_arguments(tmp_path):
    root = generate(tmp_path, name="mc08.test", files=1, total_size=10, jitter=0)
    assert root.name == "mc08.test"
    assert [(p.name, p.stat().st_size) for p in root.iterdir()] == [(sample_lfn(1), 10)]


def test_existing_files_of_the_right_size_are_kept(tmp_path):
    root = generate(tmp_path, files=2, total_size=20_000)
    path = root / sample_lfn(1)
    before = path.stat().st_mtime_ns
    os.utime(path, ns=(before - 10**9, before - 10**9))
    generate(tmp_path, files=2, total_size=20_000)
    assert path.stat().st_mtime_ns == before - 10**9
    path.write_bytes(b"short")  # wrong size: rewritten with the right bytes
    generate(tmp_path, files=2, total_size=20_000)
    assert digest_tree(root) == digest_tree(generate(tmp_path / "fresh", files=2, total_size=20_000))
    assert not list(root.glob("*.part"))
