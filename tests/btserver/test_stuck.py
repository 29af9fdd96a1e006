"""The stuck decision (btserver/stuck.py): samples in, stuck or not out. Pure."""

from __future__ import annotations

from btserver.stuck import PeerWait, StuckWatch, waiting


def run(watch: StuckWatch, samples: list[tuple[float, int, int]]) -> list[bool]:
    """`stuck` after each (time, uploaded, peers waiting) sample."""
    out = []
    for now, uploaded, owed in samples:
        watch.step(now, uploaded, owed)
        out.append(watch.stuck)
    return out


def test_peers_waiting_and_nothing_uploaded_for_stuck_after_is_stuck_since_the_stall_began():
    w = StuckWatch(after=10)
    states = run(w, [(0, 100, 1), (2, 200, 1), (5, 200, 1), (11.9, 200, 1), (12, 200, 1), (13, 200, 1)])
    # uploads last moved at 2 s: stuck from 12 s, since 2 s
    assert states == [False, False, False, False, True, True]
    assert w.since == 2


def test_any_upload_recovers_and_a_slow_seed_is_never_stuck():
    w = StuckWatch(after=10)
    assert run(w, [(0, 0, 1), (10, 0, 1), (11, 1, 1)]) == [False, True, False]
    slow = StuckWatch(after=10)
    assert not any(run(slow, [(t, t // 5, 2) for t in range(0, 60)]))  # one block now and then


def test_idle_seed_with_nobody_waiting_is_not_stuck_and_the_clock_starts_when_someone_waits():
    w = StuckWatch(after=10)
    assert run(w, [(0, 50, 0), (30, 50, 0), (30.5, 50, 1), (39.9, 50, 1), (40, 50, 1)]) == [False] * 4 + [True]
    assert w.since == 30  # the last sample at which nobody waited


def test_stuck_stays_stuck_when_the_waiting_peers_give_up_until_a_probe_read_answers():
    w = StuckWatch(after=10)
    run(w, [(0, 0, 1), (10, 0, 1)])
    assert w.stuck and not w.wants_probe()  # peers still wait: their uploads will tell
    run(w, [(11, 0, 0), (12, 0, 0)])  # the clients shut the silent seed out
    assert w.stuck and w.wants_probe()
    w.probe_started()
    assert not w.wants_probe()  # one read at a time; it blocks while the storage hangs
    assert not w.probe_done(20, ok=False) and w.stuck
    w.probe_started()
    assert w.probe_done(30, ok=True) and not w.stuck
    assert run(w, [(31, 0, 1), (39.9, 0, 1), (40, 0, 1)]) == [False, False, True]  # from the probe's answer on


def test_peers_that_leave_while_owed_blocks_do_not_end_the_stall_a_probe_that_answers_does():
    w = StuckWatch(after=10)
    run(w, [(0, 0, 0), (1, 0, 2), (4, 0, 0)])  # owed blocks from 1 s; at 4 s the clients gave up
    assert w.stalled and not w.stuck and w.wants_probe()
    w.probe_started()
    assert run(w, [(9.9, 0, 0), (10, 0, 0)]) == [False, True] and w.since == 0  # the probe blocks too
    healthy = StuckWatch(after=10)
    run(healthy, [(0, 0, 0), (1, 0, 2), (4, 0, 0)])
    healthy.probe_started()
    healthy.probe_done(4.1, ok=True)  # the storage answers: they left for another reason
    assert run(healthy, [(11, 0, 0), (20, 0, 0)]) == [False, False] and not healthy.wants_probe()


def test_zero_turns_detection_off():
    w = StuckWatch(after=0)
    assert not any(run(w, [(t, 0, 5) for t in range(100)]))
    assert not w.wants_probe()


def test_step_says_when_stuck_changed():
    w = StuckWatch(after=1)
    assert [w.step(0, 0, 1), w.step(1, 0, 1), w.step(2, 0, 1), w.step(3, 5, 1), w.step(4, 6, 1)] == \
        [False, True, False, True, False]


def test_waiting_counts_interested_unchoked_peers_owed_requests_or_reads():
    peers = [PeerWait(interested=True, choked=False, queued=3, pending_disk=0),
             PeerWait(interested=True, choked=False, queued=0, pending_disk=16384),
             PeerWait(interested=True, choked=True, queued=3, pending_disk=0),  # choked: owed nothing
             PeerWait(interested=False, choked=False, queued=0, pending_disk=0),  # has what it wants
             PeerWait(interested=True, choked=False, queued=0, pending_disk=0)]  # asked for nothing yet
    assert waiting(peers) == 2
