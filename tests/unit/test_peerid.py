"""torrents/peerid.py: what a bt-get worker's peer id tells a site about the part it wants (pure)."""

from __future__ import annotations

import pytest

from torrents import peerid


def test_a_partial_workers_id_names_its_part_and_a_whole_ones_none():
    part = peerid.part_tag([4, 2, 9])
    partial = peerid.fingerprint(peerid.run_prefix(False, "abc123"), 3, part)
    whole = peerid.fingerprint(peerid.run_prefix(True, "abc123"), 3)
    assert len(partial) == 20 and partial.startswith("-BP0100-abc12303")
    assert peerid.part_of(partial.encode()) == part
    assert peerid.part_of(whole.encode().ljust(20, b"r")) is None


def test_the_same_files_are_the_same_part_in_any_order_and_other_files_another():
    assert peerid.part_tag([1, 2, 3]) == peerid.part_tag([3, 1, 2, 2])
    assert peerid.part_tag([1, 2, 3]) != peerid.part_tag([1, 2])


@pytest.mark.parametrize("pid", [
    b"-LT2110-" + b"x" * 12,  # another client
    bytes(20),  # before the handshake
    b"-BP0100-abc12303",  # a partial prefix cut before its part
    b"-BP0100-abc12303\xff\xfe\xfd\xfc",  # not text
])
def test_any_other_peer_id_wants_every_piece(pid):
    assert peerid.part_of(pid) is None


def test_a_run_is_six_characters():
    with pytest.raises(ValueError, match="6 characters"):
        peerid.run_prefix(True, "abc")
