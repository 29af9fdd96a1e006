"""When a worker with no seed asks the tracker again (btget/worker/reannounce.py), on a made-up clock."""

from __future__ import annotations

from btget.worker.reannounce import Reannounce


def test_nothing_before_the_first_answer_nor_while_a_seed_is_connected():
    r = Reannounce()
    assert not r.due(0.0, 0, seedless=False)  # no seed had, no connection tried yet
    r.lost()
    assert not r.due(0.1, 1, seedless=True)


def test_a_loss_asks_at_once_then_every_ten_seconds_without_one():
    r = Reannounce()
    assert r.due(0.5, 0, seedless=True)  # the first: at once
    assert not r.due(1.0, 0, seedless=True)
    r.lost()  # the only seed was banned for a corrupt piece, 0.6 s later
    assert not r.due(1.2, 0, seedless=True) and r.due(1.5, 0, seedless=True)  # 1 s after the last
    assert not r.due(11.4, 0, seedless=True) and r.due(11.5, 0, seedless=True)  # no loss since: 10 s


def test_losses_in_a_row_back_off_to_ten_seconds_and_a_seed_resets_it():
    r = Reannounce()
    times, now = [], 0.0
    while now < 40:
        r.lost()  # handed the same unreachable peer each time, refused at once
        if r.due(now, 0, seedless=True):
            times.append(now)
        now = round(now + 0.1, 1)
    assert times == [0.0, 1.0, 3.0, 7.0, 15.0, 25.0, 35.0]
    assert not r.due(40.0, 1, seedless=True)  # a seed connected: the back-off starts over
    r.lost()
    assert r.due(45.0, 0, seedless=True)
    r.lost()
    assert r.due(46.0, 0, seedless=True)


def test_sites_the_worker_let_go_itself_count_as_seeds_had():
    r = Reannounce()
    r.lost()  # even just after a loss
    assert not r.due(0.5, 0, seedless=True, let_go=2)  # a 2-site swarm, both sites past their turn
    assert not r.due(11.0, 0, seedless=True, let_go=1)
    assert r.due(11.5, 0, seedless=True, let_go=0)  # back from the IP filter, and gone: ask
