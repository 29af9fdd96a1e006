"""btget/worker/steering.py: how a T3 steers its sources, one rule a test, on samples of its connections."""

from __future__ import annotations

from btget.worker import siteshare, stall
from btget.worker.steering import (BLOCK, NOTHING_AROUND_FOR, PARKED_AFTER, PARKED_FOR, STALL_EVERY, Announce, Filter, Kind, Peer, Prioritize, Reason, Said, Seen, Steering,
                                   ban, cover_due, exclude, step)

SITES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]  # slices 0, 1, 2
PIECES, PIECE = 30, 1_000_000  # a slice is 10 pieces, 10 MB
SLICE0 = siteshare.span(0, 10)
EVERY = siteshare.span(0, PIECES)


def site(ip: str, received: int = 0, unchokes: bool = True, queued: int = 0, endgame: bool = False) -> Peer:
    return Peer(ip, 6881, Kind.SITE, received=received, unchokes_us=unchokes, seed=True, queued=queued,
                endgame=endgame)


def t3(n: int, bitfield: int | None = None, seed: bool = False, queued: int = 0, pieces: int = 0,
       lacked: bool = True, received: int = 0) -> Peer:
    return Peer(f"127.0.0.{100 + n}", 40000 + n, Kind.T3, bitfield=bitfield, seed=seed, queued=queued,
                pieces=pieces, lacked=lacked, received=received)


def steering(whole: bool = True, preferred: frozenset[str] = frozenset()) -> Steering:
    return Steering(list(SITES), PIECES, PIECE, whole=whole, preferred=preferred)


def look(state: Steering, now: float, *peers: Peer, have: int | None = None, fetching: bool = True,
         from_sites: int = 0) -> list:
    return step(state, Seen(now, fetching, peers, have, 0.0, from_sites))


def shut_out(actions: list) -> set[str] | None:
    """What the last Filter shuts out (None: the filter is not changed)."""
    filters = [a for a in actions if isinstance(a, Filter)]
    return set(filters[-1].ips) if filters else None


def others(n: int, **kw) -> list[Peer]:
    return [t3(k, **kw) for k in range(1, n + 1)]


def judged(state: Steering, t3s: list[Peer], *received: int) -> list:
    """Two looks 0.2 s apart at three sites unchoking us, sending `received` bytes at a steerable pace."""
    look(state, 0.0, *(site(ip) for ip in SITES), *t3s)
    return look(state, 0.2, *(site(ip, r) for ip, r in zip(SITES, received)), *t3s)


def test_a_lone_t3_keeps_every_site():
    state = steering()
    assert shut_out(judged(state, [], 3_000_000, 1_000_000, 2_000_000)) is None
    assert state.let_go() == set()


def test_in_a_busy_swarm_a_t3_keeps_its_share_the_site_that_sent_most_and_asks_its_slice_first():
    state = steering()
    actions = judged(state, others(7), 3_000_000, 1_000_000, 2_000_000)
    assert shut_out(actions) == {"127.0.0.3", "127.0.0.4"}
    assert state.shut_out.ips(Reason.SHED) == {"127.0.0.3", "127.0.0.4"}
    [order] = [a.priorities for a in actions if isinstance(a, Prioritize)]
    assert order == (siteshare.TOP,) * 10 + (siteshare.NORMAL,) * 20


def test_its_share_is_of_the_datasets_sites_not_of_those_still_connected():
    """Two of eight T3s still downloading: each keeps ceil(3/2) sites. The site let go is no longer connected,
    and the next looks must not take the share from the two left (ceil(2/2) would shed one more)."""
    state = steering()
    t3s = others(1) + others(7, seed=True)[1:]
    assert shut_out(judged(state, t3s, 3_000_000, 1_000_000, 2_000_000)) == {"127.0.0.3"}
    kept = [site("127.0.0.2", 4_000_000), site("127.0.0.4", 3_000_000)]
    for k in range(1, 4):
        now = 0.2 + k * STALL_EVERY
        assert shut_out(look(state, now, *kept, *t3s)) is None
    assert state.let_go() == {"127.0.0.3"}


def test_a_shard_keeps_every_site():
    state = steering(whole=False)
    assert shut_out(judged(state, others(7), 3_000_000, 1_000_000, 2_000_000)) is None


