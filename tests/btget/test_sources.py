"""A worker's byte accounting of its sources (btget/worker/sources.py), from the samples and alerts libtorrent gives."""

from __future__ import annotations

import pytest

from btget.display import result
from btget.worker.sources import Connection, Ledger, sibling_index

PREFIX = "-BW0100-abc123"
ME = "127.0.0.1"  # the workers' shared address
L1, L2 = (ME, 40001), (ME, 40002)  # where workers 1 and 2 listen
SEED = ("127.0.157.183", 56441)
LT_PID = b"-LT2110-" + b"x" * 12  # another client's peer id
PIECE = 256 * 1024


def pid(index: int) -> bytes:
    return f"{PREFIX}{index:02d}".encode().ljust(20, b"r")


def ep(e: tuple[str, int]) -> str:
    return f"{e[0]}:{e[1]}"


def named(ledger: Ledger) -> dict[str, int]:
    """The summary's sources as the parent names them: its workers by listen endpoint and by the
    endpoints each worker knew by peer id (download.run's Outcome.endpoints)."""
    workers = {ep(L1): 1, ep(L2): 2, **ledger.siblings}
    return result.name_sources(ledger.sources, {}, workers)


@pytest.mark.parametrize("peer_id, index", [
    (pid(1), 1), (pid(12), 12),
    (LT_PID, None), (bytes(20), None),  # another client; before the handshake
    (b"-BW0100-abc12401xxxxxx", None),  # another run's prefix (one character differs)
    (PREFIX.encode() + b"xx" + b"r" * 6, None),  # the prefix without an index
])
def test_sibling_index_by_peer_id(peer_id, index):
    assert sibling_index(peer_id, PREFIX.encode()) == index


def test_no_prefix_knows_no_sibling():
    assert sibling_index(pid(1), b"") is None


@pytest.mark.parametrize("totals, expected", [
    ([100, 300, 300], 300),  # growth adds up; no growth adds nothing
    ([100, 40], 140),  # a smaller count: a new connection from the same endpoint, its bytes add
    ([0, 0], 0),
])
def test_samples_add_the_growth_of_each_connection(totals, expected):
    ledger = Ledger(ME, PREFIX)
    for total in totals:
        ledger.sample([Connection(*SEED, total, LT_PID, seed=True)])
    assert ledger.sources == ({ep(SEED): expected} if expected else {})


@pytest.mark.parametrize("ip, key, prefix, introduced, remote", [
    ("127.0.0.9", "127.0.0.9:5000", PREFIX, (), True),
    (ME, "127.0.0.1:5000", PREFIX, (), True),  # our address, not a sibling's peer id: another client
    (ME, "127.0.0.1:5000", "", (), False),  # one worker, no prefix: our own address is ours
    (ME, ep(L1), PREFIX, (L1,), False),  # where the parent said a sibling listens
    (ME, "web seed 127.0.0.1:80", PREFIX, (), False),
])
def test_remote_is_neither_sibling_nor_web_seed(ip, key, prefix, introduced, remote):
    ledger = Ledger(ME, prefix)
    ledger.introduce(introduced)
    assert ledger.remote(ip, key) is remote


def test_a_sibling_known_by_peer_id_in_a_sample_is_not_remote():
    ledger = Ledger(ME, PREFIX)
    ledger.sample([Connection(ME, 51000, 5000, pid(2)), Connection(*SEED, 7000, LT_PID, seed=True)])
    assert ledger.siblings == {"127.0.0.1:51000": 2}
    assert ledger.named()["peer_bytes"] == 7000 and ledger.named()["peers_remote"] == 1
    assert named(ledger) == {ep(SEED): 7000, "worker 2": 5000}


def test_the_rest_is_shared_as_the_last_sample_that_saw_bytes():
    ledger = Ledger(ME, PREFIX)
    ledger.sample([Connection(*SEED, 3000, LT_PID, seed=True), Connection(*L2, 1000, pid(2))])
    ledger.attribute_rest(8000, PIECE)  # 4000 arrived after the last sample
    assert ledger.sources == {ep(SEED): 6000, ep(L2): 2000}


def test_the_shares_add_up_to_the_total_exactly():
    ledger = Ledger(ME, PREFIX)
    ledger.sample([Connection(*SEED, 1, LT_PID), Connection(*L2, 1, pid(2)), Connection(ME, 51000, 1, pid(3))])
    ledger.attribute_rest(1000, PIECE)  # 997 in three: 332 each, and the 1 left by rounding down
    assert sorted(ledger.sources.values()) == [333, 333, 334]


