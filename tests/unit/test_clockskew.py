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


def test_a_peer_clock_warns_once_per_change_and_says_when_in_step_again(caplog):
    from torrents.servicekit.web import PeerClock

    clock = PeerClock("the tracker's", "http://t:6969")
    date = email.utils.formatdate(T0, usegmt=True)

    def refusal(server_time: float) -> dict:
        return {"error": "site2: request timestamp is -600 s off (limit 300 s)", "clock_offset_s": 600.0,
                "limit_s": 300, "server_time": server_time}

    with caplog.at_level("INFO", logger="btswarm.web"):
        for k in range(17):  # 17 heartbeats refused, as in the issue: one warning
            clock.answered(401, refusal(T0 + k), date, T0 + k + 600.0, T0 + k + 600.2)
        assert (clock.refused, round(clock.offset)) == (True, 600)
        clock.answered(401, refusal(T0), date, T0 + 660.0, T0 + 660.2)  # a minute further off: said again
        clock.answered(200, {"ok": True}, date, T0 + 0.1, T0 + 0.3)  # set right: said once
        clock.answered(200, {"ok": True}, date, T0 + 0.1, T0 + 0.3)
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert lines == [
        ("WARNING", "this host's clock is 600 s ahead of the tracker's at http://t:6969: it refuses signed requests "
                    "more than 300 s off; set this host's clock (NTP)"),
        ("WARNING", "this host's clock is 660 s ahead of the tracker's at http://t:6969: it refuses signed requests "
                    "more than 300 s off; set this host's clock (NTP)"),
        ("INFO", "this host's clock agrees with the tracker's at http://t:6969 again"),
    ]
    assert clock.refused is False and abs(clock.offset) <= 0.5
