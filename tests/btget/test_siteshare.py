"""btget/worker/siteshare.py: a T3 of a busy swarm keeps its share of the sites unchoking it, not all of them."""

from __future__ import annotations

import math

from btget.worker.siteshare import (LAG, LAG_BUDGET, NORMAL, TOP, Cover, Paces, SitePeer, behind, busy, clearing_time,
                                    feeding, helps, lag_budget, mask, pace, priorities, share, slice_of, span, to_shed,
                                    to_spare, turns_done)

SITES = [SitePeer("127.0.0.2", 30_000_000, True), SitePeer("127.0.0.3", 10_000_000, True),
         SitePeer("127.0.0.4", 20_000_000, True)]


def test_the_share_is_the_sites_over_the_t3s_downloading():
    assert [share(3, n) for n in (0, 1, 2, 3, 4, 8)] == [3, 3, 2, 1, 1, 1]


def test_a_lone_t3_keeps_every_site():
    assert to_shed(SITES, 3, 1, whole=True) == []


def test_the_first_of_eight_keeps_the_site_that_sent_most_and_lets_the_others_go():
    assert to_shed(SITES, 3, 8, whole=True) == ["127.0.0.4", "127.0.0.3"]


def test_two_t3s_on_three_sites_keep_two_each():
    assert to_shed(SITES, 3, 2, whole=True) == ["127.0.0.3"]


def test_sites_that_choke_us_are_not_counted_or_shed():
    choking = [SitePeer("127.0.0.2", 0, False), SitePeer("127.0.0.3", 5, True)]
    assert to_shed(choking, 2, 8, whole=True) == []


def test_the_shard_rule_a_t3_fetching_part_of_the_dataset_keeps_every_site():
    assert to_shed(SITES, 3, 8, whole=False) == []


# --- turns: a site sends each T3 of a busy swarm half its slice, then passes its slot on ---

SLICE = 35_000_000


def test_a_t3_lags_when_it_holds_lag_of_the_pieces_fewer_than_the_median_t3_around_it():
    far = int(LAG * 1000)
    assert behind(500 - far - 1, [500, 500, 900], 1000)
    assert not behind(500 - far, [500, 500, 900], 1000)
    assert not behind(100, [900, 50, 0], 1000)  # one far ahead is not the swarm: the median is 50
    assert not behind(0, [], 1000)  # nobody around to lag


def test_the_lag_budget_is_twice_a_t3s_even_share_of_one_copy():
    assert [lag_budget(n) for n in (1, 4, 8)] == [LAG_BUDGET, LAG_BUDGET / 4, LAG_BUDGET / 8]


def test_a_site_is_let_go_once_it_has_sent_us_half_its_slice_in_a_busy_swarm():
    peers = [SitePeer("127.0.0.2", SLICE // 2, True), SitePeer("127.0.0.3", SLICE // 2 - 1, True),
             SitePeer("127.0.0.4", SLICE, False)]
    assert turns_done(peers, 3, 8, 8, whole=True, slice_bytes=SLICE) == ["127.0.0.2"]


def test_no_turns_for_a_lone_t3_a_swarm_with_fewer_t3s_than_sites_or_a_shard():
    peers = [SitePeer("127.0.0.2", SLICE, True)]
    assert turns_done(peers, 3, 1, 1, whole=True, slice_bytes=SLICE) == []
    assert turns_done(peers, 3, 2, 2, whole=True, slice_bytes=SLICE) == []
    assert turns_done(peers, 3, 8, 1, whole=True, slice_bytes=SLICE) == []  # the others are done: the sites are ours
    assert turns_done(peers, 3, 8, 8, whole=False, slice_bytes=SLICE) == []


# --- the slices: each site sends its own part of the pieces first, and is let go once the swarm holds it ---

IPS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]  # slice 0, 1, 2
PIECE = 2**20
ALL = span(0, 9)  # 9 pieces: slices 0-2, 3-5, 6-8


def pieces(*indices: int) -> int:
    return sum(span(i, i + 1) for i in indices)


def test_the_k_th_of_k_sites_has_the_k_th_k_th_of_the_pieces():
    assert [slice_of(i, 10, 3) for i in range(10)] == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert [slice_of(i, 2, 3) for i in range(2)] == [0, 1]  # fewer pieces than sites: some slices are empty


def test_a_t3_asks_first_for_the_slices_of_the_sites_it_keeps():
    assert priorities(9, 3, {1}) == [NORMAL] * 3 + [TOP] * 3 + [NORMAL] * 3
    assert priorities(9, 3, {0, 2}) == [TOP] * 3 + [NORMAL] * 3 + [TOP] * 3


