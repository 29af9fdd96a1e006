"""When bt-get switches to the sites' web seeds and back, driven through step() with a made-up clock (ms)."""

from __future__ import annotations

from btget.events import Progress, Tick, TrackerReply, WebSeedBanned
from btget.transfer.runstate import End, Note, Policy, RunState, SetWebSeeds, step
from btget.transfer.webseeds import Mode, Rule, Source

SITE1 = Source("http://127.0.0.2:8701/data/", "site1")
SITE2 = Source("http://127.0.0.3:8701/data/", "site2")
BOTH = (SITE1, SITE2)


def start(workers: int = 1, **rule) -> RunState:
    web = Rule(**{"sources": BOTH, **rule})
    return RunState.start(Policy(name="ds", workers=workers, size=100, web=web), 0.0)


def switches(actions: list) -> list[SetWebSeeds]:
    return [a for a in actions if isinstance(a, SetWebSeeds)]


def notes(actions: list) -> list[str]:
    return [a.text for a in actions if isinstance(a, Note)]


def peers(worker: int, peer_bytes: int = 0, **kw) -> Progress:
    return Progress(worker, done=peer_bytes, wanted=100, peer_bytes=peer_bytes, **kw)


def test_no_web_seed_traffic_while_peers_send():
    state = start()
    for k in range(1, 600):  # 60 s of a peer sending a little every 0.1 s
        assert switches(step(state, peers(1, peer_bytes=k * 10, peers_remote=1), k / 10)) == []
    assert state.web.switches == []


def test_no_peer_connected_for_the_grace_time_switches_to_every_sites_web_seeds():
    state = start(after=5.0)
    assert switches(step(state, Tick(), 4.9)) == []
    actions = step(state, Tick(), 5.0)
    assert switches(actions) == [SetWebSeeds(BOTH, probe=True)]
    assert notes(actions) == ["no BitTorrent peer connected for 5 s; fetching from the web seeds of "
                              "site1 (127.0.0.2:8701), site2 (127.0.0.3:8701)"]
    assert switches(step(state, Tick(), 6.0)) == []  # once


def test_a_peer_connected_and_waiting_its_turn_spares_the_web_seeds_until_idle_after():
    state = start(after=5.0, idle_after=20.0)
    for t in range(1, 20):  # a site at its upload slots: connected, choking us, nothing arrives
        assert switches(step(state, peers(1, peers_remote=1, connect_attempts=1), float(t))) == []
    (use,) = switches(step(state, peers(1, peers_remote=1, connect_attempts=1), 20.0))
    assert state.web.switches[0][2].startswith("no byte from the 1 BitTorrent peers connected in 20 s")


def test_the_grace_time_counts_from_the_last_peer_that_left():
    state = start(after=5.0)
    step(state, peers(1, peer_bytes=100, peers_remote=1), 3.0)
    assert switches(step(state, peers(1, peer_bytes=100), 7.9)) == []  # it left at 3.0
    assert len(switches(step(state, Tick(), 8.0))) == 1


def test_peers_blocked_switch_after_a_short_wait_not_after_the_grace_time():
    state = start(after=5.0, blocked_after=1.5)
    assert switches(step(state, peers(1, connect_attempts=2, connect_failures=1), 0.2)) == []  # a stale peer?
    assert switches(step(state, peers(1, connect_attempts=2, connect_failures=1), 1.6)) == []
    (use,) = switches(step(state, peers(1, connect_attempts=2, connect_failures=1), 1.7))
    assert use.sources == BOTH
    assert ("no connection to a peer in 1.5 s (2 tried, 1 refused or timed out): peer ports blocked?"
            in state.web.switches[0][2])


