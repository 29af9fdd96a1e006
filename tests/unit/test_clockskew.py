"""torrents.clockskew: offsets measured from an answer's Date, said once per change."""

from __future__ import annotations

import email.utils

from torrents.clockskew import Reports, describe, offset_from_date

T0 = 1_750_000_000.0


def test_the_offset_from_a_date_header_is_ours_minus_the_servers_to_the_second():
    date = email.utils.formatdate(T0, usegmt=True)  # what aiohttp writes: the server's second
    assert abs(offset_from_date(date, T0 + 600.2, T0 + 600.4) - 599.8) < 1e-6
    assert abs(offset_from_date(date, T0 + 0.1, T0 + 0.3)) <= 0.5
    assert offset_from_date(None, T0, T0) is None
    assert offset_from_date("not a date", T0, T0) is None


def test_describe_says_ahead_or_behind_and_whose():
    assert describe(599.6, "the tracker's") == "this host's clock is 600 s ahead of the tracker's"
    assert describe(-42.2, "the repository's") == "this host's clock is 42 s behind the repository's"


def test_an_offset_is_said_once_again_when_it_moves_and_once_when_in_step():
    r = Reports(step=30)
    assert r.off("site2", 600.0) is True
    assert [r.off("site2", 600.0 + d) for d in (0.5, -1, 29)] == [False, False, False]  # jitter and drift
    assert r.off("site2", 660.0) is True  # moved a minute: said again
    assert r.off("site3", 600.0) is True  # another peer is news of its own
    assert r.reported == {"site2": 660.0, "site3": 600.0}
    assert r.in_step("site2") is True  # once back within the limit: said once
    assert r.in_step("site2") is False
    assert r.in_step("site1") is False  # never reported: nothing to say
    assert r.off("site2", 600.0) is True  # off again after being in step: news again
