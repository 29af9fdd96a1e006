"""handout.sample: the C-fed Fisher-Yates that replaced rng.sample/rng.shuffle must stay uniform."""

from __future__ import annotations

import itertools
import random
from collections import Counter

from tracker import handout


def test_sample_is_a_uniform_ordered_subset():
    rng = random.Random(7)
    group = list("abcde")
    trials = 60_000
    orders = Counter(tuple(handout.sample(group, 2, rng)) for _ in range(trials))
    assert set(orders) == set(itertools.permutations(group, 2))  # 20 ordered pairs, each 1/20
    expected = trials / 20
    assert all(abs(n - expected) < 0.1 * expected for n in orders.values()), orders
    assert group == list("abcde")  # the caller's list is not touched


def test_sample_sizes():
    rng = random.Random(1)
    assert handout.sample([], 5, rng) == []
    assert handout.sample([1, 2, 3], 0, rng) == []
    assert sorted(handout.sample([1, 2, 3], 10, rng)) == [1, 2, 3]
    assert len(set(handout.sample(list(range(300)), 200, rng))) == 200


def test_sample_of_a_large_group_is_uniform_without_copying_it():
    rng = random.Random(3)
    group = list(range(1000))
    counts = Counter(x for _ in range(20_000) for x in handout.sample(group, 5, rng))  # 4k < n: rejection path
    assert len(counts) == 1000
    expected = 20_000 * 5 / 1000
    assert all(abs(n - expected) < 0.5 * expected for n in counts.values())
    draws = [handout.sample(group, 200, rng) for _ in range(50)]
    assert all(len(set(d)) == 200 for d in draws)
