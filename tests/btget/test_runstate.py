"""bt-get's decisions during a run, driven event by event with a made-up clock (milliseconds)."""

from __future__ import annotations

from btget.errors import Incomplete, TrackersRefuse, TransferError
from btget.events import Listening, Phase, Progress, Tick, TrackerReply, Verified, WorkerFailed, WorkerGone
from btget.transfer.runstate import End, Ending, Introduce, Note, Policy, RunState, Show, StartVerify, step


def policy(**kw) -> Policy:
    return Policy(**{"name": "ds", "workers": 2, "size": 100, **kw})


def run(state: RunState, *timed) -> list:
    out = []
    for now, event in timed:
        out += step(state, event, now)
    return out


def progress(worker: int, done: int, **kw) -> Progress:
    return Progress(worker, done=done, wanted=50, **kw)


def test_workers_are_introduced_once_every_one_listens():
    state = RunState.start(policy(workers=3), 0.0)
    assert [a for a in step(state, Listening(1, "127.0.0.1", 5001), 0.1) if isinstance(a, Introduce)] == []
    step(state, Listening(2, "127.0.0.1", 5002), 0.1)
    actions = step(state, Listening(3, "127.0.0.1", 5003), 0.2)
    assert [a for a in actions if isinstance(a, Introduce)] == [
        Introduce(1, (("127.0.0.1", 5002), ("127.0.0.1", 5003))),
        Introduce(2, (("127.0.0.1", 5001), ("127.0.0.1", 5003))),
        Introduce(3, (("127.0.0.1", 5001), ("127.0.0.1", 5002)))]
    assert [a for a in step(state, Listening(3, "127.0.0.1", 5003), 0.3) if isinstance(a, Introduce)] == []


def test_a_lone_worker_is_introduced_to_nobody():
    state = RunState.start(policy(workers=1), 0.0)
    assert Show(Listening(1, "127.0.0.1", 5001)) in step(state, Listening(1, "127.0.0.1", 5001), 0.0)
    assert not [a for a in step(state, Tick(), 0.1) if isinstance(a, Introduce)]


def test_the_timeout_counts_from_the_start_and_says_who_was_there():
    state = RunState.start(policy(timeout=10.0), 0.0)
    run(state, (1.0, progress(1, 10, peers=2, seeds=1)), (9.0, progress(1, 40, peers=2, seeds=1)))
    assert step(state, Tick(), 9.9) == []
    (end,) = step(state, Tick(), 10.1)
    assert end.ending is Ending.FAILED and isinstance(end.error, Incomplete)
    assert str(end.error) == "ds: not complete after --timeout 10 s (2 peers, 1 seeds); run again to resume"
    assert step(state, Tick(), 11.0) == []  # ended: nothing more


def test_a_stall_without_any_peer_waits_out_the_stall_timeout():
    state = RunState.start(policy(stall_timeout=300.0, blocked_after=30.0), 0.0)
    step(state, TrackerReply(1, False, "http://t/announce", "connection refused"), 1.0)
    assert step(state, Tick(), 299.0) == []  # no peer ever: not "blocked", just waiting
    (end,) = step(state, Tick(), 301.0)
    assert str(end.error) == ("ds: no progress for 300 s (0 peers, 0 seeds; tracker: connection refused); "
                              "run again to resume")


def test_seeds_connected_and_nothing_arriving_names_the_stuck_files_after_blocked_after():
    state = RunState.start(policy(blocked_after=30.0), 0.0)
    run(state, (1.0, progress(1, 20, seeds=2)), (2.0, progress(2, 20, seeds=2)))
    assert step(state, Tick(), 31.9) == []
    (end,) = [a for a in step(state, progress(1, 20, seeds=2), 32.1) if isinstance(a, End)]
    assert (end.ending, end.why) == (Ending.BLOCKED, "no byte for 30 s from the 2 seeds connected")


