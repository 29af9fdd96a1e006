"""The target list and the worst exit status of a run of many targets (pure): tables."""

from __future__ import annotations

import pytest

from btget.resolve import targets
from torrents.errors import UsageError
from torrents.exitstatus import ExitStatus as E


@pytest.mark.parametrize("statuses, worst", [
    ([], E.OK),
    ([E.OK, E.OK], E.OK),
    ([E.OK, E.INCOMPLETE], E.INCOMPLETE),
    ([E.INCOMPLETE, E.BLOCKED], E.BLOCKED),
    ([E.BLOCKED, E.ERROR], E.ERROR),
    ([E.INCOMPLETE, E.NOT_FOUND, E.OK], E.NOT_FOUND),  # a rerun would not fetch the missing name
    ([E.NOT_FOUND, E.USAGE], E.USAGE),
    ([E.USAGE, E.CONFLICT], E.CONFLICT),
    ([E.CONFLICT, E.VERIFY_FAILED, E.INCOMPLETE], E.VERIFY_FAILED),
    ([E.VERIFY_FAILED, E.INTERRUPTED], E.INTERRUPTED),
    ([3, 0, 4], E.NOT_FOUND),  # the numbers of the JSON documents
])
def test_the_worst_status_wins(statuses, worst):
    assert targets.worst(statuses) is worst
    assert targets.worst(reversed(statuses)) is worst


def test_every_status_has_a_rank():
    assert set(targets.SEVERITY) == set(E)


@pytest.mark.parametrize("text, expected", [
    ("a\nb\n", ["a", "b"]),
    ("# the DAOD of run 348895\n\nscope:cont  # the container\n   \n  x.torrent\n", ["scope:cont", "x.torrent"]),
    ("http://repo:8080/datasets/ds#files\n", ["http://repo:8080/datasets/ds#files"]),  # a fragment, not a comment
    ("magnet:?xt=urn:btih:" + "a" * 40 + "&dn=ds # mine\n", ["magnet:?xt=urn:btih:" + "a" * 40 + "&dn=ds"]),
    ("\r\nwin\r\n", ["win"]),
    ("", []),
])
def test_a_list_has_one_target_a_line_comments_and_blanks_skipped(text, expected):
    assert targets.read_list(text, "LIST") == expected


@pytest.mark.parametrize("text, error", [
    ("ok\ntwo words\n", "LIST:2: 'two words': one target a line (a name holds no space)"),
    ("x" * 5000, "LIST:1: longer than 4096 characters"),
])
def test_a_bad_line_is_named_by_its_number(text, error):
    with pytest.raises(UsageError) as caught:
        targets.read_list(text, "LIST")
    assert str(caught.value) == error


def test_gather_keeps_the_order_and_each_target_once():
    assert targets.gather(["a", "b"], [("L1", "c\na\n"), ("L2", "d\n")]) == ["a", "b", "c", "d"]


def test_the_summary_names_each_target_and_the_status():
    outcomes = [targets.Outcome("s:cont", "container", E.OK, None, ("s:d1", "s:d2"), 3 * 2**20, 3 * 2**20, 3 * 2**20),
                targets.Outcome("nope", "dataset", E.NOT_FOUND, "nope: no such dataset in http://r")]
    assert targets.summary_lines(outcomes, targets.worst(o.status for o in outcomes)) == [
        "2 targets",
        "  ok         s:cont: 2 datasets, 3.0 MiB",
        "  not_found  nope: no such dataset in http://r",
        "  status not_found (exit 3)",
    ]
    assert targets.totals(outcomes, 2.0) == {
        "targets": 2, "by_status": {"OK": 1, "NOT_FOUND": 1}, "datasets": 2, "bytes_total": 3 * 2**20,
        "bytes_done": 3 * 2**20, "bytes_downloaded": 3 * 2**20, "seconds": 2.0, "rate": 3 * 2**19}
