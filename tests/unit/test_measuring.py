"""Measuring overrides (torrents/measuring.py): benchmarks' environment variables, said at WARNING."""

from __future__ import annotations

import pytest

from torrents import measuring
from torrents.errors import ConfigError


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(measuring, "_said", set())


def test_unset_or_empty_is_no_override_and_says_nothing(monkeypatch, caplog):
    monkeypatch.delenv(measuring.SITE_SHARE, raising=False)
    with caplog.at_level("WARNING", logger="btswarm.measuring"):
        assert measuring.site_share() is True
        monkeypatch.setenv(measuring.SITE_SHARE, " ")
        assert measuring.site_share() is True
    assert not caplog.records


def test_site_share_off_is_taken_and_said_once(monkeypatch, caplog):
    monkeypatch.setenv(measuring.SITE_SHARE, "off")
    with caplog.at_level("WARNING", logger="btswarm.measuring"):
        assert measuring.site_share() is False
        assert measuring.site_share() is False
    said = [r.getMessage() for r in caplog.records]
    assert said == ["$BTSWARM_BENCH_SITE_SHARE=off turns the site-share rules off: a benchmark's override, "
                    "not for production"]


def test_a_value_other_than_on_or_off_is_an_error_naming_the_variable(monkeypatch):
    monkeypatch.setenv(measuring.SITE_SHARE, "false")
    with pytest.raises(ConfigError, match=r"\$BTSWARM_BENCH_SITE_SHARE: expected on or off, got 'false'"):
        measuring.site_share()
    monkeypatch.setenv(measuring.SITE_SHARE, "on")
    assert measuring.site_share() is True


def test_libtorrent_settings_of_a_benchmark_are_said_with_what_they_set(monkeypatch, caplog):
    monkeypatch.setenv(measuring.LT_GET, '{"request_queue_time": 1, "strict_end_game_mode": false}')
    monkeypatch.delenv(measuring.LT_SEED, raising=False)
    with caplog.at_level("WARNING", logger="btswarm.measuring"):
        assert measuring.libtorrent_settings(seeding=False) == {"request_queue_time": 1, "strict_end_game_mode": False}
        assert measuring.libtorrent_settings(seeding=True) == {}
    [said] = [r.getMessage() for r in caplog.records]
    assert said.startswith("$BTSWARM_LT_GET_SETTINGS=")
    assert said.endswith("overrides libtorrent's settings request_queue_time=1, strict_end_game_mode=False: "
                         "a benchmark's override, not for production")


@pytest.mark.parametrize("text, problem", [("{nope", "not JSON"), ("[1, 2]", "not a JSON object of libtorrent settings")])
def test_libtorrent_settings_that_are_not_a_json_object_are_an_error_naming_the_variable(monkeypatch, text, problem):
    monkeypatch.setenv(measuring.LT_SEED, text)
    with pytest.raises(ConfigError, match=rf"\$BTSWARM_LT_SEED_SETTINGS: {problem}"):
        measuring.libtorrent_settings(seeding=True)
