"""btserver/uploadslots.py: a seed's upload slots per part its interested peers want (pure)."""

from __future__ import annotations

import pytest

from btserver.uploadslots import MAX_SLOTS, slots


@pytest.mark.parametrize("base, parts, current, expected", [
    (1, [None, None, None], 1, 1),  # T3s that want every piece share one slot: they trade
    (1, [], 1, 1),  # nobody interested
    (1, ["a1b2", "c3d4", "e5f6", "0789"], 1, 4),  # four shards: one each
    (1, ["a1b2", "a1b2", None], 1, 2),  # two T3s with the same shard, and one with everything
    (2, ["a1b2", "c3d4"], 2, 4),  # upload_slots per part
    (1, [f"{i:04x}" for i in range(100)], 1, MAX_SLOTS),  # capped
    (40, ["a1b2"], 40, 40),  # never below the configured slots
    (0, ["a1b2", "c3d4"], 0, 0),  # 0: no limit, left alone
    (1, [None], 4, 2),  # back down after shards left: libtorrent sets no fewer than 2
    (1, [None], 2, 2),
])
def test_slots(base, parts, current, expected):
    assert slots(base, parts, current) == expected
