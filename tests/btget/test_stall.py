"""Which peers bt-get gives up on (btget/worker/stall.py, pure): holding our requests, unchoked, silent for `after` s."""

from btget.worker.stall import PeerSample, StallWatch


def sample(downloaded: int, queued: int = 10, choked: bool = False, ip: str = "127.0.0.3") -> PeerSample:
    return PeerSample(ip, 6881, downloaded, queued, choked)


def test_a_silent_peer_holding_requests_is_shut_out_after_the_delay_once():
    w = StallWatch(after=3)
    assert w.step(0, [sample(100)]) == []
    assert w.step(1, [sample(200)]) == []  # moving
    assert w.step(3.9, [sample(200)]) == []  # silent for 2.9 s
    assert w.step(4.0, [sample(200), sample(200)]) == ["127.0.0.3"]  # two connections, one address
    assert w.step(5, [sample(200)], out={"127.0.0.3"}) == []  # shut out already (btget/worker/steering.py keeps it)


def test_a_peer_that_holds_nothing_of_ours_or_chokes_us_is_not_stalled():
    w = StallWatch(after=3)
    for t in range(10):
        assert w.step(t, [sample(5, queued=0), sample(7, choked=True, ip="127.0.0.4")]) == []


def test_our_own_address_is_never_shut_out_and_a_new_connection_starts_afresh():
    w = StallWatch(after=3, never=frozenset({"127.0.0.101"}))
    assert all(w.step(t, [sample(0, ip="127.0.0.101")]) == [] for t in range(10))
    w.step(0, [sample(50)])
    assert w.step(2.5, []) == []  # disconnected: forgotten
    assert w.step(5, [sample(50)]) == []  # reconnected: its clock starts again
    assert w.step(8, [sample(50)]) == ["127.0.0.3"]


def test_a_peer_we_are_sending_to_is_not_stalled_while_our_pieces_move():
    """Our requests to it wait behind our pieces in our send buffers: it cannot answer what it has not got."""
    w = StallWatch(after=3)
    for t in range(10):
        assert w.step(t, [PeerSample("127.0.0.3", 6881, 500, 10, False, uploaded=1_000_000 * t)]) == []
    # Then nothing moves either way after t = 9 (a hung T3's socket fills): shut out `after` s later.
    hung = [PeerSample("127.0.0.3", 6881, 500, 10, False, uploaded=9_000_000)]
    assert w.step(10, hung) == [] and w.step(11.9, hung) == []
    assert w.step(12, hung) == ["127.0.0.3"]


def test_another_t3_is_given_longer_than_a_site_and_news_of_its_pieces_is_a_sign_of_life():
    """A T3's uplink serves the whole swarm: its connections go silent for seconds while it is healthy."""
    w = StallWatch(after=3, peer_after=15)
    site = PeerSample("127.0.0.3", 6881, 500, 10, False, site=True)
    t3 = PeerSample("127.0.0.101", 40000, 500, 10, False, pieces=7, site=False)
    assert w.step(0, [site, t3]) == []
    assert w.step(3, [site, t3]) == ["127.0.0.3"]
    assert w.step(14.9, [t3]) == []
    # Silent but announcing a new piece: alive, its clock starts again.
    announcing = PeerSample("127.0.0.101", 40000, 500, 10, False, pieces=8, site=False)
    assert w.step(15, [announcing]) == []
    assert w.step(29.9, [announcing]) == []
    assert w.step(30, [announcing]) == ["127.0.0.101"]
