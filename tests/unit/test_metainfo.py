"""torrents.metainfo: deterministic building, exact info-hashes, and refusing hostile files."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import random
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from torrents import bencoding, metainfo
from torrents.errors import MetainfoError
from torrents.metainfo import FileEntry, ReadLimits, dump, info_dict, parse, piece_length_for, with_url_list

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40
DATA = Path(__file__).resolve().parents[1] / "data"
HOSTILE = DATA / "hostile"
ANNOUNCE = "http://127.0.0.1:6969/announce"
SAMPLE = "data08_cos.00091949.physics_IDCosmic.merge.DPD_IDCOMM.o4_r653_p26_tid051203"


def _load_make_hostile():
    spec = importlib.util.spec_from_file_location("make_hostile", DATA / "make_hostile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_hostile = _load_make_hostile()


def sha1_pieces(blob: bytes, piece_length: int) -> bytes:
    return b"".join(hashlib.sha1(blob[i:i + piece_length]).digest() for i in range(0, len(blob), piece_length))


def real_torrent(files: dict[str, bytes], name: str = SAMPLE, private: bool = True, piece_length: int = 16 * KiB,
                 **dump_args) -> tuple[bytes, dict]:
    """A .torrent over in-memory file contents, hashed here (not by torrents.build)."""
    blob = b"".join(files[lfn] for lfn in sorted(files))
    info = info_dict(name, [(lfn, len(data)) for lfn, data in files.items()], piece_length,
                     sha1_pieces(blob, piece_length), private=private)
    return dump(info, **dump_args), info


FILES = {
    "DPD_IDCOMM.051203._00002.pool.root.1": bytes(range(256)) * 100,
    "DPD_IDCOMM.051203._00001.pool.root.1": b"\x07" * 40_000,
    "log/job.log.tgz": b"log" * 1000,
}


# piece length: a function of the total size alone

@pytest.mark.parametrize("total, expected", [
    (0, 256 * KiB),
    (1, 256 * KiB),
    (512 * MiB, 256 * KiB),  # exactly 2048 pieces of 256 KiB
    (512 * MiB + 1, 512 * KiB),
    (25 * GiB, 16 * MiB),  # the 2009 prototype's dataset: 1600 pieces
    (32 * GiB, 16 * MiB),
    (1 * TiB, 16 * MiB),  # past 32 GiB the count grows instead of the piece
])
def test_piece_length_for_known_sizes(total, expected):
    assert piece_length_for(total) == expected


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 1 << 50), st.integers(0, 1 << 50))
def test_piece_length_is_a_bounded_monotonic_power_of_two(a, b):
    small, big = sorted((a, b))
    length = piece_length_for(small)
    assert 256 * KiB <= length <= 16 * MiB
    assert length & (length - 1) == 0
    assert piece_length_for(big) >= length
    if length < 16 * MiB:
        assert metainfo.piece_count(small, length) <= 2048
    if length > 256 * KiB:  # the smallest length that keeps the count in bounds
        assert metainfo.piece_count(small, length // 2) > 2048


# info dict: deterministic, announce outside it

@settings(max_examples=50, deadline=None)
@given(st.randoms(use_true_random=False))
def test_info_dict_does_not_depend_on_input_order(rnd):
    files = [(f"DPD_IDCOMM.051203._{i:05d}.pool.root.1", 1000 + i) for i in range(1, 30)] + [("sub/dir/x", 5)]
    shuffled = files[:]
    rnd.shuffle(shuffled)
    a = bencoding.encode(info_dict(SAMPLE, files, 256 * KiB, b"\x00" * 20))
    b = bencoding.encode(info_dict(SAMPLE, shuffled, 256 * KiB, b"\x00" * 20))
    assert a == b


def test_info_dict_has_no_date_creator_or_announce():
    info = info_dict(SAMPLE, [("b", 2), ("a", 1)], 256 * KiB, b"\x00" * 20)
    assert set(info) == {b"files", b"name", b"piece length", b"pieces", b"private"}
    assert info[b"files"] == [{b"length": 1, b"path": [b"a"]}, {b"length": 2, b"path": [b"b"]}]
    assert info[b"private"] == 1


def test_private_flag():
    data, _ = real_torrent(FILES, private=True)
    assert parse(data).private is True
    data, info = real_torrent(FILES, private=False)
    assert b"private" not in info
    assert parse(data).private is False


def test_private_zero_is_not_private():
    _, info = real_torrent(FILES, private=False)
    info[b"private"] = 0
    assert parse(dump(info)).private is False


# round trip

def test_dump_then_parse_round_trip():
    data, info = real_torrent(FILES, announce=ANNOUNCE, url_list=["http://127.0.0.2:8000/"], comment="test")
    m = parse(data)
    assert m.name == SAMPLE
    assert [f.lfn for f in m.files] == sorted(FILES)
    assert m.files[2] == FileEntry(("log", "job.log.tgz"), 3000)
    assert m.total_size == sum(len(v) for v in FILES.values())
    assert m.piece_length == 16 * KiB
    assert m.num_pieces == -(-m.total_size // (16 * KiB))
    blob = b"".join(FILES[k] for k in sorted(FILES))
    assert m.piece_hash(0) == hashlib.sha1(blob[:16 * KiB]).digest()
    assert m.piece_hash(m.num_pieces - 1) == hashlib.sha1(blob[(m.num_pieces - 1) * 16 * KiB:]).digest()
    assert m.private is True
    assert m.announce == ANNOUNCE
    assert m.url_list == ("http://127.0.0.2:8000/",)
    assert m.trackers() == [ANNOUNCE]
    assert m.single_file is False
    assert m.info_hash_v2 is None
    assert m.info_bytes == bencoding.encode(info)
    assert m.info_hash == hashlib.sha1(bencoding.encode(info)).hexdigest()


def test_announce_is_outside_the_info_hash():
    a, _ = real_torrent(FILES, announce=ANNOUNCE)
    b, _ = real_torrent(FILES, announce="http://tracker.example:6969/announce", comment="other")
    assert a != b
    assert parse(a).info_hash == parse(b).info_hash


def test_two_sites_compute_the_same_info_hash():
    reordered = dict(reversed(list(FILES.items())))
    assert parse(real_torrent(FILES)[0]).info_hash == parse(real_torrent(reordered)[0]).info_hash


def test_info_hash_is_sha1_of_the_exact_info_bytes_in_a_non_canonical_file():
    info = (b"d4:name6:sample12:piece lengthi16384e6:lengthi5e6:pieces20:" + hashlib.sha1(b"hello").digest()
            + b"e")  # keys not sorted: re-encoding would give other bytes
    data = b"d4:info" + info + b"8:announce" + bencoding.encode(ANNOUNCE.encode()) + b"7:comment1:xe"
    m = parse(data)
    assert m.info_bytes == info
    assert m.info_hash == hashlib.sha1(info).hexdigest()
    assert m.info_hash != hashlib.sha1(bencoding.encode(bencoding.decode(info))).hexdigest()
    assert m.announce == ANNOUNCE
    assert m.single_file is True


def test_single_file_torrent():
    payload = b"event data" * 5000
    info = {b"length": len(payload), b"name": b"DPD_IDCOMM.051203._00001.pool.root.1",
            b"piece length": 16 * KiB, b"pieces": sha1_pieces(payload, 16 * KiB)}
    m = parse(dump(info, announce=ANNOUNCE))
    assert m.single_file is True
    assert m.files == (FileEntry(("DPD_IDCOMM.051203._00001.pool.root.1",), len(payload)),)
    assert m.total_size == 50_000
    assert m.num_pieces == 4
    assert m.private is False


def test_utf8_name_and_path_keys_are_preferred():
    _, info = real_torrent({"a": b"x"})
    info[b"name"] = b"legacy \xe9"  # latin-1 from an old client
    info[b"name.utf-8"] = "café".encode()
    info[b"files"][0][b"path.utf-8"] = ["é.root".encode()]
    m = parse(dump(info))
    assert m.name == "café"
    assert m.files[0].lfn == "é.root"


def test_hybrid_pad_files_and_v2_hash():
    files = [{b"length": 10, b"path": [b"a.root"]},
             {b"attr": b"p", b"length": 16 * KiB - 10, b"path": [b".pad", b"16374"]},
             {b"length": 10, b"path": [b"b.root"]}]
    info = {b"files": files, b"meta version": 2, b"name": b"hybrid", b"piece length": 16 * KiB,
            b"pieces": b"\x01" * 40}
    data = dump(info)
    m = parse(data)
    assert [f.lfn for f in m.data_files] == ["a.root", "b.root"]
    assert m.files[1].pad is True
    assert m.total_size == 16 * KiB + 10
    assert m.info_hash_v2 == hashlib.sha256(bencoding.encode(info)).hexdigest()


def test_announce_list_and_trackers():
    _, info = real_torrent(FILES)
    top = {b"announce": ANNOUNCE.encode(), b"info": info,
           b"announce-list": [[ANNOUNCE.encode(), b"http://t2/announce"], [b"udp://t3:80"], b"junk"]}
    m = parse(bencoding.encode(top))
    assert m.announce_list == ((ANNOUNCE, "http://t2/announce"), ("udp://t3:80",))
    assert m.trackers() == [ANNOUNCE, "http://t2/announce", "udp://t3:80"]


@pytest.mark.parametrize("url_list, expected", [
    (b"http://seed/", ("http://seed/",)),
    ([b"http://a/", b"\xff", 3], ("http://a/",)),
    (7, ()),
    ({b"k": b"v"}, ()),
])
def test_url_list_forms(url_list, expected):
    _, info = real_torrent(FILES)
    assert parse(bencoding.encode({b"info": info, b"url-list": url_list})).url_list == expected


def test_magnet_link():
    data, _ = real_torrent(FILES, announce=ANNOUNCE)
    m = parse(data)
    assert m.magnet() == (f"magnet:?xt=urn:btih:{m.info_hash}&dn={SAMPLE}"
                          "&tr=http%3A%2F%2F127.0.0.1%3A6969%2Fannounce")
    assert len(m.info_hash) == 40 and m.info_hash == m.info_hash.lower()


def test_magnet_quotes_the_name():
    _, info = real_torrent(FILES)
    info[b"name"] = "run 1&2 é".encode()
    assert parse(dump(info)).magnet().split("&")[1] == "dn=run%201%262%20%C3%A9"


def test_subject_names_the_file():
    with pytest.raises(MetainfoError) as info:
        parse(b"l4:infoe", subject="site1/x.torrent")
    assert str(info.value) == "site1/x.torrent: not a dictionary"
    assert info.value.subject == "site1/x.torrent"


def test_from_base64():
    data, _ = real_torrent(FILES)
    assert metainfo.from_base64(base64.b64encode(data).decode()) == data
    with pytest.raises(MetainfoError) as info:
        metainfo.from_base64("not base64!")
    assert str(info.value) == "torrent: not valid base64"


# limits

def test_byte_limit():
    data, _ = real_torrent(FILES)
    with pytest.raises(MetainfoError) as info:
        parse(data, ReadLimits(max_bytes=100))
    assert str(info.value) == f"torrent: {len(data)} bytes is over the limit of 100"


def test_file_count_limit():
    data, _ = real_torrent(FILES)
    with pytest.raises(MetainfoError) as info:
        parse(data, ReadLimits(max_files=2))
    assert str(info.value) == "torrent: 3 files is over the limit of 2"


def test_two_million_and_one_pieces_are_refused_before_anything_else():
    info = {b"length": 1, b"name": b"x", b"piece length": 16 * KiB, b"pieces": bytes(20 * 2_000_001)}
    with pytest.raises(MetainfoError) as exc:
        parse(bencoding.encode({b"info": info}))
    assert str(exc.value) == "torrent: 2000001 pieces is over the limit of 2000000"


def test_depth_limit_is_a_metainfo_error():
    with pytest.raises(MetainfoError) as info:
        parse(b"d4:info" + b"l" * 100_000 + b"e" * 100_000 + b"e")
    assert str(info.value) == "torrent: nested deeper than 32 at byte 38"


# the hostile corpus

def test_hostile_corpus_on_disk_is_what_the_script_writes():
    on_disk = {p.name: p.read_bytes() for p in HOSTILE.glob("*.torrent")}
    assert on_disk == make_hostile.build()
    assert len(on_disk) >= 50


@pytest.mark.parametrize("name", sorted(make_hostile.CASES))
def test_every_hostile_file_is_refused_with_a_clear_message(name):
    data = (HOSTILE / name).read_bytes()
    with pytest.raises(MetainfoError) as info:
        parse(data, subject=name)
    assert str(info.value) == f"{name}: {make_hostile.CASES[name][1]}"


def test_the_corpus_differs_from_a_valid_torrent_only_in_what_it_tests():
    # the generator's valid baseline parses, so each refusal is due to its one defect
    m = parse(make_hostile.torrent(make_hostile.info()))
    assert m.name == "dataset" and m.total_size == 1000


# property tests: anything that is not a good torrent is a MetainfoError

@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_raise_only_metainfo_error(data):
    try:
        parse(data)
    except MetainfoError:
        pass


BASE, _ = real_torrent({"a/b.root": b"a" * 20_000, "c.root": b"c" * 30})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(BASE) - 1), st.integers(0, 255)), min_size=1, max_size=5),
       st.integers(0, len(BASE)))
def test_mutated_torrents_raise_only_metainfo_error(edits, cut):
    raw = bytearray(BASE)
    for where, byte in edits:
        raw[where] = byte
    try:
        m = parse(bytes(raw[:cut]))
    except MetainfoError:
        return
    assert m.info_hash == hashlib.sha1(m.info_bytes).hexdigest()


torrent_keys = st.sampled_from([b"info", b"files", b"name", b"name.utf-8", b"piece length", b"pieces", b"length",
                                b"path", b"path.utf-8", b"attr", b"private", b"announce", b"announce-list",
                                b"url-list", b"meta version", b"symlink path"])
small = (st.integers(-2, 2) | st.just(16 * KiB) | st.sampled_from([b"", b"a", b"..", b"/x", b"p", b"l", b"\xff"])
         | st.binary(min_size=20, max_size=20))
structures = st.recursive(small, lambda c: st.lists(c, max_size=3) | st.dictionaries(torrent_keys, c, max_size=5),
                          max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(torrent_keys, structures, max_size=5))
def test_torrent_shaped_structures_raise_only_metainfo_error(top):
    try:
        m = parse(bencoding.encode(top))
    except MetainfoError:
        return
    for f in m.data_files:  # anything accepted is safe to write
        assert all(p not in ("", ".", "..") and "/" not in p for p in f.path)


def test_a_valid_torrent_with_random_file_names_parses():
    rnd = random.Random(7)
    files = {f"d{rnd.randrange(5)}/f{i}.root": bytes([i]) * rnd.randrange(1, 5000) for i in range(40)}
    m = parse(real_torrent(files)[0])
    assert [f.lfn for f in m.files] == sorted(files)


# memory and speed of large file lists: held by column, not as objects

def many_file_torrent(count: int) -> bytes:
    files = [(f"run{i // 1000:03d}/evt.{i:06d}.root", 1 + i % 7) for i in range(count)]
    total = sum(size for _, size in files)
    pieces = b"\x00" * (HASH_LEN * metainfo.piece_count(total, 16 * KiB))
    return dump(info_dict("big.dataset", files, 16 * KiB, pieces))


HASH_LEN = metainfo.HASH_LEN


def test_a_50000_file_torrent_costs_little_memory_per_file():
    import gc
    import tracemalloc

    data = many_file_torrent(50_000)
    gc.collect()
    tracemalloc.start()
    try:
        meta = parse(data)
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # its LFN strings, 8 bytes of length each and the info bytes; not an object per file
    assert held < len(data) + 160 * 50_000, held
    assert len(meta.files) == 50_000 and meta.file_count == 50_000
    assert meta.files[12345] == FileEntry(("run012", "evt.012345.root"), 1 + 12345 % 7)
    assert meta.files[-1].lfn == "run049/evt.049999.root" and meta.files.lfns[-1] == meta.files[-1].lfn
    assert meta.total_size == sum(1 + i % 7 for i in range(50_000)) == sum(f.length for f in meta.files)
    assert len(repr(meta)) < 200  # a repr of every file would take seconds (asyncio makes one of task results)


def test_file_list_equals_the_entries_it_was_made_from():
    entries = (FileEntry(("a", "x"), 3), FileEntry(("b",), 0, symlink=("a", "x")),
               FileEntry((".pad", "1"), 5, pad=True))
    files = metainfo.FileList.of(entries)
    assert files == entries and tuple(files) == entries and files[1:] == entries[1:]
    assert files.total == 8 and files.data_count == 2 and files.is_pad(2) and not files.is_pad(0)


names = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"), min_size=1, max_size=8)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.lists(names, min_size=1, max_size=3).map("/".join), st.integers(0, 10**12), min_size=1,
                       max_size=8),
       st.dictionaries(st.lists(names, min_size=1, max_size=3).map("/".join), st.lists(names, min_size=1, max_size=3)
                       .map("/".join), max_size=3),
       st.booleans(), st.one_of(st.none(), st.text(min_size=1, max_size=20)), st.lists(st.text(min_size=1), max_size=2),
       st.one_of(st.none(), st.text(min_size=1, max_size=20)))
def test_encoded_directly_is_the_same_bytes_as_the_dict_encoded(files, links, private, announce, urls, comment):
    links = {k: v for k, v in links.items() if k not in files}
    texts = {k: "./" + v for k, v in list(links.items())[:1]}  # any text: the encoders only carry it
    pieces = b"\x07" * 40
    as_dict = info_dict("ds", list(files.items()), 16 * KiB, pieces, private, links, texts)
    direct = metainfo.encode_info("ds", list(files.items()), 16 * KiB, pieces, private, links, texts)
    assert direct == bencoding.encode(as_dict)
    assert metainfo.dump_encoded(direct, announce, urls, comment) == dump(as_dict, announce, urls, comment)


def test_with_url_list_keeps_the_info_bytes_as_they_are_and_replaces_only_what_it_is_told():
    # An info dict in a non-canonical key order (as some third-party builder might write it): decoding and
    # encoding it again would change the info-hash; with_url_list copies its bytes.
    info = b"d6:pieces20:" + b"\x01" * 20 + b"4:name2:ds12:piece lengthi16384e5:filesld6:lengthi10e4:pathl1:aeeee"
    data = b"d8:announce9:http://t/4:info" + info + b"8:url-listl9:http://o/9:http://s/ee"
    meta = parse(data)
    out = with_url_list(data, ["http://new/", "http://o/"], drop=["http://s/"])
    again = parse(out)
    assert again.info_bytes == info and again.info_hash == meta.info_hash
    assert again.url_list == ("http://new/", "http://o/") and again.announce == "http://t/"
    assert parse(with_url_list(data, [], drop=["http://o/", "http://s/"])).url_list == ()
    assert b"url-list" not in with_url_list(data, [], drop=["http://o/", "http://s/"])


def _linked(text: bytes) -> bytes:
    return bencoding.encode({b"info": {b"name": b"ds", b"piece length": 16 * KiB, b"pieces": b"\x01" * 20,
                                       b"files": [{b"length": 10, b"path": [b"a", b"x"]},
                                                  {b"attr": b"l", b"length": 0, b"path": [b"b", b"y"],
                                                   b"symlink path": [b"a", b"x"], b"symlink text": text}]}})


def test_a_links_own_text_is_carried_when_it_leads_to_its_target():
    meta = parse(_linked(b"./../a/./x"))
    link = meta.files[1]
    assert (link.target, link.link_text) == ("a/x", "./../a/./x")


@pytest.mark.parametrize("text", [b"../../etc/passwd", b"/a/x", b"../a/other", b"../a/x\x01", b"."])
def test_a_link_text_leading_elsewhere_than_its_symlink_path_is_refused(text):
    with pytest.raises(MetainfoError, match=r"b/y: symlink text .* does not lead to 'a/x'"):
        parse(_linked(text))
