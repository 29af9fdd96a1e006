"""btget/siteshare.py: a T3 of a busy swarm keeps its share of the sites unchoking it, not all of them."""

from __future__ import annotations

from btget.siteshare import SitePeer, share, to_shed

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
