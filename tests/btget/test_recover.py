"""btget/worker/recover.py: pieces on disk that the saved state missed, found by their SHA1, on real sparse files."""

from __future__ import annotations

import os
from pathlib import Path

from torrents.build import build_torrent
from torrents.servicekit import ltsession

from btget.worker import recover

PIECE = 256 * 1024


def dataset(tmp_path: Path) -> tuple[object, list[bytes], Path]:
    """Two files of 5 and 3 pieces (the second starts on a piece boundary), their torrent_info, an empty
    download directory."""
    src = tmp_path / "src"
    src.mkdir()
    blobs = [os.urandom(5 * PIECE), os.urandom(3 * PIECE)]
    for k, blob in enumerate(blobs):
        (src / f"f{k}.root").write_bytes(blob)
    data, _ = build_torrent("ds", [(f"f{k}.root", src / f"f{k}.root") for k in range(2)], piece_length=PIECE)
    out = tmp_path / "out"
    (out / "ds").mkdir(parents=True)
    return ltsession.torrent_info(data), blobs, out


def sparse(path: Path, size: int, pieces: dict[int, bytes]) -> None:
    """A file of `size` bytes holding only `pieces` (index → bytes at index * PIECE), holes elsewhere."""
    with open(path, "wb") as f:
        f.truncate(size)
        for i, data in pieces.items():
            f.seek(i * PIECE)
            f.write(data)


def test_pieces_written_after_the_last_save_are_found_and_nothing_else(tmp_path):
    ti, blobs, out = dataset(tmp_path)
    f0 = blobs[0]
    # On disk: pieces 0-3 of f0 (the state saved claims 0 and 1); piece 3 has a byte flipped.
    bad = bytearray(f0[3 * PIECE:4 * PIECE])
    bad[100] ^= 1
    sparse(out / "ds" / "f0.root", len(f0), {i: f0[i * PIECE:(i + 1) * PIECE] for i in range(3)} | {3: bytes(bad)})
    have = [True, True] + [False] * 6
    assert recover.find(ti, str(out), {}, have, {0, 1}, 2**30) == [2]
    assert recover.data_extents(str(out / "ds" / "f1.root")) == []  # not created: nothing to find


def test_a_file_the_worker_does_not_want_is_never_read(tmp_path):
    ti, blobs, out = dataset(tmp_path)
    (out / "ds" / "f1.root").write_bytes(blobs[1])
    assert recover.find(ti, str(out), {}, [False] * 8, {1}, 2**30) == [5, 6, 7]
    assert recover.find(ti, str(out), {}, [False] * 8, {0}, 2**30) == []


def test_the_read_is_bounded_by_the_budget(tmp_path):
    ti, blobs, out = dataset(tmp_path)
    (out / "ds" / "f0.root").write_bytes(blobs[0])  # all allocated: as on a file system without holes
    assert recover.find(ti, str(out), {}, [False] * 8, {0, 1}, 2 * PIECE) == [0, 1]


def test_renamed_files_are_read_under_their_names(tmp_path):
    ti, blobs, out = dataset(tmp_path)
    (out / "other").mkdir()
    (out / "other" / "f1.root").write_bytes(blobs[1])
    names = {0: "other/f0.root", 1: "other/f1.root"}
    assert recover.find(ti, str(out), names, [False] * 8, {0, 1}, 2**30) == [5, 6, 7]


def test_claim_marks_the_pieces_had_and_drops_them_from_the_unfinished():
    class Params:
        have_pieces = [True, False]
        unfinished_pieces = {2: [True, False], 3: [True]}

    atp = Params()
    recover.claim(atp, [2, 4], 5)
    assert atp.have_pieces == [True, False, True, False, True]
    assert atp.unfinished_pieces == {3: [True]}