def test_a_site_that_sent_us_its_turn_is_let_go():
    state = steering()
    turn = int(siteshare.TURN * 10 * PIECE)
    choking = [site("127.0.0.3", unchokes=False), site("127.0.0.4", unchokes=False)]
    look(state, 0.0, site("127.0.0.2"), *choking, *others(7))
    assert shut_out(look(state, 1.0, site("127.0.0.2", turn - 1), *choking, *others(7))) is None
    assert shut_out(look(state, 1.05, site("127.0.0.2", turn), *choking, *others(7))) == {"127.0.0.2"}


def test_a_site_shed_comes_back_after_its_time_and_is_asked_for():
    state = steering()
    judged(state, others(7), 3_000_000, 1_000_000, 2_000_000)
    assert look(state, 0.2 + siteshare.SHED_FOR - 0.01, site("127.0.0.2", 3_000_000), *others(7)) == []
    actions = look(state, 0.2 + siteshare.SHED_FOR, site("127.0.0.2", 3_000_000), *others(7))
    assert shut_out(actions) == set() and Announce() in actions


def test_a_site_whose_slice_the_t3s_around_us_hold_is_spared_while_they_do():
    state = steering()
    peers = [site(ip, unchokes=False) for ip in SITES]  # (one unchoking us is kept until its pace is judged)
    look(state, 0.0, *peers, *others(7))
    assert cover_due(state, 0.05, tuple(others(7)))
    actions = look(state, 0.05, *peers, *others(6), t3(7, bitfield=SLICE0), have=0)
    assert shut_out(actions) == {"127.0.0.2"} and state.shut_out.ips(Reason.SPARED) == {"127.0.0.2"}
    # The T3 that held slice 0 left: a new reading is due at once, and the site comes back.
    assert cover_due(state, 0.06, tuple(others(6)))
    actions = look(state, 0.06, *peers, *others(6), have=0)
    assert shut_out(actions) == set() and Announce() in actions


def test_a_t3_lagging_the_t3s_around_it_keeps_a_site_whose_slice_they_hold():
    """Their uplinks serve each other as much as us: the site would otherwise stand idle while we wait."""
    state = steering()
    peers = [site(ip, unchokes=False) for ip in SITES]
    ahead = [t3(k, bitfield=SLICE0, pieces=20) for k in range(1, 8)]  # 20 of 30 pieces each; we hold none
    look(state, 0.0, *peers, *ahead)
    actions = look(state, 0.05, *peers, *ahead, have=0)
    assert state.lag_site == "127.0.0.2" and shut_out(actions) is None and state.let_go() == set()
    # Caught up (within LAG of them: 17 of 30 against their 20): the site is spared like any other.
    level = siteshare.span(0, 17)
    state.next_cover = 0.0
    actions = look(state, 0.1, *peers, *ahead, have=level)
    assert state.lag_site is None and shut_out(actions) == {"127.0.0.2"}


def test_the_site_a_lagging_t3_keeps_is_not_let_go_for_its_turn_and_comes_back_if_it_was():
    state = steering()
    ahead = [t3(k, bitfield=EVERY, pieces=25) for k in range(1, 4)]  # four T3s: a lag budget of half a copy
    judged(state, ahead, 3_000_000, 1_000_000, 2_000_000)  # keeps its share, the site that sent most
    assert state.shut_out.ips(Reason.SHED) == {"127.0.0.3", "127.0.0.4"}
    turn = int(siteshare.TURN * state.paces.slice_bytes)
    actions = look(state, 0.3, site("127.0.0.2", turn), *ahead, have=0)
    assert state.lag_site == "127.0.0.2" and "127.0.0.2" not in state.let_go() and shut_out(actions) is None
    # A lagging T3 whose kept site had been shed takes it back at once.
    state.lag_site, state.next_cover = "127.0.0.3", 0.0
    actions = look(state, 0.35, site("127.0.0.2", turn), *ahead, have=0)
    assert "127.0.0.3" not in state.let_go() and Announce() in actions


def test_a_lagging_t3_that_took_its_budget_from_the_sites_keeps_none():
    """Twice its even share of one copy (siteshare.lag_budget): 0.25 of the dataset among eight T3s."""
    state = steering()
    ahead = [t3(k, bitfield=SLICE0, pieces=20) for k in range(1, 8)]
    peers = [site(ip, unchokes=False) for ip in SITES]
    look(state, 0.0, *peers, *ahead)
    look(state, 0.05, *peers, *ahead, have=0, from_sites=7_000_000)
    assert state.lag_site == "127.0.0.2"  # 7 of 30 MB: within its budget
    state.next_cover = 0.0
    actions = look(state, 0.1, *peers, *ahead, have=0, from_sites=8_000_000)
    assert state.lag_site is None and shut_out(actions) == {"127.0.0.2"}


