"""btget/siteshare.py: a T3 of a busy swarm keeps its share of the sites unchoking it, not all of them."""

from __future__ import annotations

from btget.siteshare import (NORMAL, TOP, Cover, SitePeer, busy, feeding, helps, mask, priorities, share, slice_of,
                              span, to_shed, to_spare)

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


# --- the slices: each site sends its own part of the pieces first, and is let go once the swarm holds it ---

IPS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]  # slice 0, 1, 2
SLICE = 10 * 2**20  # bytes in one site's slice
ALL = span(0, 9)  # 9 pieces: slices 0-2, 3-5, 6-8


def pieces(*indices: int) -> int:
    return sum(span(i, i + 1) for i in indices)


def test_the_k_th_of_k_sites_has_the_k_th_k_th_of_the_pieces():
    assert [slice_of(i, 10, 3) for i in range(10)] == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert [slice_of(i, 2, 3) for i in range(2)] == [0, 1]  # fewer pieces than sites: some slices are empty


def test_a_t3_asks_first_for_the_slices_of_the_sites_it_keeps():
    assert priorities(9, 3, {1}) == [NORMAL] * 3 + [TOP] * 3 + [NORMAL] * 3
    assert priorities(9, 3, {0, 2}) == [TOP] * 3 + [NORMAL] * 3 + [TOP] * 3


def test_a_t3_kept_by_no_site_or_by_every_site_keeps_libtorrents_order():
    assert priorities(9, 3, set()) is None
    assert priorities(9, 3, {0, 1, 2}) is None


def test_a_bitfield_is_a_mask_with_a_byte_a_piece():
    assert mask([True, False, True, True]) == pieces(0, 2, 3) == 0x01_01_00_01
    assert mask([]) == 0
    assert mask([True] * 9) == ALL and ALL.bit_count() == 9


def test_a_busy_swarm_has_as_many_t3s_downloading_as_sites():
    assert [busy(3, n) for n in (1, 2, 3, 8)] == [False, False, True, True]
    assert not busy(0, 8)


def test_every_site_is_let_go_once_the_t3s_around_us_hold_all_we_lack():
    cover = Cover(9, lacking=pieces(1, 2, 4, 5, 7, 8), held=ALL, slice_bytes=SLICE)
    assert to_spare(IPS, 8, True, cover) == IPS


def test_a_site_is_let_go_once_its_slice_is_held_and_the_others_kept():
    # We lack pieces 3 and 7; piece 3 (slice 1) is held by a T3 around us, piece 7 (slice 2) by none.
    cover = Cover(9, lacking=pieces(3, 7), held=pieces(3), slice_bytes=SLICE)
    assert to_spare(IPS, 8, True, cover) == ["127.0.0.2", "127.0.0.3"]


def test_the_site_feeding_us_is_the_one_that_sent_half_a_slice_and_unchokes_us():
    cover = Cover(9, lacking=pieces(6, 7, 8), held=0, slice_bytes=SLICE)
    assert feeding(IPS, [SitePeer("127.0.0.3", SLICE // 2, True)], cover) == 1
    assert feeding(IPS, [SitePeer("127.0.0.3", SLICE // 4, True)], cover) is None  # unchoked us late
    assert feeding(IPS, [SitePeer("127.0.0.3", SLICE, False)], cover) is None  # chokes us now


def test_a_slow_sites_slice_is_helped_with_to_the_end():
    """Slice 0 is ours and in; slice 2 (a site at a tenth of the others' rate) is held nowhere: the site
    feeding us is kept, and stays kept until not one piece is held nowhere."""
    lagging = Cover(90, lacking=span(60, 90), held=0, slice_bytes=SLICE)
    assert helps(3, 0, lagging, helping=False)
    assert to_spare(IPS, 8, True, lagging, helper="127.0.0.2") == ["127.0.0.3"]
    last = Cover(90, lacking=pieces(89), held=0, slice_bytes=SLICE)
    assert helps(3, 0, last, helping=True)
    assert not helps(3, 0, Cover(90, lacking=pieces(89), held=pieces(89), slice_bytes=SLICE), helping=True)


def test_a_few_pieces_held_nowhere_as_our_slice_comes_in_are_left_to_their_sites():
    """Equal sites: the last pieces of the other slices are on their way; a second copy would duplicate them."""
    last = Cover(90, lacking=pieces(89), held=0, slice_bytes=SLICE)
    assert not helps(3, 0, last, helping=False)
    assert to_spare(IPS, 8, True, last) == ["127.0.0.2", "127.0.0.3"]


def test_no_help_is_decided_before_our_own_slice_is_in():
    ours_missing = Cover(90, lacking=span(0, 30) | span(60, 90), held=0, slice_bytes=SLICE)
    assert not helps(3, 0, ours_missing, helping=False)
    assert not helps(3, None, ours_missing, helping=True)


def test_no_site_is_spared_below_a_busy_swarm_for_a_shard_or_when_complete():
    cover = Cover(9, lacking=pieces(0), held=ALL, slice_bytes=SLICE)
    assert to_spare(IPS, 2, True, cover) == []  # two T3s on three sites: the sites are still needed
    assert to_spare(IPS, 8, False, cover) == []  # the shard rule
    assert to_spare(IPS, 8, True, Cover(9, 0, ALL, SLICE)) == []  # nothing lacking: nothing to decide
