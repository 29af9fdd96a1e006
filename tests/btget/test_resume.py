"""Killed hard mid-download (kill -9 of the whole process group), bt-get resumes where it stopped."""

from __future__ import annotations

import os
import signal

import pytest

from tests.btget.getsupport import bt_get_json, same_bytes
from tests.support import command, verified_bytes, wait_for
from torrents import bencoding
from torrents.errors import BencodeError

pytestmark = pytest.mark.slow
RATE = 2 * 1024 * 1024  # the throttled seed's bytes/s: time to kill mid-way


def saved_pieces(out, dataset) -> int:
    """Pieces the saved resume state of all workers records as verified (`pieces`: a bitfield, MSB first)."""
    have = [0] * dataset.meta.num_pieces
    for path in (out / dataset.name / ".bt-get").glob("*.resume"):
        try:
            state = bencoding.decode(path.read_bytes())
        except BencodeError:
            continue  # cannot happen with atomic writes; tolerated while polling
        bits = state.get(b"pieces", b"")
        for i in range(min(len(have), len(bits) * 8)):
            have[i] |= bits[i // 8] >> (7 - i % 8) & 1
    return sum(have)


def rerun_whole(dataset, out, peer: str) -> dict:
    """The same command again, from a fast seed: exit 0, every file identical; its --json document."""
    result, doc = bt_get_json(str(dataset.torrent), "-o", str(out), "--peer", peer, "--workers", "2")
    assert result.returncode == 0, result.stderr
    for f in dataset.meta.files:
        assert same_bytes(dataset.root / f.lfn, out / dataset.name / f.lfn), f.lfn
    return doc


def test_kill_9_then_rerun_downloads_little(dataset, seed, procs, tmp_path, capsys):
    slow = seed(upload_rate=RATE)
    out = tmp_path / "out"
    first = procs.start("bt-get-first", [command("bt-get"), str(dataset.torrent), "-o", str(out),
                                         "--peer", slow, "--workers", "2", "-q"])
    pieces = dataset.meta.num_pieces
    wait_for(lambda: saved_pieces(out, dataset) >= 0.4 * pieces or first.popen.poll() is not None, timeout=40,
             what="40% of the pieces in the saved resume state")
    assert first.popen.poll() is None, "finished before it could be killed:\n" + first.log()
    os.killpg(first.pid, signal.SIGKILL)  # bt-get and its workers, as a batch system's hard kill would
    first.popen.wait(5)
    saved = saved_pieces(out, dataset)
    assert saved < pieces
    missing = dataset.meta.total_size - saved * dataset.meta.piece_length  # about; the last piece is short

    doc = rerun_whole(dataset, out, seed())
    refetched = doc["bytes_downloaded"] - missing
    with capsys.disabled():
        print(f"\n[resume] killed with {saved}/{pieces} pieces saved; the rerun downloaded "
              f"{doc['bytes_downloaded'] / 2**20:.2f} MiB of {dataset.meta.total_size / 2**20:.2f} MiB "
              f"({doc['bytes_downloaded'] / dataset.meta.total_size:.0%}), "
              f"{refetched / 2**20:.2f} MiB ({refetched / dataset.meta.total_size:.1%}) more than was missing, "
              f"in {doc['seconds']:.1f} s")
    # The rerun fetches what the saved state lacks and re-checks nothing it has:
    # bytes_downloaded is bounded by what was missing plus piece-boundary slack.
    assert doc["bytes_downloaded"] < missing + 0.10 * dataset.meta.total_size
    assert doc["bytes_downloaded"] < 0.7 * dataset.meta.total_size


def test_a_saved_state_that_lags_the_disk_costs_no_refetch(dataset, seed, procs, tmp_path, capsys):
    """The state on disk claims fewer pieces than the files hold (saves lag the pieces under load; here an
    older state is put back after the kill): the rerun finds the pieces by their SHA1 (btget/recover.py)
    and fetches only what is really missing. Before it: everything since the old state, again."""
    slow = seed(upload_rate=RATE)
    out = tmp_path / "out"
    first = procs.start("bt-get-first", [command("bt-get"), str(dataset.torrent), "-o", str(out),
                                         "--peer", slow, "--workers", "2", "-q"])
    pieces = dataset.meta.num_pieces
    states = out / dataset.name / ".bt-get"
    wait_for(lambda: saved_pieces(out, dataset) >= 0.2 * pieces or first.popen.poll() is not None, timeout=40,
             what="20% of the pieces in the saved resume state")
    old = {p.name: p.read_bytes() for p in states.glob("*.resume")}
    old_saved = saved_pieces(out, dataset)
    wait_for(lambda: saved_pieces(out, dataset) >= 0.6 * pieces or first.popen.poll() is not None, timeout=40,
             what="60% of the pieces in the saved resume state")
    assert first.popen.poll() is None, "finished before it could be killed:\n" + first.log()
    os.killpg(first.pid, signal.SIGKILL)
    first.popen.wait(5)
    for p in states.glob("*.resume"):
        p.unlink()
    for name, data in old.items():
        (states / name).write_bytes(data)
    assert saved_pieces(out, dataset) == old_saved
    have = verified_bytes(dataset.meta, out / dataset.name)
    missing = dataset.meta.total_size - have
    assert have >= 0.5 * dataset.meta.total_size

    doc = rerun_whole(dataset, out, seed())
    extra = doc["bytes_downloaded"] - missing
    with capsys.disabled():
        print(f"\n[lagging state] state claimed {old_saved}/{pieces} pieces, {have / 2**20:.2f} MiB verified on disk; "
              f"the rerun downloaded {doc['bytes_downloaded'] / 2**20:.2f} MiB, {extra / 2**20:.2f} MiB beyond "
              f"what was missing")
    # Beyond the missing bytes: the pieces in flight at the kill (part written) and those straddling
    # the two workers' shares (each worker's part file holds its half).
    assert extra <= 6 * dataset.meta.piece_length, extra