def test_every_site_let_go_comes_back_at_once_when_the_t3s_that_fed_us_leave():
    state = steering()
    judged(state, others(7), 3_000_000, 1_000_000, 2_000_000)
    actions = look(state, 0.3, site("127.0.0.2", 3_000_000))
    assert shut_out(actions) == set() and Announce() in actions
    assert state.let_go() == set()


def test_every_site_let_go_comes_back_when_the_t3s_that_fed_us_stall():
    """They hold our requests and send nothing (stall.PEER_STALL_AFTER): shut out, they stand in for no site."""
    state = steering()
    stuck = [t3(k, queued=5, pieces=10) for k in range(1, 8)]
    judged(state, stuck, 3_000_000, 1_000_000, 2_000_000)
    assert state.shut_out.ips(Reason.SHED) == {"127.0.0.3", "127.0.0.4"}
    late = 0.2 + stall.PEER_STALL_AFTER
    actions = look(state, late, site("127.0.0.2", 3_000_000), *stuck)
    assert shut_out(actions) == {t.ip for t in stuck}
    assert state.let_go() == set() and Announce() in actions
    assert len([a for a in actions if isinstance(a, Said)]) == 7


def test_every_site_let_go_comes_back_when_the_t3s_still_here_hold_nothing_we_lack():
    """Each T3 let the sites go for the others, and what they all lack waits for no timer."""
    state = steering()
    judged(state, others(7), 3_000_000, 1_000_000, 2_000_000)
    assert state.shut_out.ips(Reason.SHED) == {"127.0.0.3", "127.0.0.4"}
    empty = others(7, lacked=False)
    assert shut_out(look(state, 0.3, site("127.0.0.2", 3_000_000), *empty)) is None
    # A T3 that has a piece we lack again (a moment's lull) restarts the wait.
    look(state, 0.3 + NOTHING_AROUND_FOR / 2, site("127.0.0.2", 3_000_000), *empty[:6], t3(7))
    start = 0.3 + NOTHING_AROUND_FOR * 3 / 4
    assert shut_out(look(state, start, site("127.0.0.2", 3_000_000), *empty)) is None
    actions = look(state, start + NOTHING_AROUND_FOR, site("127.0.0.2", 3_000_000), *empty)
    assert shut_out(actions) == set() and Announce() in actions
    assert state.let_go() == set()


def test_spared_sites_come_back_when_the_swarm_is_no_longer_busy():
    state = steering()
    peers = [site(ip, unchokes=False) for ip in SITES]
    look(state, 0.0, *peers, *others(7))
    look(state, 0.05, *peers, *others(6), t3(7, bitfield=SLICE0), have=0)
    assert state.let_go() == {"127.0.0.2"}
    actions = look(state, 0.1, *peers, t3(1), t3(7, bitfield=SLICE0))  # three T3s in all on three sites: busy...
    assert state.let_go() == {"127.0.0.2"}
    actions = look(state, 0.15, *peers, t3(7, bitfield=SLICE0))  # ...two are not
    assert shut_out(actions) == set() and Announce() in actions


def test_a_site_holding_our_requests_that_sends_nothing_is_shut_out_for_a_while():
    state = steering()
    hung = site("127.0.0.3", 500, queued=8)
    look(state, 0.0, hung)
    assert shut_out(look(state, stall.STALL_AFTER - 0.1, hung)) is None
    actions = look(state, stall.STALL_AFTER + STALL_EVERY, hung)  # the first look at stalls after that
    assert shut_out(actions) == {"127.0.0.3"} and state.shut_out.ips(Reason.STALLED) == {"127.0.0.3"}
    look(state, 4.0, site("127.0.0.2"))  # the filter dropped its connection
    assert shut_out(look(state, stall.STALL_AFTER + STALL_EVERY + stall.BAN_FOR, site("127.0.0.2"))) == set()


RATE = 12_500_000  # bytes/s a T3 sends us: one 100 Mbit/s uplink
HALF_A_SECOND = int(RATE * PARKED_AFTER / BLOCK)  # the requests it clears in PARKED_AFTER


