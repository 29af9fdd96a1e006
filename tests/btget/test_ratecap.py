"""btget.transfer.ratecap: a run's caps split among its workers, and the parent's decisions about them."""

from __future__ import annotations

import pytest

from btget.events import Progress
from btget.transfer import ratecap
from btget.transfer.runstate import Policy, RunState, SetRates, step
from torrents.errors import BtswarmError
from torrents.units import parse_byte_rate


@pytest.mark.parametrize("text, rate", [
    ("400mbit", 50_000_000), ("100mbps", 12_500_000), ("1gbit", 125_000_000), ("8kbit", 1000),
    ("50MB/s", 50 * 2**20), ("50MiB/s", 50 * 2**20), ("50M", 50 * 2**20), ("512k", 512 * 1024),
    ("2G", 2 * 2**30), ("1000", 1000), ("1000/s", 1000), ("0", 0), (123, 123), ("1.5MB/s", int(1.5 * 2**20))])
def test_rates_read_as_network_people_and_this_project_write_them(text, rate):
    assert parse_byte_rate(text) == rate


@pytest.mark.parametrize("text", ["fast", "-1", "10 furlongs", "mbit", ""])
def test_a_bad_rate_says_what_a_rate_looks_like(text):
    with pytest.raises(BtswarmError, match="not a rate"):
        parse_byte_rate(text)


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
    assert ratecap.moved({1: 1000, 2: 1000}, {1: 1050, 2: 950}) == {}
    assert ratecap.moved({1: 1000, 2: 1000}, {1: 1200, 2: 950}) == {1: 1200}  # only the part that moved
    assert ratecap.moved({}, {1: 1}) == {1: 1}


@pytest.mark.parametrize("using, given, want", [
    ({1: 500, 2: 500}, {1: 500, 2: 500}, {1: 500, 2: 500}),       # both held back: even
    ({1: 100, 2: 500}, {1: 500, 2: 500}, {1: 130, 2: 870}),       # 1 uses 100: keeps it + 30 %, 2 gets the rest
    ({1: 50, 2: 500}, {1: 500, 2: 500}, {1: 125, 2: 875}),        # never below the floor (a quarter of even)
    ({1: 10, 2: 10}, {1: 500, 2: 500}, {1: 500, 2: 500}),         # neither held back by the cap: scaled up to it
    ({1: 0, 2: 900, 3: 0}, {1: 333, 2: 333, 3: 333}, {1: 83, 2: 833, 3: 83}),
])
def test_the_cap_goes_to_the_workers_it_holds_back(using, given, want):
    got = ratecap.fill(1000, using, given)
    assert got == pytest.approx(want, abs=1) and sum(got.values()) <= 1000


def _progress(worker: int, done: int, wanted: int, peer_bytes: int = 0) -> Progress:
    return Progress(worker, done=done, wanted=wanted, peer_bytes=peer_bytes)


def _rates(actions) -> list[SetRates]:
    return [a for a in actions if isinstance(a, SetRates)]


def test_the_parent_moves_the_cap_to_the_worker_that_uses_it():
    state = RunState.start(Policy("ds", workers=2, size=200, max_rate=1000, max_upload_rate=600), 0.0)
    assert not _rates(step(state, _progress(1, 0, 100), 0.1))  # worker 2 unheard of yet
    (first,) = _rates(step(state, _progress(2, 0, 100), 0.2))
    assert first.rates == {1: (500, 300), 2: (500, 300)}
    assert not _rates(step(state, _progress(1, 0, 100, peer_bytes=200), 0.5))  # looked at every RESHARE s
    # about half a second later worker 1 took 250 B through the cap, worker 2 (choked by the seeds) nothing
    step(state, _progress(1, 50, 100, peer_bytes=250), 0.65)
    (later,) = _rates(step(state, _progress(2, 0, 100, peer_bytes=0), 0.75))
    # worker 2 keeps the floor; worker 1 gets the rest, and more while the run is below the cap, but
    # never more than the cap alone
    assert later.rates == {1: (1000, 300), 2: (125, 300)}
    # worker 1 done: worker 2 gets it all
    step(state, Progress(1, done=100, wanted=100, peer_bytes=600, flushed=True), 1.05)
    (last,) = _rates(step(state, _progress(2, 10, 100, peer_bytes=100), 1.35))
    assert last.rates[2][0] == 1000 and last.rates[1][0] == 1


def test_without_a_cap_nothing_is_said():
    state = RunState.start(Policy("ds", workers=1, size=100), 0.0)
    assert not _rates(step(state, _progress(1, 0, 100), 0.1))


@pytest.mark.parametrize("observed, held, want", [
    (1000, True, 1.0),      # at the cap: as it was
    (640, True, 1.25),      # below it, some worker held back: more, damped (the square root)
    (100, True, 1.6),       # far below: no more than GAIN_MAX
    (1563, True, 0.8),      # above it: less, no less than GAIN_MIN
    (300, False, 1.0),      # nobody held back by its part: the swarm sets the pace
])
def test_the_parts_add_up_to_more_than_the_cap_only_while_the_run_is_below_it(observed, held, want):
    assert ratecap.gain(1.0, observed, 1000, held) == pytest.approx(want, abs=0.01)


def test_a_run_with_a_choked_worker_reaches_its_cap():
    # Three workers, each site's link passes 700 B/s to a worker; the seeds choke worker 3 for good.
    # An even split of what is left after its floor (458 + 458) fell short of the cap by 8 %; the run
    # as a whole must reach the cap and stay within 10 % of it.
    cap, links = 1000, {1: 700, 2: 700, 3: 0}
    state = RunState.start(Policy("ds", workers=3, size=3_000_000, max_rate=cap), 0.0)
    given = {k: cap // 3 for k in links}
    taken = {k: 0 for k in links}
    rates = []
    for tick in range(1, 41):
        now = tick * 0.5
        for k in links:
            taken[k] += min(given[k], links[k]) * 0.5  # libtorrent holds each worker to its part
        for k in links:
            for rate in _rates(step(state, _progress(k, taken[k], 1_000_000, peer_bytes=int(taken[k])), now)):
                given.update({w: c for w, (c, _) in rate.rates.items()})
        rates.append(sum(min(given[k], links[k]) for k in links))
    assert all(abs(r / cap - 1) <= 0.10 for r in rates[-20:]), rates
    assert sum(rates[-20:]) / 20 == pytest.approx(cap, rel=0.03), rates