def test_seeds_that_left_and_never_came_back_are_blocked_too():
    state = RunState.start(policy(blocked_after=10.0), 0.0)
    run(state, (1.0, progress(1, 5, connected=True)), (2.0, progress(2, 5)))
    (end,) = step(state, Tick(), 12.5)
    assert (end.ending, end.why) == (Ending.BLOCKED, "every seed left and none came back in 10 s")


def test_progress_resets_the_stall_clock():
    state = RunState.start(policy(blocked_after=10.0, stall_timeout=20.0), 0.0)
    for t in range(0, 60, 5):
        assert not [a for a in step(state, progress(1, t, seeds=1), float(t)) if isinstance(a, End)]


def test_completion_verifies_then_ends_when_seeding_is_done():
    state = RunState.start(policy(verify=True, seed_time=60.0), 0.0)
    step(state, Progress(1, Phase.FINISHED, done=50, wanted=50, flushed=True), 5.0)
    actions = step(state, Progress(2, Phase.FINISHED, done=50, wanted=50, flushed=True), 6.0)
    assert Note("verifying checksums") in actions and StartVerify() in actions
    assert state.completed_at == 6.0
    assert not [a for a in step(state, Tick(), 100.0) if isinstance(a, End)]  # not verified yet
    # verified, and the seed time is long past: it ends then
    (end,) = [a for a in step(state, Verified(), 100.1) if isinstance(a, End)]
    assert state.verified and end.ending is Ending.SEEDED and end.error is None


def test_workers_that_say_complete_with_bytes_missing_end_the_run_incomplete():
    # libtorrent says "finished" when every piece of priority above 0 is held: a piece wrongly left at 0
    # must not make a short file a complete run.
    state = RunState.start(policy(workers=1), 0.0)
    actions = step(state, Progress(1, Phase.FINISHED, done=100, wanted=100, flushed=True,
                                   files={0: 60, 1: 33}), 2.0)
    ends = [a for a in actions if isinstance(a, End)]
    assert state.completed_at is None and len(ends) == 1 and ends[0].ending is Ending.FAILED
    assert isinstance(ends[0].error, Incomplete) and "93 of 100 bytes held" in str(ends[0].error)


def test_workers_that_say_complete_with_every_byte_complete_the_run():
    state = RunState.start(policy(workers=1), 0.0)
    step(state, Progress(1, Phase.FINISHED, done=100, wanted=100, flushed=True, files={0: 60, 1: 40}), 2.0)
    assert state.completed_at == 2.0 and state.ended == End(Ending.SEEDED)


def test_seeding_ends_at_the_time_or_the_ratio_whichever_first():
    state = RunState.start(policy(workers=1, seed_time=60.0, seed_ratio=2.0), 0.0)
    step(state, Progress(1, Phase.FINISHED, done=100, wanted=100, flushed=True), 1.0)
    assert not [a for a in step(state, Progress(1, done=100, wanted=100, flushed=True, uploaded=150), 30.0)
                if isinstance(a, End)]
    (end,) = [a for a in step(state, Progress(1, done=100, wanted=100, flushed=True, uploaded=200), 31.0)
              if isinstance(a, End)]
    assert end.ending is Ending.SEEDED


def test_no_seeding_asked_ends_at_completion():
    state = RunState.start(policy(workers=1), 0.0)
    actions = step(state, Progress(1, Phase.FINISHED, done=100, wanted=100, flushed=True), 3.0)
    assert End(Ending.SEEDED) in actions


