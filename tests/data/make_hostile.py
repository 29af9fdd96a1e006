"""Write tests/data/hostile/: .torrent files that every reader must refuse.

Run `python tests/data/make_hostile.py` to regenerate; the files are
committed as bytes so any test (repository upload, bt-get, bt-server) can
feed them in without this script. `CASES` maps each file name to the
refusal `torrents.metainfo.parse` gives it (the text after `torrent: `);
tests/unit/test_metainfo.py checks both the message and that the bytes on
disk are what this script writes.

The encoder here is deliberately independent of torrents.bencoding: it
writes keys in the order given (so it can write duplicates and unsorted
keys) and never validates anything.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent / "hostile"
PIECE = 256 * 1024
HASH = b"\x5a" * 20


def enc(value: object) -> bytes:
    """Bencode without checks; a list of (key, value) pairs is a dict written in that order."""
    if isinstance(value, bool):
        raise TypeError("bool")
    if isinstance(value, int):
        return b"i%de" % value
    if isinstance(value, str):
        value = value.encode()
    if isinstance(value, bytes):
        return b"%d:%s" % (len(value), value)
    if isinstance(value, Pairs):
        return b"d" + b"".join(enc(k) + enc(v) for k, v in value) + b"e"
    if isinstance(value, dict):
        return enc(Pairs(sorted(value.items())))
    if isinstance(value, list):
        return b"l" + b"".join(enc(v) for v in value) + b"e"
    raise TypeError(type(value).__name__)


class Pairs(list):
    """A dict as an ordered list of (key, value): duplicates and any order allowed."""


def info(files: list | None = None, **over: object) -> dict:
    """A multi-file info dict with one piece per 256 KiB, overridable key by key."""
    files = files if files is not None else [{b"length": 1000, b"path": [b"a.root"]}]
    total = sum(f[b"length"] for f in files if isinstance(f, dict) and isinstance(f.get(b"length"), int))
    pieces = over.pop("pieces") if "pieces" in over else HASH * max(1, -(-total // PIECE))
    d: dict = {b"files": files, b"name": b"dataset", b"piece length": PIECE, b"pieces": pieces, b"private": 1}
    for k, v in over.items():
        key = k.replace("_", " ").encode()
        if v is None:
            d.pop(key, None)
        else:
            d[key] = v
    if pieces is None:
        del d[b"pieces"]
    return d


def torrent(info_value: object) -> bytes:
    return enc({b"announce": b"http://127.0.0.1:6969/announce", b"info": info_value})


def one(path: list, length: int = 1000, **extra: object) -> dict:
    """An info dict with a single file at `path`."""
    f = {b"length": length, b"path": path}
    f.update({k.replace("_", " ").encode(): v for k, v in extra.items()})
    return info([f])


def _valid() -> bytes:
    return torrent(info())


# name → (bytes, expected problem from metainfo.parse)
CASES: dict[str, tuple[bytes, str]] = {
    # unsafe paths
    "path_dotdot.torrent": (torrent(one([b"..", b"..", b"etc", b"passwd"])),
                            "unsafe path '../../etc/passwd' (path component '..' is not allowed)"),
    "path_dotdot_in_one_component.torrent": (torrent(one([b"../../etc/passwd"])),
                                             "unsafe path '../../etc/passwd' ('/' in path component)"),
    "path_absolute.torrent": (torrent(one([b"/etc/passwd"])), "unsafe path '/etc/passwd' ('/' in path component)"),
    "path_dot.torrent": (torrent(one([b".", b"a.root"])), "unsafe path './a.root' (path component '.' is not allowed)"),
    "path_empty_component.torrent": (torrent(one([b"a", b"", b"b.root"])),
                                     "unsafe path 'a//b.root' (path component '' is not allowed)"),
    "path_empty_list.torrent": (torrent(one([])), "file 0 has no path"),
    "path_nul.torrent": (torrent(one([b"a\x00b.root"])),
                         "unsafe path 'a\\x00b.root' (control character in path component)"),
    "path_escape_sequence.torrent": (torrent(one([b"evil\x1b[2J.root"])),
                                     "unsafe path 'evil\\x1b[2J.root' (control character in path component)"),
    "path_newline.torrent": (torrent(one([b"a\nb.root"])),
                             "unsafe path 'a\\nb.root' (control character in path component)"),
    "path_backslash.torrent": (torrent(one([b"..\\..\\windows"])),
                               "unsafe path '..\\\\..\\\\windows' (backslash in path component)"),
    "path_not_utf8.torrent": (torrent(one([b"\xff\xfe.root"])), "file 0: path is not UTF-8"),
    "path_not_string.torrent": (torrent(one([7])), "file 0: path is missing or not a string"),
    "symlink_attr.torrent": (torrent(one([b"link"], attr=b"l", symlink_path=[b"..", b"etc"])),
                             "link: unsafe symlink target '../etc' (path component '..' is not allowed)"),
    "symlink_path_key.torrent": (torrent(one([b"link"], symlink_path=[b"etc", b"passwd"])),
                                 "link: a symlink path without the 'l' attribute"),
    "duplicate_path.torrent": (torrent(info([{b"length": 1, b"path": [b"a.root"]},
                                             {b"length": 2, b"path": [b"a.root"]}])),
                               "duplicate path 'a.root'"),
    "file_dir_clash.torrent": (torrent(info([{b"length": 1, b"path": [b"a"]},
                                             {b"length": 2, b"path": [b"a", b"b.root"]}])),
                               "'a' is both a file and a directory"),
    # unsafe names
    "name_dotdot.torrent": (torrent(info(name=b"..")), "unsafe name '..' (path component '..' is not allowed)"),
    "name_slash.torrent": (torrent(info(name=b"../outside")), "unsafe name '../outside' ('/' in path component)"),
    "name_absolute.torrent": (torrent(info(name=b"/etc")), "unsafe name '/etc' ('/' in path component)"),
    "name_empty.torrent": (torrent(info(name=b"")), "unsafe name '' (path component '' is not allowed)"),
    "name_control.torrent": (torrent(info(name=b"data\x07set")),
                             "unsafe name 'data\\x07set' (control character in path component)"),
    "name_not_utf8.torrent": (torrent(info(name=b"data\xc3\x28set")), "name is not UTF-8"),
    "name_missing.torrent": (torrent(info(name=None)), "name is missing or not a string"),
    # sizes and pieces
    "pieces_for_a_petabyte.torrent": (
        # declares ~1 PiB in 256 KiB pieces: 4 billion hashes expected, one given
        torrent(info([{b"length": (1 << 50) - 1, b"path": [b"big.root"]}], pieces=HASH)),
        "1 piece hashes for 4294967296 pieces"),
    "pieces_string_huge.torrent": (
        # 100,000 hashes (2 MB, within every size limit) for a 1000-byte dataset
        torrent(info(pieces=HASH * 100_000)), "100000 piece hashes for 1 pieces"),
    "pieces_not_multiple_of_20.torrent": (torrent(info(pieces=HASH[:19])),
                                          "pieces is not a string of 20-byte hashes"),
    "pieces_missing.torrent": (torrent(info(pieces=None)), "pieces is not a string of 20-byte hashes"),
    "total_over_limit.torrent": (torrent(info([{b"length": 1 << 51, b"path": [b"huge.root"]}], pieces=HASH)),
                                 f"total size {1 << 51} is over the limit of {1 << 50}"),
    "length_negative.torrent": (torrent(one([b"a.root"], length=-1)), "file 0 has bad length -1"),
    "length_string.torrent": (torrent(info([{b"length": b"1000", b"path": [b"a.root"]}])),
                              "file 0 has bad length b'1000'"),
    "no_data.torrent": (torrent(info([{b"length": 0, b"path": [b"empty.root"]}], pieces=b"")),
                        "torrent has no data"),
    "files_empty.torrent": (torrent(info([])), "files is not a non-empty list"),
    "files_not_list.torrent": (torrent(info(files=b"a.root")), "files is not a non-empty list"),
    "file_not_dict.torrent": (torrent(info([b"a.root"])), "file 0 is not a dictionary"),
    "piece_length_zero.torrent": (torrent(info(piece_length=0)), "bad piece length 0"),
    "piece_length_negative.torrent": (torrent(info(piece_length=-PIECE)), f"bad piece length {-PIECE}"),
    "piece_length_not_power_of_two.torrent": (
        torrent(info(piece_length=300_000)), "piece length 300000 is not a power of two of at least 16 KiB"),
    "piece_length_tiny.torrent": (torrent(info(piece_length=1)),
                                  "piece length 1 is not a power of two of at least 16 KiB"),
    "piece_length_huge.torrent": (torrent(info(piece_length=1 << 40)), f"bad piece length {1 << 40}"),
    "piece_length_string.torrent": (torrent(info(piece_length=b"262144")), "bad piece length b'262144'"),
    "piece_length_missing.torrent": (torrent(info(piece_length=None)), "bad piece length None"),
    "single_file_no_length.torrent": (torrent({k: v for k, v in info().items() if k != b"files"}),
                                      "bad length None"),
    # structure
    "deep_nesting.torrent": (b"d4:info" + b"l" * 10_000 + b"e" * 10_000 + b"e",
                             "nested deeper than 32 at byte 38"),
    "deep_nesting_top.torrent": (b"l" * 10_000 + b"e" * 10_000, "nested deeper than 32 at byte 32"),
    "truncated.torrent": (_valid()[:len(_valid()) // 2], "string at byte 83 runs past the end"),
    "truncated_in_info.torrent": (_valid()[:-2], f"truncated at byte {len(_valid()) - 2}"),
    "trailing_data.torrent": (_valid() + b"<html>", f"6 bytes of trailing data after byte {len(_valid())}"),
    "not_a_dict.torrent": (b"l4:info4:spame", "not a dictionary"),
    "integer_top.torrent": (b"i42e", "not a dictionary"),
    "missing_info.torrent": (enc({b"announce": b"http://127.0.0.1:6969/announce"}), "no info dictionary"),
    "info_not_dict.torrent": (torrent([b"name", b"dataset"]), "no info dictionary"),
    "duplicate_info_key.torrent": (
        # the first info is hashed, a parser that keeps the last would write the second
        enc(Pairs([(b"info", info()), (b"info", info(name=b"other"))])),
        "duplicate dictionary key b'info' at byte 131"),
    "integer_key.torrent": (b"di1e4:spam4:infod4:name1:xee", "dictionary key at byte 1 is not a string"),
    "non_canonical_integer.torrent": (torrent(one([b"a.root"]))
                                      .replace(b"6:lengthi1000e", b"6:lengthi01000e"),
                                      "bad integer at byte 68"),
    "negative_zero.torrent": (torrent(one([b"a.root"])).replace(b"7:privatei1e", b"7:privatei-0e"),
                              "bad integer at byte 170"),
    "string_length_leading_zero.torrent": (b"d04:infoe", "bad string length at byte 1"),
    "empty.torrent": (b"", "empty input"),
    "html_page.torrent": (b"<!DOCTYPE html><html><body>Not Found</body></html>",
                          "unexpected byte 0x3c at byte 0"),
}


def build() -> dict[str, bytes]:
    return {name: data for name, (data, _) in CASES.items()}


def main() -> int:
    HERE.mkdir(exist_ok=True)
    wanted = build()
    for old in HERE.glob("*.torrent"):
        if old.name not in wanted:
            old.unlink()
    for name, data in wanted.items():
        (HERE / name).write_bytes(data)
    lines = ["# Hostile .torrent files", "",
             "Generated by `tests/data/make_hostile.py`; every one must be refused.", "",
             "| file | bytes | `torrents.metainfo.parse` says |", "|---|---|---|"]
    for name, (data, problem) in CASES.items():
        shown = problem.replace("|", "\\|")
        lines.append(f"| `{name}` | {len(data)} | `torrent: {shown}` |")
    (HERE / "README.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {len(wanted)} files to {HERE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
