"""target.py: what the user typed (pure)."""

from __future__ import annotations

import pytest

from torrents.errors import UsageError
from btget.resolve import target
from btget.resolve.target import classify, placement

NAME = "data08_cos.00091949.physics_IDCosmic.merge.DPD_IDCOMM.o4_r653_p26_tid051203"
HASH = "ac99949e7550e0e214de20455bb2892a354d63b5"


def test_a_dataset_name():
    t = classify(NAME)
    assert (t.kind, t.value) == ("name", NAME)


def test_an_existing_file_wins_over_a_name():
    assert classify("x.torrent", is_file=lambda p: p == "x.torrent").kind == "file"
    assert classify(NAME, is_file=lambda p: True).kind == "file"


def test_a_missing_torrent_file_is_a_usage_error():
    with pytest.raises(UsageError, match=r"^nope\.torrent: no such \.torrent file$"):
        classify("nope.torrent")
    with pytest.raises(UsageError, match=r"^dir/x: no such \.torrent file$"):
        classify("dir/x")


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/datasets/x.torrent", "HTTPS://repo.example/x.torrent"])
def test_urls(url):
    assert classify(url).kind == "url"


def test_url_without_host():
    with pytest.raises(UsageError, match="URL has no host"):
        classify("http:///x.torrent")


def test_magnet_hex_and_base32():
    t = classify(f"magnet:?xt=urn:btih:{HASH.upper()}&dn={NAME}&tr=http%3A%2F%2F127.0.0.1%3A6969%2Fannounce"
                 "&x.pe=127.0.0.2:6881")
    assert (t.kind, t.info_hash, t.display_name) == ("magnet", HASH, NAME)
    assert t.peers == ("127.0.0.2:6881",)
    import base64

    b32 = base64.b32encode(bytes.fromhex(HASH)).decode()
    assert classify(f"magnet:?xt=urn:btih:{b32}").info_hash == HASH


@pytest.mark.parametrize("text, problem", [
    ("magnet:?dn=x", "magnet: no xt=urn:btih: info-hash (only BitTorrent v1 magnets are supported)"),
    ("magnet:?xt=urn:btih:1234", "magnet: bad info-hash '1234' (expected 40 hex or 32 base32 characters)"),
    (".hidden", ".hidden: not a dataset name (dataset name starts with '.')"),
    ("", "TARGET: is empty"),
])
def test_refused(text, problem):
    with pytest.raises(UsageError) as err:
        classify(text)
    assert str(err.value) == problem


def test_a_did_lands_in_dir_name_or_dir_scope_name_as_rucio_download_lays_it_out():
    record = {"name": "user.jdoe:user.jdoe.calib", "did": {"scope": "user.jdoe", "name": "user.jdoe.calib"}}
    assert placement("user.jdoe:user.jdoe.calib", record, False) == ((), "user.jdoe.calib")
    assert placement("user.jdoe:user.jdoe.calib", record, True) == (("user.jdoe",), "user.jdoe.calib")
    # no record (a .torrent file, a URL) or no DID in it: the torrent's name, as for any dataset
    assert placement("user.jdoe:user.jdoe.calib", None, False) == ((), "user.jdoe:user.jdoe.calib")
    assert placement("plain.name", {"name": "plain.name"}, False) == ((), "plain.name")
    with pytest.raises(UsageError, match="not a dataset from Rucio"):
        placement("plain.name", {"name": "plain.name"}, True)
    with pytest.raises(UsageError, match="bad DID"):
        placement("a:b", {"did": {"scope": "a", "name": "../b"}}, False)


@pytest.mark.parametrize("data, why", [
    (b"d8:announce...", None),
    (b"<!doctype html>\n<html><head>", "an HTML page, not a .torrent"),
    (b"  <HTML>", "an HTML page, not a .torrent"),
    (b"", "empty, not a .torrent"),
    (b"user.jdoe.dataset\nother\n", "not a .torrent (a text file starting 'user.jdoe.dataset')"),
    (b"\x89PNG\r\n\x1a\n\xff\xfe", "not a .torrent (binary data that is not bencoded)"),
])
def test_not_a_torrent_says_what_it_is(data, why):
    assert target.not_a_torrent(data) == why


def test_a_dataset_page_names_its_torrent():
    page = (b'<!doctype html><html><head><link rel="stylesheet" href="/static/style.css">'
            b'<link rel="alternate" type="application/x-bittorrent" href="/datasets/a.b.torrent"></head>')
    assert target.torrent_link(page, "http://repo:8080/datasets/a.b?x=1") == "http://repo:8080/datasets/a.b.torrent"
    assert target.torrent_link(b"<html><head><link rel=alternate href=/x></head>", "http://r/") is None
