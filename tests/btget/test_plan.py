"""plan.py: the split of a dataset into shares (pure)."""

from __future__ import annotations

import random

import pytest

from btget.resolve import plan
from torrents.errors import UsageError


def files(sizes: list[int]) -> list[plan.PlanFile]:
    return [plan.PlanFile(i, f"f{i:03d}.root", s) for i, s in enumerate(sizes)]


def loads(shares: list[list[plan.PlanFile]]) -> list[int]:
    return [sum(f.size for f in s) for s in shares]


def test_split_balances_by_bytes_not_count():
    fs = files([100, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10])  # one big file, ten small ones
    shares = plan.split(fs, 2)
    assert loads(shares) == [100, 100]
    assert [len(s) for s in shares] == [1, 10]


def test_split_is_close_to_even_on_random_sizes():
    rng = random.Random(7)
    fs = files([rng.randrange(1, 5_000_000) for _ in range(200)])
    for n in (2, 3, 4, 8):
        ls = loads(plan.split(fs, n))
        assert max(ls) - min(ls) <= max(f.size for f in fs)
        assert max(ls) / (sum(ls) / n) < 1.05


def test_split_never_splits_a_file_larger_than_a_share():
    fs = files([1000, 1, 1, 1])
    shares = plan.split(fs, 3)
    assert [f.index for f in shares[0]] == [0]
    assert sorted(f.index for s in shares for f in s) == [0, 1, 2, 3]


def test_split_is_deterministic_and_independent_of_input_order():
    fs = files([5, 5, 5, 3, 3, 8, 1, 1, 0])
    shuffled = fs[:]
    random.Random(1).shuffle(shuffled)
    assert plan.split(fs, 3) == plan.split(shuffled, 3)


def test_shards_partition_the_dataset():
    fs = files([random.Random(i).randrange(1, 10**6) for i in range(37)])
    n = 5
    union = [f for k in range(1, n + 1) for f in plan.shard(fs, k, n)]
    assert sorted(union, key=lambda f: f.index) == fs
    assert plan.shard(fs, 2, n) == plan.split(fs, n)[1]


def test_more_shares_than_files_leaves_empty_shares():
    assert loads(plan.split(files([4, 4]), 3)) == [4, 4, 0]


@pytest.mark.parametrize("text, expected", [("1/2", (1, 2)), ("8/8", (8, 8)), (" 3/ 4", (3, 4))])
def test_parse_shard(text, expected):
    assert plan.parse_shard(text) == expected


@pytest.mark.parametrize("text, problem", [
    ("3/2", "--shard: 3/2: K must be between 1 and N"),
    ("0/2", "--shard: 0/2: K must be between 1 and N"),
    ("1-2", "--shard: '1-2' is not K/N (example: 2/8)"),
    ("a/b", "--shard: 'a/b' is not K/N (example: 2/8)"),
])
def test_parse_shard_refuses(text, problem):
    with pytest.raises(UsageError) as err:
        plan.parse_shard(text)
    assert str(err.value) == problem


def test_select_by_glob_on_lfn_or_basename():
    fs = [plan.PlanFile(0, "a/x.root.1", 1), plan.PlanFile(1, "a/y.log", 1), plan.PlanFile(2, "z.root.1", 1)]
    assert [f.index for f in plan.select(fs, ["*.root.1"])] == [0, 2]
    assert [f.index for f in plan.select(fs, ["a/*"])] == [0, 1]
    assert [f.index for f in plan.select(fs, ["*.log", "z*"])] == [1, 2]
    assert plan.select(fs, []) == fs
    with pytest.raises(UsageError, match=r"^--files: \*.txt: matches none of the 3 files$"):
        plan.select(fs, ["*.txt"])


def test_sample_is_reproducible_with_a_seed():
    fs = files([1] * 50)
    a = plan.sample(fs, 5, "42")
    assert a == plan.sample(fs, 5, "42")
    assert a != plan.sample(fs, 5, "43")
    assert [f.index for f in a] == sorted(f.index for f in a)
    assert plan.sample(fs, 80, 1) == fs


def test_worker_count():
    assert plan.worker_count("auto", cpus=2, files=10) == (2, None)
    assert plan.worker_count("auto", cpus=64, files=10) == (4, None)
    assert plan.worker_count("3", cpus=2, files=2) == (2, None)
    assert plan.worker_count(1, cpus=2, files=10) == (1, None)
    # A 10,000-file dataset must not start 500 processes on a 2-core host, and the user is told.
    assert plan.worker_count("500", cpus=2, files=10_000) == (
        4, "--workers 500: this host has 2 cores; starting 4 (at most 2 per core)")
    with pytest.raises(UsageError, match="^--workers: 'many' is not a number or 'auto'$"):
        plan.worker_count("many", cpus=2, files=1)


def test_share_key_names_the_set_of_files():
    fs = files([1, 2, 3])
    assert plan.share_key(fs[:2]) == plan.share_key(list(reversed(fs[:2])))
    assert plan.share_key(fs[:2]) != plan.share_key(fs[1:])