def libtorrent_rank(priority: int, peers: int) -> int:
    """Where libtorrent's picker puts a piece not being downloaded, lowest first (piece_picker.hpp,
    piece_pos::priority): priority 7 ignores availability, 4-6 halve it."""
    if priority == 7:
        return 1
    if priority >= 4:
        peers, priority = peers // 2, priority - 3
    return peers * 3 + 4 - priority


def test_a_kept_slice_comes_first_but_still_rarest_first():
    # Among pieces equally held around us, the slice first...
    assert all(libtorrent_rank(TOP, n) < libtorrent_rank(NORMAL, n) for n in range(6))
    # ...but a slice piece two T3s around hold after a piece none holds (at 7 it was taken again at every turn).
    assert libtorrent_rank(TOP, 2) > libtorrent_rank(NORMAL, 0)


def test_a_t3_kept_by_no_site_or_by_every_site_keeps_libtorrents_order():
    assert priorities(9, 3, set()) is None
    assert priorities(9, 3, {0, 1, 2}) is None


def test_a_bitfield_is_a_mask_with_a_byte_a_piece():
    assert mask([True, False, True, True]) == pieces(0, 2, 3) == 0x01_01_00_01
    assert mask([]) == 0
    assert mask([True] * 9) == ALL and ALL.bit_count() == 9


def test_a_busy_swarm_has_three_t3s_or_more_and_as_many_as_sites_two_of_them_downloading():
    assert [busy(3, n, n) for n in (1, 2, 3, 8)] == [False, False, True, True]
    # Two T3s on two sites: each can take a site whole, and a site let go is uplink lost.
    assert [busy(2, n, n) for n in (2, 3)] == [False, True]
    assert busy(3, 4, 2)  # the end of a swarm of four: two done, two fed by them
    assert busy(3, 4, 2)  # the end of a swarm of four: two done, two fed by them
    assert not busy(3, 3, 1)  # a lone latecomer beside two finished T3s takes the sites too
    assert not busy(0, 8, 8)


def test_every_site_is_let_go_once_the_t3s_around_us_hold_all_we_lack():
    cover = Cover(9, lacking=pieces(1, 2, 4, 5, 7, 8), held=ALL, piece_bytes=PIECE)
    assert to_spare(IPS, 8, 8, True, cover) == IPS


def test_a_site_is_let_go_once_its_slice_is_held_and_the_others_kept():
    # We lack pieces 3 and 7; piece 3 (slice 1) is held by a T3 around us, piece 7 (slice 2) by none.
    cover = Cover(9, lacking=pieces(3, 7), held=pieces(3), piece_bytes=PIECE)
    assert to_spare(IPS, 8, 8, True, cover) == ["127.0.0.2", "127.0.0.3"]