def test_a_peer_banned_between_samples_sent_at_least_its_failed_pieces():
    ledger = Ledger(ME, PREFIX)
    ledger.connected("127.0.0.66", 6881)
    ledger.sample([Connection(*SEED, PIECE, LT_PID, seed=True)])
    ledger.hash_failed()
    ledger.ban("127.0.0.66", 6881)
    ledger.attribute_rest(4 * PIECE, PIECE)
    assert ledger.sources == {ep(SEED): 3 * PIECE, "127.0.0.66:6881": PIECE}
    assert ledger.named()["banned"] == ("127.0.0.66:6881",)
    assert ledger.named()["peer_hash_failures"] == {"127.0.0.66:6881": 1}


def test_a_web_seed_is_named_as_one_whatever_its_address():
    ledger = Ledger(ME, PREFIX, web_seeds=[(ME, 8080)])
    ledger.connected(ME, 8080)
    ledger.disconnected(ME, 8080, bytes(20))
    ledger.attribute_rest(1000, PIECE)  # it sent everything between two samples
    assert ledger.sources == {"web seed 127.0.0.1:8080": 1000}
    assert ledger.named()["peer_bytes"] == 0


def test_sibling_bytes_no_sample_saw_are_named_once_for_the_sibling():
    """issue 26 finding 5: `{'127.0.157.183:56441': 8912895, 'worker 1': 4543829, '127.0.0.1:46365':
    4543829, ...}`, worker 1's bytes under its name and under an address. Worker 2 on a loaded host:
    its whole share (13 MiB) arrived between two samples; at the end libtorrent closed the
    upload-only peers (the seed, and worker 1, finished first) before the worker looked, so the bytes
    were shared among the peers seen connected: the seed, worker 1's connection to us from an
    ephemeral port (its peer id seen by no sample) and ours to worker 1's listen endpoint (closed as a
    duplicate peer id) — worker 1 twice, the ephemeral one not known as a sibling."""
    ledger = Ledger(ME, PREFIX)
    ephemeral = (ME, 46365)
    ledger.connected(*SEED)  # ours, to the seed given with --peer
    ledger.connected(*ephemeral)  # worker 1 connected to us (libtorrent posts it before the handshake)
    ledger.introduce([L1])  # the parent's Connect
    ledger.connected(*L1)
    ledger.sample([Connection(*SEED, 0, bytes(20), busy=True), Connection(*ephemeral, 0, bytes(20), busy=True),
                   Connection(*L1, 0, bytes(20), busy=True)])  # the one sample: every handshake under way
    ledger.disconnected(*L1, pid(1))  # duplicate peer id: one connection per pair of workers
    total = 13 * 2**20 - 1  # the sum of the three equal shares in the issue
    ledger.sample([])  # torrent_finished_alert: the upload-only peers are gone
    ledger.attribute_rest(total, PIECE)
    # ... and their disconnect alerts come after the finished one.
    ledger.disconnected(*SEED, LT_PID)
    ledger.disconnected(*ephemeral, pid(1))
    assert set(named(ledger)) == {ep(SEED), "worker 1"}, named(ledger)
    assert sum(ledger.sources.values()) == total
    # One sibling weighs as one peer, whichever connections it used.
    assert abs(named(ledger)["worker 1"] - named(ledger)[ep(SEED)]) <= 1
    assert ledger.named()["peer_bytes"] == named(ledger)[ep(SEED)]  # no sibling's bytes count as a peer's


def test_a_connection_that_never_finished_its_handshake_sent_nothing():
    """A refused or timed-out attempt weighs nothing in the guess: only peers that talked to us."""
    ledger = Ledger(ME, PREFIX)
    ledger.connected(*SEED)
    ledger.connected("127.0.0.77", 6881)  # a peer from the tracker, behind a firewall
    ledger.disconnected("127.0.0.77", 6881, bytes(20), connect_failed=True)
    ledger.disconnected(*SEED, LT_PID)
    ledger.attribute_rest(5000, PIECE)
    assert ledger.sources == {ep(SEED): 5000}
    assert ledger.named()["connect_attempts"] == 2 and ledger.named()["connect_failures"] == 1


def test_nothing_seen_at_all_is_unattributed():
    ledger = Ledger(ME, PREFIX)
    ledger.attribute_rest(5000, PIECE)
    assert ledger.sources == {"unattributed": 5000}


def test_sources_without_an_end_are_what_was_sampled():
    ledger = Ledger(ME, PREFIX)
    ledger.connected(*SEED)
    assert ledger.sources == {}


def test_the_module_is_pure():
    """Standard library and the pure shared library only: the accounting is tested without libtorrent (and runs
    without it)."""
    import ast
    import sys

    from btget.worker import sources

    tree = ast.parse(open(sources.__file__).read())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    names -= {"torrents.hostport", "btget.events"}  # addresses and endpoints, the messages: standard library only
    assert {name.split(".")[0] for name in names} <= set(sys.stdlib_module_names) | {"__future__"}, names
