"""The decisions of bt-get --serve (btget.swarmread.streaming): ranges, pieces, read-ahead, deadlines, cancelling."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from btget.swarmread.streaming import (Demand, PieceMap, RangeNotSatisfiable, ReadAhead, content_range, deadlines,
                                       parse_range)


# --- Range headers ------------------------------------------------------------------------------
@pytest.mark.parametrize("header, expected", [
    (None, None),
    ("bytes=0-99", [(0, 100)]),
    ("bytes=100-", [(100, 1000)]),
    ("bytes=-50", [(950, 1000)]),
    ("bytes=-5000", [(0, 1000)]),
    ("bytes=990-5000", [(990, 1000)]),
    ("bytes=0-0, 10-19,  -1", [(0, 1), (10, 20), (999, 1000)]),
    ("BYTES=5-9", [(5, 10)]),
    ("bytes=2000-3000, 0-9", [(0, 10)]),  # an unsatisfiable range among others is dropped
])
def test_parse_range(header, expected):
    assert parse_range(header, 1000) == expected


@pytest.mark.parametrize("header", ["bytes=1000-", "bytes=5000-6000", "items=0-9", "bytes=", "bytes=a-b",
                                    "bytes=9-5", "bytes=-", "bytes=-0", "0-9", "bytes=1-2-3"])
def test_bad_or_unsatisfiable_ranges_are_416(header):
    with pytest.raises(RangeNotSatisfiable):
        parse_range(header, 1000)


def test_too_many_ranges_are_refused():
    with pytest.raises(RangeNotSatisfiable, match="at most"):
        parse_range("bytes=" + ",".join(f"{i}-{i}" for i in range(2000)), 10_000)


def test_content_range_is_inclusive():
    assert content_range(0, 100, 1000) == "bytes 0-99/1000"


# --- pieces of files ----------------------------------------------------------------------------
def test_pieces_of_a_range_cross_file_boundaries():
    m = PieceMap([100, 250, 0, 30], 64)  # offsets 0, 100, 350, 350; total 380; 6 pieces
    assert m.num_pieces == 6 and m.piece_size(5) == 380 - 320
    assert list(m.pieces(0, 0, 100)) == [0, 1]
    assert list(m.pieces(1, 0, 1)) == [1]  # file 1 starts at 100, inside piece 1
    assert list(m.pieces(1, 28, 29)) == [2]  # byte 128
    assert list(m.pieces(3, 0, 30)) == [5]
    assert list(m.pieces(1, 5, 5)) == []
    assert [(s.file, s.offset, s.length) for s in m.segments(1)] == [(0, 64, 36), (1, 0, 28)]
    assert [(s.file, s.offset, s.length) for s in m.segments(5)] == [(1, 220, 30), (3, 0, 30)]
    assert m.piece_range_in_file(1, 0) == (64, 100) and m.piece_range_in_file(1, 1) == (0, 28)
    assert m.piece_range_in_file(0, 1) == (0, 0)  # piece 0 holds nothing of file 1


@pytest.mark.parametrize("have, covered", [
    ([True] * 6, [100, 250, 0, 30]),
    ([False] * 6, [0, 0, 0, 0]),
    ([False, True, False, False, False, True], [36, 28 + 30, 0, 30]),  # pieces that straddle count in part
    ([True, False, True, True, True, False], [64, 250 - 28 - 30, 0, 0]),
])
def test_bytes_of_each_file_the_pieces_we_have_hold(have, covered):
    m = PieceMap([100, 250, 0, 30], 64)
    assert [m.covered(i, have) for i in range(4)] == covered


@given(st.lists(st.integers(0, 500), min_size=1, max_size=8), st.integers(1, 97), st.data())
def test_segments_and_pieces_agree(sizes, piece_length, data):
    m = PieceMap(sizes, piece_length)
    # The segments of all pieces tile every file exactly once, in order.
    covered: dict[int, int] = {}
    for p in range(m.num_pieces):
        segs = m.segments(p)
        assert sum(s.length for s in segs) == m.piece_size(p)
        for s in segs:
            assert s.offset == covered.get(s.file, 0)
            covered[s.file] = s.offset + s.length
            assert p in m.pieces(s.file, s.offset, s.offset + s.length)
    assert covered == {i: n for i, n in enumerate(sizes) if n}
    f = data.draw(st.sampled_from([i for i, n in enumerate(sizes)]))
    if sizes[f]:
        a = data.draw(st.integers(0, sizes[f] - 1))
        b = data.draw(st.integers(a + 1, sizes[f]))
        pieces = m.pieces(f, a, b)
        # every byte of the range is in one of the pieces, and every piece holds one of its bytes
        for p in pieces:
            lo, hi = m.piece_range_in_file(p, f)
            assert max(lo, a) < min(hi, b)
        assert m.piece_range_in_file(pieces[0], f)[0] <= a and m.piece_range_in_file(pieces[-1], f)[1] >= b


# --- read-ahead ---------------------------------------------------------------------------------
def test_a_sequential_reader_gets_what_it_read_in_a_row_and_a_seek_resets_it():
    ra = ReadAhead(max_window=400, slack=10)
    assert ra.on_request(0, 0, 50, 10_000) == (50, 50)  # first read: no read-ahead
    assert ra.on_request(0, 50, 100, 10_000) == (100, 200)  # sequential: as much as read so far (100)
    assert ra.on_request(0, 105, 150, 10_000) == (150, 295)  # skipping a little still continues it
    assert ra.on_request(0, 150, 250, 10_000) == (250, 495)
    assert ra.on_request(0, 250, 350, 10_000) == (350, 695)
    assert ra.on_request(0, 350, 450, 10_000) == (450, 850)  # at most max_window
    assert ra.on_request(0, 5000, 5100, 10_000) == (5100, 5100)  # a seek starts a new stream
    assert ra.on_request(0, 450, 500, 10_000) == (500, 900)  # ... the old one is still remembered
    assert ra.on_request(0, 10, 20, 10_000) == (20, 20)  # backwards is a seek
    assert ra.on_request(0, 500, 9990, 10_000) == (9990, 10_000)  # the window ends at the end of the file


def test_small_reads_near_each_other_get_next_to_nothing():
    """uproot opening a file: header, keys, streamers, a few hundred bytes each, close together."""
    ra = ReadAhead(max_window=32 * 2**20, slack=4096)
    windows = [ra.on_request(0, s, e, 10**9) for s, e in [(0, 403), (1320, 1636), (1676, 12009)]]
    assert [b - a for a, b in windows] == [0, 403 + 316, 403 + 316 + 10333]  # a few KB, not megabytes


def test_read_ahead_is_per_file_and_remembers_a_few_streams():
    ra = ReadAhead(max_window=100, streams_per_file=2)
    ra.on_request(0, 0, 10, 1000)
    ra.on_request(1, 0, 10, 1000)
    assert ra.on_request(1, 10, 20, 1000) == (20, 40)
    ra.on_request(0, 500, 510, 1000)
    ra.on_request(0, 800, 810, 1000)  # a third stream of file 0: the oldest (ending at 10) is forgotten
    assert ra.on_request(0, 10, 20, 1000) == (20, 20)
    assert ra.on_request(0, 810, 820, 1000) == (820, 840)


# --- demand -------------------------------------------------------------------------------------
def test_demand_keeps_the_most_urgent_deadline_and_cancels_what_nobody_waits_for():
    d = Demand()
    assert d.want(1, [(5, 100), (6, 110)]) == [(5, 100), (6, 110)]
    assert d.want(2, [(6, 0), (7, 10)]) == [(6, 0), (7, 10)]  # 6 became more urgent
    assert d.want(2, [(5, 500)]) == []  # not more urgent: nothing to tell libtorrent
    assert d.wanted() == {5: 100, 6: 0, 7: 10}
    cancel, relaxed = d.release(2)  # reader 2 leaves (its client disconnected)
    assert cancel == [7] and relaxed == [(6, 110)]
    assert d.wanted() == {5: 100, 6: 110}
    d.arrived(5)
    assert d.wanted() == {6: 110}
    assert d.release(1) == ([6], [])
    assert d.wanted() == {} and d.release(1) == ([], [])


def test_releasing_some_pieces_keeps_the_others():
    d = Demand()
    d.want(1, [(1, 0), (2, 0), (3, 0)])
    assert d.release(1, [1, 3, 99]) == ([1, 3], [])
    assert d.wanted() == {2: 0}


def test_deadlines_follow_reading_order():
    assert deadlines([9, 3, 4], 1000, 20) == [(9, 1000), (3, 1020), (4, 1040)]