def test_peers_blocked_counts_from_the_first_attempt_not_the_runs_start():
    # A loaded host: the worker's session made its first attempts 2 s into the run, to seeds still starting.
    state = start(after=5.0, blocked_after=1.5)
    assert switches(step(state, Tick(), 2.0)) == []
    assert switches(step(state, peers(1, connect_attempts=3, connect_failures=3), 2.1)) == []
    assert switches(step(state, peers(1, connect_attempts=3, connect_failures=3), 3.5)) == []
    step(state, peers(1, connect_attempts=3, peers_remote=1), 3.5)  # a seed up: connected in time
    assert switches(step(state, peers(1, peer_bytes=100, connect_attempts=3, peers_remote=1), 4.0)) == []
    # With none connected, 1.5 s after the first attempt.
    state = start(after=5.0, blocked_after=1.5)
    step(state, peers(1, connect_attempts=3, connect_failures=3), 2.1)
    assert switches(step(state, peers(1, connect_attempts=3, connect_failures=3), 3.5)) == []
    (use,) = switches(step(state, peers(1, connect_attempts=3, connect_failures=3), 3.6))
    assert "no connection to a peer in 1.5 s" in state.web.switches[0][2]


def test_a_firewall_that_drops_is_noticed_before_any_connection_times_out():
    state = start(after=5.0, blocked_after=1.5)
    step(state, peers(1, connect_attempts=3), 0.6)  # attempts started, no answer, no failure yet
    assert switches(step(state, Tick(), 2.0)) == []
    assert len(switches(step(state, Tick(), 2.1))) == 1


def test_peers_connecting_in_time_are_no_reason():
    state = start(after=5.0, blocked_after=1.5)
    step(state, peers(1, connect_attempts=2, peers_remote=1), 0.3)  # connected (payload comes a moment later)
    assert switches(step(state, peers(1, connect_attempts=2, peers_remote=1), 2.0)) == []
    assert switches(step(state, peers(1, peer_bytes=100, connect_attempts=2, peers_remote=1), 2.5)) == []


def test_a_refused_peer_beside_one_that_sends_is_no_reason():
    state = start(after=5.0)
    step(state, peers(1, peer_bytes=10, connect_attempts=4, connect_failures=3), 0.5)
    assert switches(step(state, peers(1, peer_bytes=20, connect_attempts=4, connect_failures=3), 1.5)) == []


def test_no_tracker_answering_and_no_peer_switches_at_once():
    state = start()
    assert switches(step(state, TrackerReply(1, False, "http://t/announce", "Connection refused"), 0.1)) == []
    (use,) = switches(step(state, Tick(), 0.2))
    assert use.sources == BOTH and state.web.switches[0][2].startswith("no tracker answers")
    state = start(peer_sources=False)
    assert len(switches(step(state, Tick(), 0.0))) == 1


def test_peers_reachable_again_send_the_rest_back_to_peers_and_probing_stops():
    state = start(after=5.0, back_bytes=1000)
    step(state, Tick(), 5.0)
    assert state.web.active
    # web seeds deliver; a peer answers again (the firewall opened) and sends a little: not yet
    assert switches(step(state, peers(1, peer_bytes=500, peers_remote=1), 8.0)) == []
    actions = step(state, peers(1, peer_bytes=1500, peers_remote=1), 8.5)
    assert switches(actions) == [SetWebSeeds((), probe=False)]
    assert notes(actions) == ["BitTorrent peers reachable again (1500 bytes from them): the rest comes from peers"]
    # and if the peers leave again, back to the web seeds after the grace time
    assert switches(step(state, peers(1, peer_bytes=1600, peers_remote=1), 9.0)) == []
    assert switches(step(state, peers(1, peer_bytes=1600), 9.5)) == []  # gone (last seen at 9.0)
    assert switches(step(state, Tick(), 13.9)) == []
    assert switches(step(state, Tick(), 14.0)) == [SetWebSeeds(BOTH, probe=True)]
    assert [on for _, on, _ in state.web.switches] == [True, False, True]


def test_bytes_from_every_worker_count_together():
    state = start(workers=2, after=5.0, back_bytes=1000)
    step(state, Tick(), 5.0)
    step(state, peers(1, peer_bytes=600), 6.0)
    assert switches(step(state, peers(2, peer_bytes=600), 6.1)) == [SetWebSeeds((), probe=False)]


