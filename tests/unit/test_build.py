"""The parallel torrent builder: same pieces and info-hash as libtorrent, loads everywhere, fails by name."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import libtorrent as lt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from torrents import metainfo
from torrents.build import build_torrent, hash_pieces, hybrid_order_clash, plan_segments
from torrents.errors import DatasetError

PIECE = 32 * 1024
TRANSMISSION_SHOW = "/usr/bin/transmission-show"

# LFN → size. Nested directories, a zero-length file, a file spanning many
# pieces, and names whose order differs between string and path sorting
# ("a-b" < "a/b" < "a0" as strings).
LAYOUT = {
    "a-b": 5_000,
    "a/b/c.pool.root.1": 40_000,
    "a/b/d/deep.root": 1,
    "a0": 0,
    "big.pool.root.1": 2 * 1024 * 1024 + 12_345,
    "z/empty": 0,
    "z/y/x": 3 * PIECE,
}


def write_dataset(root: Path, layout: dict[str, int], seed: int = 1) -> list[tuple[str, Path]]:
    rng = random.Random(seed)
    entries = []
    for lfn, size in layout.items():
        path = root / lfn
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rng.randbytes(size))
        entries.append((lfn, path))
    return entries


def libtorrent_info_hash(directory: Path, piece_length: int, private: bool = True) -> str:
    """The v1 info-hash libtorrent computes for a directory, files sorted by LFN."""
    entries = sorted(lt.list_files(str(directory)), key=lambda e: e.filename)
    ct = lt.create_torrent(entries, piece_length, lt.create_torrent.v1_only)
    ct.set_priv(private)
    lt.set_piece_hashes(ct, str(directory.parent))
    return str(lt.torrent_info(ct.generate()).info_hashes().v1)


def reference_pieces(entries: list[tuple[str, Path]], piece_length: int) -> bytes:
    data = b"".join(p.read_bytes() for _, p in sorted(entries))
    return b"".join(hashlib.sha1(data[i:i + piece_length]).digest() for i in range(0, len(data), piece_length))


@pytest.fixture
def dataset(tmp_path: Path) -> tuple[Path, list[tuple[str, Path]]]:
    root = tmp_path / "data08_cos.sample"
    return root, write_dataset(root, LAYOUT)


@pytest.mark.parametrize("threads", [1, 2, 7])
def test_info_hash_equals_libtorrent(dataset, threads):
    root, entries = dataset
    data, meta = build_torrent(root.name, entries, piece_length=PIECE, threads=threads)
    assert meta.info_hash == libtorrent_info_hash(root, PIECE)
    assert [f.lfn for f in meta.files] == sorted(LAYOUT)
    assert meta.num_pieces == metainfo.piece_count(sum(LAYOUT.values()), PIECE)


def test_default_piece_size_and_determinism(dataset):
    root, entries = dataset
    first, meta = build_torrent(root.name, entries, announce="http://127.0.0.1:1/announce")
    again, _ = build_torrent(root.name, list(reversed(entries)), announce="http://127.0.0.1:1/announce", threads=1)
    assert first == again
    assert meta.piece_length == metainfo.piece_length_for(sum(LAYOUT.values()))
    assert meta.info_hash == libtorrent_info_hash(root, meta.piece_length)
    other_tracker, _ = build_torrent(root.name, entries, announce="http://127.0.0.2:2/announce")
    assert metainfo.parse(other_tracker).info_hash == meta.info_hash


@pytest.mark.parametrize("piece_length", [16 * 1024, 100_000, 2 * 1024 * 1024, 4 * 1024 * 1024])
@pytest.mark.parametrize("threads", [1, 3])
def test_pieces_equal_hashing_the_concatenation(dataset, piece_length, threads):
    # 100_000 is not a power of two and 2-4 MiB pieces take several reads each:
    # piece boundaries fall anywhere relative to reads and files.
    _, entries = dataset
    files = [(p, LAYOUT[lfn]) for lfn, p in sorted(entries)]
    assert hash_pieces(files, piece_length, threads=threads) == reference_pieces(entries, piece_length)


def test_many_small_files_equal_libtorrent(tmp_path):
    rng = random.Random(7)
    layout = {f"d{i % 13:02d}/f{i:05d}.root": rng.randint(1, 3000) for i in range(3000)}
    root = tmp_path / "small"
    entries = write_dataset(root, layout)
    _, meta = build_torrent(root.name, entries, piece_length=16 * 1024)
    assert meta.info_hash == libtorrent_info_hash(root, 16 * 1024)
    assert len(meta.files) == 3000


def test_progress_adds_up_in_the_calling_thread(dataset):
    _, entries = dataset
    calls: list[tuple[int, str]] = []
    build_torrent("ds", entries, piece_length=PIECE, threads=2,
                  progress=lambda n: calls.append((n, threading.current_thread().name)))
    assert sum(n for n, _ in calls) == sum(LAYOUT.values())
    assert all(n > 0 for n, _ in calls)
    assert {name for _, name in calls} == {threading.current_thread().name}


def test_missing_file_is_named(dataset):
    _, entries = dataset
    gone = dict(entries)["z/y/x"]
    gone.unlink()
    with pytest.raises(DatasetError) as err:
        hash_pieces([(p, LAYOUT[lfn]) for lfn, p in sorted(entries)], PIECE, threads=2)
    assert str(err.value) == f"{gone}: cannot read (No such file or directory)"


def test_missing_empty_file_is_named(dataset):
    _, entries = dataset
    gone = dict(entries)["z/empty"]
    gone.unlink()
    with pytest.raises(DatasetError, match="z/empty: cannot read"):
        hash_pieces([(p, LAYOUT[lfn]) for lfn, p in sorted(entries)], PIECE)


def test_size_change_is_named(dataset):
    _, entries = dataset
    changed = dict(entries)["big.pool.root.1"]
    with open(changed, "ab") as f:
        f.write(b"grown")
    expected = LAYOUT["big.pool.root.1"]
    with pytest.raises(DatasetError) as err:
        hash_pieces([(p, LAYOUT[lfn]) for lfn, p in sorted(entries)], PIECE, threads=2)
    assert str(err.value) == f"{changed}: size changed: expected {expected}, found {expected + 5}"
    assert err.value.subject == str(changed)


def test_returned_metainfo_is_what_the_file_parses_to(dataset):
    root, entries = dataset
    for announce, urls, private in [("http://127.0.0.1:1/announce", ("http://127.0.0.1:2/data/",), True),
                                    (None, (), False)]:
        data, meta = build_torrent(root.name, entries, announce=announce, url_list=urls, private=private)
        assert meta == metainfo.parse(data)


def test_unsafe_or_clashing_names_are_refused_before_hashing(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"x")
    with pytest.raises(DatasetError, match=r"^\.\./etc: path component '\.\.' is not allowed$"):
        build_torrent("ds", [("../etc", f)])
    with pytest.raises(DatasetError, match=r"^ds/a: is both a file and a directory$"):
        build_torrent("ds", [("a", f), ("a/b", f)])


def test_dataset_of_empty_files_is_refused(tmp_path):
    (tmp_path / "e").write_bytes(b"")
    with pytest.raises(DatasetError, match=r"^ds: dataset has no data \(every file is empty\)$"):
        build_torrent("ds", [("e", tmp_path / "e")])


def test_build_of_missing_entry_is_named(tmp_path):
    with pytest.raises(DatasetError, match=r"nothing\.root: cannot read \(No such file or directory\)"):
        build_torrent("ds", [("x", tmp_path / "nothing.root")])


def test_written_torrent_loads_in_libtorrent(dataset, tmp_path):
    root, entries = dataset
    data, meta = build_torrent(root.name, entries, announce="http://127.0.0.1:6969/announce")
    path = tmp_path / "ds.torrent"
    path.write_bytes(data)
    ti = lt.torrent_info(str(path))
    assert str(ti.info_hashes().v1) == meta.info_hash
    assert ti.priv()
    layout = ti.layout()
    got = {layout.file_path(i): layout.file_size(i) for i in range(layout.num_files())}
    assert got == {os.path.join(root.name, *lfn.split("/")): size for lfn, size in LAYOUT.items()}
    assert lt.load_torrent_file(str(path)).trackers == ["http://127.0.0.1:6969/announce"]


def test_written_torrent_loads_in_transmission_show(dataset, tmp_path):
    if not os.path.exists(TRANSMISSION_SHOW):
        pytest.fail(f"{TRANSMISSION_SHOW}: not installed (the transmission-cli package; .ci/run installs it)")
    root, entries = dataset
    data, meta = build_torrent(root.name, entries, announce="http://127.0.0.1:6969/announce")
    path = tmp_path / "ds.torrent"
    path.write_bytes(data)
    out = subprocess.run([TRANSMISSION_SHOW, str(path)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert f"Hash: {meta.info_hash}" in out.stdout
    assert "Private torrent" in out.stdout
    assert f"Piece Count: {meta.num_pieces}" in out.stdout
    for lfn in LAYOUT:
        assert f"{root.name}/{lfn} (" in out.stdout


def test_hybrid_has_both_hashes(tmp_path):
    layout = {lfn: size for lfn, size in LAYOUT.items() if lfn != "a-b"}
    root = tmp_path / "data08_cos.sample"
    entries = write_dataset(root, layout)
    data, meta = build_torrent(root.name, entries, hybrid=True, announce="http://127.0.0.1:1/announce",
                               piece_length=PIECE, progress=lambda n: None)
    parsed = metainfo.parse(data)
    assert parsed.info_hash_v2 is not None and len(parsed.info_hash_v2) == 64
    assert parsed.private and parsed.announce == "http://127.0.0.1:1/announce"
    assert {f.lfn: f.length for f in parsed.data_files} == layout
    hashes = lt.torrent_info(data).info_hashes()
    assert (str(hashes.v1), str(hashes.v2)) == (meta.info_hash, meta.info_hash_v2)
    # the v1 part is hashed over padded files, so it is not the plain v1 torrent
    assert meta.info_hash != build_torrent(root.name, entries, piece_length=PIECE)[1].info_hash
    assert build_torrent(root.name, entries, hybrid=True, piece_length=PIECE)[0] == \
        build_torrent(root.name, entries, hybrid=True, piece_length=PIECE, announce=None)[0]


def test_hybrid_refuses_names_libtorrent_orders_two_ways(dataset):
    root, entries = dataset
    with pytest.raises(DatasetError) as err:
        build_torrent(root.name, entries, hybrid=True)
    assert str(err.value) == (f"{root.name}: no hybrid torrent: 'a-b' and 'a/b/c.pool.root.1' sort differently "
                              "in v1 and v2 (libtorrent would write a torrent it cannot load); build v1 only")


@pytest.mark.parametrize("lfns,clash", [
    (["a", "b/c", "d"], None),
    (["x/1", "x.1"], ("x.1", "x/1")),
    (["dir/f", "dir0"], None),
])
def test_hybrid_order_clash(lfns, clash):
    assert hybrid_order_clash(lfns) == clash


def test_importing_build_loads_no_libtorrent():
    code = "import sys, torrents.build; sys.exit('libtorrent' in sys.modules or 'aiohttp' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


@pytest.mark.parametrize("pieces,count", [(1, 8), (10, 3), (2048, 16), (5, 5), (7, 100)])
def test_plan_segments_cover_every_piece_once(pieces, count):
    segments = plan_segments(pieces, count)
    assert len(segments) == min(pieces, count)
    assert segments[0][0] == 0 and segments[-1][1] == pieces
    assert all(a[1] == b[0] for a, b in zip(segments, segments[1:]))
    sizes = [end - first for first, end in segments]
    assert max(sizes) - min(sizes) <= 1


def test_mktorrent_agrees(dataset, tmp_path):
    mktorrent = shutil.which("mktorrent")
    if mktorrent is None:
        pytest.fail("mktorrent: not installed (the mktorrent package; .ci/run installs it)")
    root, entries = dataset
    out = tmp_path / "mk.torrent"
    subprocess.run([mktorrent, "-p", "-l", "15", "-a", "http://127.0.0.1:1/announce", "-o", str(out), str(root)],
                   check=True, capture_output=True, timeout=60)
    assert metainfo.parse(out.read_bytes()).info_hash == \
        build_torrent(root.name, entries, piece_length=PIECE)[1].info_hash


def test_benchmark_script_runs_and_agrees(tmp_path):
    # The benchmark fails if any builder's info-hash differs from ours.
    script = Path(__file__).resolve().parents[2] / "scripts" / "bench_build.py"
    out = tmp_path / "build.json"
    proc = subprocess.run([sys.executable, str(script), "--large-size", "3M", "--large-files", "3",
                           "--small-files", "40", "--runs", "1", "--dir", str(tmp_path / "data"),
                           "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert [r["set"] for r in doc["results"]] == ["large", "small"]
    assert doc["results"][1]["files"] == 40
    assert "btswarm / mktorrent -t" in proc.stdout
    assert list((tmp_path / "data").iterdir()) == []  # generated data deleted without --keep


# --- content sums: xxh3 over 1 MiB file blocks, adler32 -------------------------------------

def reference_sums(path: Path) -> tuple[str, str]:
    """Each file on its own: xxh3-128 over xxh3-128 digests of its 1 MiB blocks; zlib's adler32."""
    import zlib

    import xxhash

    from torrents.build import SUM_BLOCK
    data = path.read_bytes()
    blocks = [xxhash.xxh3_128(data[i:i + SUM_BLOCK]).digest() for i in range(0, len(data), SUM_BLOCK)]
    return xxhash.xxh3_128(b"".join(blocks)).hexdigest(), f"{zlib.adler32(data) & 0xFFFFFFFF:08x}"