def test_a_complete_run_serves_the_t3s_still_downloading_while_they_take_pieces_within_linger():
    def done(state, now, **kw):
        return [a for a in step(state, Progress(1, Phase.FINISHED if now == 3.0 else Phase.RUNNING, done=100,
                                                wanted=100, flushed=True, **kw), now) if isinstance(a, End)]

    # A lone T3, only seeds around it: it leaves at completion.
    assert done(RunState.start(policy(workers=1, linger=30.0), 0.0), 3.0, leechers=0) == [End(Ending.SEEDED)]
    # Another T3 still downloading from it: it stays while that one takes pieces...
    state = RunState.start(policy(workers=1, linger=30.0), 0.0)
    assert done(state, 3.0, leechers=1, uploaded=10) == []
    assert done(state, 4.9, leechers=1, uploaded=10) == []  # within QUIET of the last byte
    assert done(state, 6.0, leechers=1, uploaded=40) == []
    # ...and leaves once nothing went up for QUIET s,
    assert done(state, 8.1, leechers=1, uploaded=40) == [End(Ending.SEEDED)]
    # or once the peers still downloading are gone,
    state = RunState.start(policy(workers=1, linger=30.0), 0.0)
    assert done(state, 3.0, leechers=2, uploaded=10) == []
    assert done(state, 3.5, leechers=0, uploaded=20) == [End(Ending.SEEDED)]
    # or after linger s whatever they take; and with linger 0 at completion.
    state = RunState.start(policy(workers=1, linger=5.0), 0.0)
    assert done(state, 3.0, leechers=1, uploaded=10) == []
    assert done(state, 7.9, leechers=1, uploaded=90) == []
    assert done(state, 8.0, leechers=1, uploaded=99) == [End(Ending.SEEDED)]
    assert done(RunState.start(policy(workers=1, linger=0.0), 0.0), 3.0, leechers=3) == [End(Ending.SEEDED)]
    # --seed-time decides alone when given.
    state = RunState.start(policy(workers=1, linger=30.0, seed_time=1.0), 0.0)
    assert done(state, 3.0, leechers=1, uploaded=10) == []
    assert done(state, 4.0, leechers=1, uploaded=20) == [End(Ending.SEEDED)]


def test_a_worker_that_fails_or_dies_ends_the_run():
    state = RunState.start(policy(), 0.0)
    (end,) = step(state, WorkerFailed(2, "disk_full", "/data/x", "disk full (free some space)"), 1.0)
    assert isinstance(end.error, TransferError) and str(end.error) == "/data/x: disk full (free some space)"
    state = RunState.start(policy(), 0.0)
    (end,) = step(state, WorkerGone(1, -9), 1.0)
    assert str(end.error) == "worker 1: exited unexpectedly (exit code -9)" and state.workers[1].stopped


def test_the_tracker_is_said_when_it_starts_and_stops_failing():
    state = RunState.start(policy(), 0.0)
    assert step(state, TrackerReply(1, False, "http://t/announce", "refused"), 1.0) == [
        Note("tracker http://t/announce: refused", warning=True)]
    assert step(state, TrackerReply(1, False, "http://t/announce", "refused"), 2.0) == []  # said once
    assert step(state, TrackerReply(1, True, "http://t/announce", "3 peers"), 3.0) == [
        Note("tracker http://t/announce: reachable again (3 peers)")]


def test_the_files_of_the_last_words_are_kept():
    state = RunState.start(policy(), 0.0)
    step(state, Progress(1, Phase.STOPPED, files={0: 10, 2: 5}), 1.0)
    step(state, Progress(2, Phase.STOPPED, files={1: 7}), 1.0)
    assert state.files == {0: 10, 1: 7, 2: 5} and all(w.stopped for w in state.workers.values())