def test_a_web_seed_banned_for_corrupt_pieces_is_dropped_and_never_used_again():
    state = start(after=5.0, back_bytes=1000)
    step(state, Tick(), 5.0)
    actions = step(state, WebSeedBanned(1, SITE2.url), 6.0)
    assert switches(actions) == [SetWebSeeds((SITE1,), probe=True)]  # the other workers drop it too
    assert notes(actions) == ["web seed site2 (127.0.0.3:8701) sent pieces that failed their SHA1 check: dropped"]
    assert [a.warning for a in actions if isinstance(a, Note)] == [True]
    assert step(state, WebSeedBanned(1, SITE2.url), 6.1) == []  # said once
    step(state, peers(1, peer_bytes=2000), 7.0)  # back to peers (which then leave) ...
    assert switches(step(state, Tick(), 12.0)) == [SetWebSeeds((SITE1,), probe=True)]  # ... and site1 alone


def test_always_starts_with_them_and_never_drops_them():
    state = start(mode=Mode.ALWAYS)
    assert state.web.active
    step(state, peers(1, peer_bytes=10**6, peers_remote=1), 1.0)
    assert switches(step(state, Tick(), 60.0)) == []


def test_off_or_no_web_seed_never_switches():
    for state in (start(mode=Mode.OFF), start(sources=())):
        step(state, TrackerReply(1, False, "http://t/announce", "refused"), 0.1)
        assert switches(step(state, Tick(), 600.0)) == []


def test_nothing_switches_once_complete():
    state = start(workers=1, after=5.0)
    step(state, Progress(1, done=100, wanted=100, flushed=True), 1.0)
    assert switches(step(state, Tick(), 30.0)) == []


def test_a_peer_wire_out_of_reach_switches_at_once_and_peers_still_take_over():
    why = "the tracker is reached through the proxy http://127.20.0.1:3128 and BitTorrent peers cannot be"
    state = start(unreachable=why, after=5.0, back_bytes=1000)
    actions = step(state, Tick(), 0.0)
    assert switches(actions) == [SetWebSeeds(BOTH, probe=True)]
    assert notes(actions) == [f"{why}; fetching from the web seeds of site1 (127.0.0.2:8701), site2 (127.0.0.3:8701)"]
    assert [a.warning for a in actions if isinstance(a, Note)] == [True]  # said in a batch job's log too
    actions = step(state, peers(1, peer_bytes=1500, peers_remote=1), 1.0)  # the node could connect out after all
    assert switches(actions) == [SetWebSeeds((), probe=False)]
    assert switches(step(state, peers(1, peer_bytes=1600, peers_remote=1), 2.0)) == []  # not back at once again
    assert not state.web.active
    assert switches(step(start(unreachable=why, mode=Mode.OFF), Tick(), 0.0)) == []  # --no-web-seeds: peers only


def test_trackers_saying_no_for_good_leave_the_web_seeds_their_time_for_a_first_byte():
    """A members-only dataset whose tracker refuses a plain announce: its web seeds (token-checked) serve it,
    and the trackers' second no must not end the run before they have had `after` seconds."""
    url, no = "http://t/announce", "restricted dataset ds: announce over https"
    for first_byte in (True, False):
        state = RunState.start(Policy(name="ds", workers=1, size=100, trackers=(url,), web=Rule(sources=BOTH)), 0.0)
        step(state, TrackerReply(1, False, url, no), 0.3)
        (use,) = switches(step(state, Tick(), 0.4))  # no tracker answers: the web seeds, at once
        assert use.sources == BOTH
        assert step(state, TrackerReply(1, False, url, no, definitive=True), 3.3) == []
        assert step(state, Tick(), 5.3) == [] and state.ended is None
        if first_byte:
            step(state, Progress(1, done=10, wanted=100, sources={"web seed site1": 10}), 5.35)
            assert step(state, Tick(), 5.5) == [] and state.ended is None  # bytes came: the run goes on
        else:  # none within `after` of the switch: the trackers' words end the run
            (end,) = [a for a in step(state, Tick(), 5.5) if isinstance(a, End)]
            assert no in str(end.error)