@pytest.mark.parametrize("threads, piece_length", [(1, 16 * 1024), (2, 16 * 1024), (7, PIECE), (3, 256 * 1024)])
def test_content_sums_do_not_depend_on_how_the_work_was_cut(dataset, threads, piece_length):
    from torrents.build import build_dataset
    root, entries = dataset
    built = build_dataset(root.name, entries, piece_length=piece_length, threads=threads, adler32=True)
    assert sorted(built.sums) == sorted(LAYOUT)
    for lfn, path in entries:
        xxh, adler = reference_sums(path)
        assert (built.sums[lfn].size, built.sums[lfn].xxh3, built.sums[lfn].adler32) == (LAYOUT[lfn], xxh, adler), lfn


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_content_sums_of_blocks_cut_by_segments_and_reads(tmp_path, threads):
    # A first file of 0.8 MiB shifts the second file's 1 MiB blocks off the 1 MiB reads, and
    # 256 KiB pieces over 20 MiB make segments longer than a read: a block cut by a segment's
    # edge then arrives there in two reads.
    from torrents.build import build_dataset
    entries = write_dataset(tmp_path / "ds", {"a": 800 * 1024, "b": 20 * 2**20 + 123, "c": 3 * 2**20})
    built = build_dataset("ds", entries, piece_length=256 * 1024, threads=threads, adler32=True)
    for lfn, path in entries:
        assert (built.sums[lfn].xxh3, built.sums[lfn].adler32) == reference_sums(path), lfn