def test_every_tracker_saying_no_for_good_ends_the_run_with_their_words():
    state = RunState.start(policy(trackers=("http://a/announce", "http://b/announce")), 0.0)
    no = "unknown info_hash: not published in this federation"
    assert step(state, TrackerReply(1, False, "http://a/announce", no, definitive=True), 0.5) == [
        Note(f"tracker http://a/announce: {no}", warning=True)]
    for worker, url in ((2, "http://a/announce"), (1, "http://b/announce")):
        assert not [a for a in step(state, TrackerReply(worker, False, url, no, definitive=True), 1.0)
                    if isinstance(a, End)]
    # a failure that may pass (a timeout) does not count
    step(state, TrackerReply(2, False, "http://b/announce", "timed out"), 1.1)
    assert state.ended is None
    (end,) = [a for a in step(state, TrackerReply(2, False, "http://b/announce", "connection refused",
                                                    definitive=True), 1.2) if isinstance(a, End)]
    assert isinstance(end.error, TrackersRefuse)
    assert str(end.error) == (f"ds: tracker http://a/announce: {no}; tracker http://b/announce: connection refused; "
                              f"tracker http://b/announce: {no}")


def test_a_tracker_saying_no_does_not_end_a_run_that_has_peers():
    state = RunState.start(policy(workers=1, trackers=("http://a/announce",)), 0.0)
    step(state, progress(1, 10, peers=1, connected=True), 0.5)
    step(state, TrackerReply(1, False, "http://a/announce", "no", definitive=True), 1.0)
    assert state.ended is None


def test_a_tracker_saying_no_ends_a_run_whose_connections_sent_nothing():
    # The sites' web seeds answer 404 for a torrent the federation never published; sibling workers have
    # nothing to trade: connected, but no byte from anyone (issue 26: exit 7 after 30 s, or no end at all).
    state = RunState.start(policy(trackers=("http://a/announce",)), 0.0)
    step(state, progress(1, 0, peers=2, connected=True), 0.5)
    step(state, progress(2, 0, peers=1, connected=True), 0.5)
    assert state.seeded is True
    step(state, TrackerReply(1, False, "http://a/announce", "no", definitive=True), 3.5)
    (end,) = [a for a in step(state, TrackerReply(2, False, "http://a/announce", "no", definitive=True), 3.6)
              if isinstance(a, End)]
    assert (end.ending, str(end.error)) == (Ending.FAILED, "ds: tracker http://a/announce: no")


def test_a_tracker_saying_no_does_not_end_a_run_that_received_bytes_not_yet_verified():
    state = RunState.start(policy(workers=1, trackers=("http://a/announce",)), 0.0)
    step(state, progress(1, 0, peers=1, connected=True, downloaded=16384), 0.5)
    step(state, TrackerReply(1, False, "http://a/announce", "no", definitive=True), 3.5)
    assert state.ended is None


def test_a_closed_t3_stays_after_completion_until_the_t3s_it_just_learned_of_can_take_from_it():
    def done(state, now, **kw):
        return [a for a in step(state, Progress(1, Phase.FINISHED if now == 3.0 else Phase.RUNNING, done=100,
                                                wanted=100, flushed=True, **kw), now) if isinstance(a, End)]

    # Nobody connected at completion: an open T3 leaves, a closed one stays closed_stay s...
    assert done(RunState.start(policy(workers=1, linger=30.0), 0.0), 3.0, leechers=0) == [End(Ending.SEEDED)]
    state = RunState.start(policy(workers=1, linger=30.0, closed_stay=5.0), 0.0)
    assert done(state, 3.0, leechers=0) == []
    assert done(state, 7.9, leechers=0) == []
    assert done(state, 8.0, leechers=0) == [End(Ending.SEEDED)]
    # ...then serves as any T3 those that connected meanwhile and take pieces,
    state = RunState.start(policy(workers=1, linger=30.0, closed_stay=5.0), 0.0)
    assert done(state, 3.0, leechers=0) == []
    assert done(state, 7.5, leechers=2, uploaded=50) == []
    assert done(state, 9.0, leechers=2, uploaded=80) == []
    assert done(state, 11.1, leechers=2, uploaded=80) == [End(Ending.SEEDED)]
    # within linger (0: it leaves at completion like any T3).
    state = RunState.start(policy(workers=1, linger=0.0, closed_stay=5.0), 0.0)
    assert done(state, 3.0, leechers=0) == [End(Ending.SEEDED)]
