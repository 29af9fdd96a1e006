"""btget.ratecap: a run's caps split among its workers, and the parent's decisions about them."""

from __future__ import annotations

import pytest

from btget import ratecap
from btget.events import Progress
from btget.runstate import Policy, RunState, SetRates, step
from torrents.errors import BtswarmError
from torrents.units import parse_rate


@pytest.mark.parametrize("text, rate", [
    ("400mbit", 50_000_000), ("100mbps", 12_500_000), ("1gbit", 125_000_000), ("8kbit", 1000),
    ("50MB/s", 50 * 2**20), ("50MiB/s", 50 * 2**20), ("50M", 50 * 2**20), ("512k", 512 * 1024),
    ("2G", 2 * 2**30), ("1000", 1000), ("1000/s", 1000), ("0", 0), (123, 123), ("1.5MB/s", int(1.5 * 2**20))])
def test_rates_read_as_network_people_and_this_project_write_them(text, rate):
    assert parse_rate(text) == rate


@pytest.mark.parametrize("text", ["fast", "-1", "10 furlongs", "mbit", ""])
def test_a_bad_rate_says_what_a_rate_looks_like(text):
    with pytest.raises(BtswarmError, match="not a rate"):
        parse_rate(text)


@pytest.mark.parametrize("total, remaining, want", [
    (1000, {1: 500, 2: 500}, {1: 500, 2: 500}),
    (1000, {1: 900, 2: 100}, {1: 800, 2: 200}),      # 125 floor each, the rest (750) by bytes left
    (1000, {1: 100, 2: 0}, {1: 1000, 2: 1}),         # a finished worker gives its part to the others
    (1000, {1: 0, 2: 0}, {1: 500, 2: 500}),          # all done (seeding): even
    (0, {1: 10, 2: 10}, {1: 0, 2: 0}),               # no cap
    (1, {1: 5, 2: 5, 3: 5}, {1: 1, 2: 1, 3: 1}),     # never 0: libtorrent reads 0 as no limit
])
def test_the_download_cap_follows_the_bytes_each_worker_still_has_to_fetch(total, remaining, want):
    assert ratecap.split(total, remaining) == want


def test_the_parts_add_up_to_the_cap_and_none_is_starved():
    parts = ratecap.split(10_000_000, {1: 1, 2: 10**9, 3: 10**6, 4: 5})
    assert sum(parts.values()) <= 10_000_000 and sum(parts.values()) > 10_000_000 - 4
    assert min(parts.values()) >= 10_000_000 * ratecap.FLOOR / 4 - 1


def test_a_small_move_is_not_worth_a_message():
    assert not ratecap.changed({1: 1000, 2: 1000}, {1: 1050, 2: 950})
    assert ratecap.changed({1: 1000, 2: 1000}, {1: 1200, 2: 800})
    assert ratecap.changed({}, {1: 1})


def _progress(worker: int, done: int, wanted: int) -> Progress:
    return Progress(worker, done=done, wanted=wanted)


def test_the_parent_reshares_the_cap_as_workers_progress_and_finish():
    state = RunState.start(Policy("ds", workers=2, size=200, max_rate=1000, max_upload_rate=600), 0.0)
    assert not [a for a in step(state, _progress(1, 0, 100), 0.1) if isinstance(a, SetRates)]  # worker 2 unheard
    (first,) = [a for a in step(state, _progress(2, 0, 100), 0.2) if isinstance(a, SetRates)]
    assert first.rates == {1: (500, 300), 2: (500, 300)}
    assert not [a for a in step(state, _progress(1, 10, 100), 0.3) if isinstance(a, SetRates)]  # a small move
    (later,) = [a for a in step(state, _progress(1, 95, 100), 0.4) if isinstance(a, SetRates)]
    assert later.rates[2][0] > later.rates[1][0] and sum(d for d, _ in later.rates.values()) <= 1000


def test_without_a_cap_nothing_is_said():
    state = RunState.start(Policy("ds", workers=1, size=100), 0.0)
    assert not [a for a in step(state, _progress(1, 0, 100), 0.1) if isinstance(a, SetRates)]
