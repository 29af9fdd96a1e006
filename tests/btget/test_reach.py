"""What a proxy and a closed host mean for a download (btget/resolve/reach.py), and the .torrent a closed host announces with."""

from __future__ import annotations

from torrents import metainfo
from torrents.proxyenv import NONE, Proxy, from_environ

from btget.resolve import reach

TRACKER = "http://127.20.0.1:6969/announce"


def test_no_proxy_and_open_changes_nothing():
    assert reach.plan(NONE, [TRACKER], closed=False) == reach.Reach()
    assert reach.announce_url(TRACKER, False) == TRACKER


def test_a_closed_host_announces_inbound_0_and_says_so_once():
    way = reach.plan(NONE, [TRACKER], closed=True)
    assert way.closed and way.tracker_proxy is None and not way.unreachable
    assert "accepts no inbound connection" in way.note
    assert reach.announce_url(TRACKER, True) == TRACKER + "?inbound=0"
    assert reach.announce_url(TRACKER + "?key=1", True) == TRACKER + "?key=1&inbound=0"
    assert reach.announce_url(TRACKER + "?inbound=0", True) == TRACKER + "?inbound=0"


def test_a_tracker_behind_the_proxy_means_announces_through_it_closed_and_web_seeds_at_once():
    proxies = from_environ({"http_proxy": "127.20.0.1:3128", "no_proxy": "repo.example"})
    way = reach.plan(proxies, [TRACKER], closed=False)
    assert way.tracker_proxy == Proxy("127.20.0.1", 3128) and way.closed
    assert way.unreachable.startswith("the tracker is reached through the proxy http://127.20.0.1:3128 and "
                                      "BitTorrent peers cannot be")
    assert not way.note  # the web seeds' switch says it, once


def test_a_tracker_the_proxy_is_bypassed_for_is_direct():
    proxies = from_environ({"http_proxy": "squid.example:3128", "no_proxy": "127.20.0.0/16"})
    assert reach.plan(proxies, [TRACKER], closed=False) == reach.Reach()
    # several trackers: the session takes the proxy of the first that has one
    way = reach.plan(proxies, [TRACKER, "http://tracker.example:6969/announce"], closed=False)
    assert way.tracker_proxy == Proxy("squid.example", 3128)


def test_the_torrent_of_a_closed_host_keeps_its_info_hash_and_every_tracker_says_inbound_0():
    info = metainfo.info_dict("ds", [("a", 10)], 16384, b"\x01" * 20)
    data = metainfo.dump(info, TRACKER)
    data = metainfo.with_url_list(data, ["http://127.20.1.1:8701/data/"])
    meta = metainfo.parse(data)
    out = metainfo.parse(metainfo.with_trackers(data, lambda url: reach.announce_url(url, True)))
    assert out.info_hash == meta.info_hash and out.url_list == meta.url_list
    assert out.trackers() == [TRACKER + "?inbound=0"]