def test_the_site_feeding_us_is_the_one_that_sent_half_a_slice_and_unchokes_us():
    cover = Cover(9, lacking=pieces(6, 7, 8), held=0, piece_bytes=PIECE)  # a slice: 3 pieces
    assert feeding(IPS, [SitePeer("127.0.0.3", 3 * PIECE // 2, True)], cover) == 1
    assert feeding(IPS, [SitePeer("127.0.0.3", PIECE, True)], cover) is None  # unchoked us late
    assert feeding(IPS, [SitePeer("127.0.0.3", 3 * PIECE, False)], cover) is None  # chokes us now


def test_a_slow_sites_slice_is_helped_with_to_the_end():
    """Slice 0 is ours and in; slice 2 (a site at a tenth of the others' rate) is held nowhere and would take
    half a minute at its pace. The site feeding us is kept until not one piece is held nowhere."""
    lagging = Cover(90, lacking=span(60, 90), held=0, piece_bytes=PIECE)
    assert helps(3, 0, lagging, helping=False, clears_in=30.0)
    assert to_spare(IPS, 8, 8, True, lagging, helper="127.0.0.2") == ["127.0.0.3"]
    last = Cover(90, lacking=pieces(89), held=0, piece_bytes=PIECE)
    assert helps(3, 0, last, helping=True, clears_in=0.1)
    assert not helps(3, 0, Cover(90, lacking=pieces(89), held=pieces(89), piece_bytes=PIECE), helping=True,
                     clears_in=0.0)


def test_what_the_other_sites_have_on_the_way_as_our_slice_comes_in_is_left_to_them():
    """Equal sites a second apart: what is held nowhere clears in a second at its pace."""
    behind = Cover(90, lacking=span(78, 90), held=0, piece_bytes=PIECE)
    assert not helps(3, 0, behind, helping=False, clears_in=1.0)
    assert to_spare(IPS, 8, 8, True, behind) == ["127.0.0.2", "127.0.0.3"]
    # The last pieces of a slice, on their way from its site, take what they take: not a lagging site.
    last = Cover(90, lacking=pieces(88, 89), held=0, piece_bytes=PIECE)
    assert not helps(3, 0, last, helping=False, clears_in=math.inf)


def test_the_pace_of_the_pieces_held_nowhere():
    assert clearing_time((0.0, 40), (1.0, 30)) == 3.0  # 10 a second, 30 left
    assert clearing_time((0.0, 40), (1.0, 40)) == math.inf  # not shrinking: a site that sends nothing
    assert clearing_time((0.0, 40), (1.0, 0)) == 0.0


def test_no_help_is_decided_before_our_own_slice_is_in():
    ours_missing = Cover(90, lacking=span(0, 30) | span(60, 90), held=0, piece_bytes=PIECE)
    assert not helps(3, 0, ours_missing, helping=False, clears_in=30.0)
    assert not helps(3, None, ours_missing, helping=True, clears_in=30.0)


def test_no_site_is_spared_below_a_busy_swarm_for_a_shard_or_when_complete():
    cover = Cover(9, lacking=pieces(0), held=ALL, piece_bytes=PIECE)
    assert to_spare(IPS, 2, 2, True, cover) == []  # two T3s on three sites: the sites are still needed
    assert to_spare(IPS, 8, 8, False, cover) == []  # the shard rule
    assert to_spare(IPS, 8, 8, True, Cover(9, 0, ALL, PIECE)) == []  # nothing lacking: nothing to decide


# --- a site too fast for the looks to steer is kept while it unchokes us ---
MB = 1_000_000


def test_a_site_that_would_send_its_slice_within_two_seconds_at_over_25_mb_s_is_too_fast_to_steer():
    assert pace(100 * MB, 60 * MB, 1.0) is True  # 60 MB/s: a 100 MB slice in 1.7 s
    assert pace(100 * MB, 40 * MB, 1.0) is False  # 40 MB/s: in 2.5 s
    assert pace(100 * MB, 12 * MB, 0.02) is True  # a burst: fast before PACE_SPAN is out
    assert pace(22 * MB, 1_250_000, 0.1) is False  # 100 Mbit/s is steered, however small the slice
    assert pace(100 * MB, 0, 0.05) is None  # too soon to say it is slow
    assert pace(100 * MB, 0, 0.1) is False


def test_a_site_is_judged_from_the_last_look_before_it_began_to_send_and_once():
    paces = Paces(100 * MB)
    paces.see(0.0, [SitePeer("a", 5 * MB, False), SitePeer("b", 0, True), SitePeer("c", 0, True)])
    assert not paces.judged([SitePeer("b", 0, True)])
    # a still chokes us; b and c unchoke us and have sent nothing yet (no requests of ours)
    paces.see(0.3, [SitePeer("a", 5 * MB, False), SitePeer("b", 0, True), SitePeer("c", 0, True)])
    # then a and b send 30 MB each between two looks half a second apart (a slow loop on loopback), c 1 MB
    now = [SitePeer("a", 35 * MB, True), SitePeer("b", 30 * MB, True), SitePeer("c", 1 * MB, True)]
    paces.see(0.8, now)
    assert paces.judged(now) and paces.held(now) == {"a", "b"}  # 60 MB/s each: a 100 MB slice in 1.7 s
    # judged for good: a slow spell of a fast site does not make it steerable
    paces.see(5.0, [SitePeer("a", 36 * MB, True)])
    assert paces.held([SitePeer("a", 36 * MB, True)]) == {"a"}


def test_a_site_not_yet_judged_is_kept_while_it_unchokes_us_and_one_that_chokes_us_never_is():
    paces = Paces(100 * MB)
    peers = [SitePeer("a", 0, True), SitePeer("b", 0, False)]
    paces.see(0.0, peers)
    assert paces.held(peers) == {"a"}
    assert not paces.judged(peers) and paces.judged([SitePeer("b", 0, False)])


# --- which sites are shared out: those holding the dataset (btget/cli.holding) ---
def test_the_sites_shared_out_are_the_storage_sites_the_repository_says_hold_the_dataset():
    from btget.cli import holding

    named = {"127.0.0.3:7000": "site2", "127.0.0.2:7000": "site1", "127.0.0.4:7000": "site3",
             "127.0.0.100:7000": "t3-shares"}
    record = {"sites": ["site1", "site3", "t3-shares"], "t2_sites": ["site1", "site3"]}
    assert holding(named, record) == ("127.0.0.2:7000", "127.0.0.4:7000")
    # A .torrent file or URL has no record: every site the tracker names.
    assert holding(named, None) == tuple(sorted(named))