def test_content_sums_tell_replicas_apart_file_by_file(tmp_path):
    from torrents.build import build_dataset
    a = write_dataset(tmp_path / "a" / "ds", LAYOUT)
    b = write_dataset(tmp_path / "b" / "ds", LAYOUT)
    flipped = tmp_path / "b" / "ds" / "big.pool.root.1"
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0x01
    flipped.write_bytes(bytes(data))
    sa, sb = build_dataset("ds", a, adler32=True).sums, build_dataset("ds", b, adler32=True).sums
    assert [lfn for lfn in sorted(LAYOUT) if sa[lfn] != sb[lfn]] == ["big.pool.root.1"]
    # a file's sum is its own: the same file in a dataset with other files sums the same
    fewer = build_dataset("ds", [e for e in a if e[0] != "a-b"], threads=2).sums
    assert all(fewer[lfn].xxh3 == sa[lfn].xxh3 for lfn in fewer)
    assert build_dataset("ds", a).sums["a-b"].adler32 is None  # not asked for


@given(st.binary(max_size=5000), st.binary(max_size=5000))
def test_adler32_combine_is_zlibs(first, second):
    import zlib

    from torrents.build import adler32_combine
    assert adler32_combine(zlib.adler32(first), zlib.adler32(second), len(second)) == zlib.adler32(first + second)