def paced(state: Steering, *sites: Peer, queued: int) -> list:
    """Two looks, STALL_EVERY apart, at `sites` and one T3 holding `queued` of our requests and sending at RATE."""
    look(state, 10.0, *sites, t3(1, seed=True, queued=queued, received=50_000_000))
    return look(state, 10.0 + STALL_EVERY, *sites,
                t3(1, seed=True, queued=queued, received=50_000_000 + int(RATE * STALL_EVERY)))


def test_in_end_game_a_t3_holding_more_than_it_sends_in_half_a_second_is_dropped_while_a_site_unchokes_us():
    state = steering()
    actions = paced(state, site("127.0.0.2", endgame=True), queued=HALF_A_SECOND + 100)
    assert shut_out(actions) == {"127.0.0.101"} and state.shut_out.ips(Reason.PARKED) == {"127.0.0.101"}
    assert any(isinstance(a, Said) and "127.0.0.101 holds" in a.text for a in actions)
    # It comes back after its time.
    assert shut_out(look(state, 10.0 + STALL_EVERY + PARKED_FOR, site("127.0.0.2", endgame=True))) == set()


def test_a_parked_t3_on_a_sites_address_is_kept_the_filter_would_drop_the_site_too():
    state = steering()
    look(state, 10.0, site("127.0.0.2", endgame=True), Peer("127.0.0.3", 40001, Kind.T3, queued=10 * HALF_A_SECOND))
    actions = look(state, 10.0 + STALL_EVERY, site("127.0.0.2", endgame=True),
                   Peer("127.0.0.3", 40001, Kind.T3, queued=10 * HALF_A_SECOND, received=1000))
    assert shut_out(actions) is None


def test_a_t3_that_clears_our_requests_in_half_a_second_is_kept():
    state = steering()
    assert shut_out(paced(state, site("127.0.0.2", endgame=True), queued=HALF_A_SECOND - 100)) is None


def test_a_t3_holding_many_requests_is_kept_before_end_game_or_when_no_site_unchokes_us():
    # Before end game the sites have blocks of their own to send.
    assert shut_out(paced(steering(), site("127.0.0.2"), queued=10 * HALF_A_SECOND)) is None
    # No site unchokes us: that T3 is where the pieces come from.
    assert shut_out(paced(steering(), site("127.0.0.2", unchokes=False, endgame=True),
                          queued=10 * HALF_A_SECOND)) is None


def test_a_peer_banned_for_corrupt_pieces_stays_out_for_the_run():
    state = steering()
    assert shut_out(ban(state, "127.0.0.9")) == {"127.0.0.9"}
    assert ban(state, "127.0.0.9") == []  # once
    assert shut_out(look(state, 10_000.0, site("127.0.0.2"))) is None and state.shut_out.ips() == {"127.0.0.9"}


def test_nothing_is_steered_while_seeding_but_times_run_out():
    state = steering()
    hung = site("127.0.0.3", 500, queued=8)
    look(state, 0.0, hung)
    actions = look(state, stall.STALL_AFTER + STALL_EVERY, hung)
    assert shut_out(look(state, 50.0, hung, fetching=False)) == set()  # its time out ended
    assert look(state, 60.0, hung, fetching=False) == [] and Announce() not in actions


def test_a_site_left_out_by_the_user_is_never_connected():
    state = steering()
    assert shut_out(exclude(state, {"127.0.0.3"})) == {"127.0.0.3"}
    assert shut_out(look(state, 1_000.0, site("127.0.0.2"))) is None and state.shut_out.ips() == {"127.0.0.3"}


def test_the_other_sites_wait_while_the_preferred_one_sends_and_come_back_when_it_does_not():
    state = steering(preferred=frozenset({"127.0.0.4"}))
    others = {"127.0.0.2", "127.0.0.3"}
    assert shut_out(look(state, 0.0, site("127.0.0.2"), site("127.0.0.4", unchokes=False))) is None
    assert shut_out(look(state, 0.05, site("127.0.0.2"), site("127.0.0.4"))) == others
    actions = look(state, 0.1, site("127.0.0.4", unchokes=False))  # it chokes us: the others are needed
    assert shut_out(actions) == set() and Announce() in actions
    assert shut_out(look(state, 0.15, site("127.0.0.4"))) == others
    # It holds our requests and sends nothing: shut out as stalled, and the others come back.
    hung = site("127.0.0.4", 100, queued=4)
    look(state, 0.5, hung)  # a look at stalls
    actions = look(state, 0.5 + stall.STALL_AFTER + STALL_EVERY, hung)
    assert shut_out(actions) == {"127.0.0.4"} and Announce() in actions
