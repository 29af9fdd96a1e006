"""Torrent metainfo (BEP 3, 12, 27, 19; hybrid v1+v2 recognised): pure, no I/O.

Building: `piece_length_for(total)` is a function of the total size alone,
and `info_dict` lists files in LFN order with no creation date or creator,
so two sites that hold the same files compute the same info-hash on their
own. Reading: `parse` refuses anything unsafe to write to disk (absolute,
`..`, empty or control-character path components, symlinks whose target
is not a safe path inside the torrent, duplicate paths) or absurd in size,
with a `subject: problem` error. Symlinks (BEP 47 `attr` "l" with a
`symlink path` relative to the torrent's root) carry no bytes.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from array import array
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Mapping, Sequence, overload
from urllib.parse import quote

from torrents import bencoding
from torrents.dataset import check_component, link_target
from torrents.errors import BencodeError, DatasetError, MetainfoError

MIN_PIECE = 256 * 1024
MAX_PIECE = 16 * 1024 * 1024
TARGET_PIECES = 2048
HASH_LEN = 20


@dataclass(frozen=True)
class ReadLimits:
    max_bytes: int = 64 * 1024 * 1024
    max_pieces: int = 2_000_000
    max_files: int = 1_000_000
    max_total: int = 1 << 50  # 1 PiB
    max_piece_length: int = 256 * 1024 * 1024
    max_depth: int = 32


DEFAULT_READ_LIMITS = ReadLimits()


def piece_length_for(total_size: int) -> int:
    """Smallest power of two in [256 KiB, 16 MiB] giving at most ~2048 pieces."""
    length = MIN_PIECE
    while length < MAX_PIECE and total_size > length * TARGET_PIECES:
        length *= 2
    return length


def piece_count(total_size: int, piece_length: int) -> int:
    return (total_size + piece_length - 1) // piece_length


@dataclass(frozen=True)
class FileEntry:
    path: tuple[str, ...]
    length: int
    pad: bool = False  # BEP 47 padding in hybrid torrents: never written
    symlink: tuple[str, ...] | None = None  # BEP 47: the target, relative to the torrent's root
    # "symlink text" (btswarm's, beside BEP 47's keys): the link as the site wrote it (`a/./b`), where
    # that is not the plain relative path to `symlink`; other clients ignore it and write the plain one.
    link_text: str | None = None

    @property
    def lfn(self) -> str:
        return "/".join(self.path)

    @property
    def target(self) -> str | None:
        """A symlink's target as a path inside the dataset, else None."""
        return "/".join(self.symlink) if self.symlink is not None else None


class FileList(Sequence[FileEntry]):
    """A torrent's files, kept by column: each file's LFN (one string) and length (8 bytes in
    an array), padding and symlink entries apart: a fraction of the memory of a FileEntry
    object with its path tuple, in every process that holds its Metainfo (docs/benchmarks.md
    "cost"). Items are FileEntry, made when asked for;
    `lfns` and `lengths` read the columns without making any."""

    __slots__ = ("lfns", "lengths", "_special", "total")

    def __init__(self, lfns: Sequence[str], lengths: Sequence[int],
                 special: Mapping[int, FileEntry] | None = None) -> None:
        self.lfns: tuple[str, ...] = tuple(lfns)
        self.lengths = array("q", lengths)
        self._special = dict(special or {})  # index → a padding or symlink entry, as parsed
        self.total = sum(self.lengths)

    @classmethod
    def of(cls, entries: Iterable[FileEntry]) -> "FileList":
        entries = list(entries)
        return cls([f.lfn for f in entries], [f.length for f in entries],
                   {i: f for i, f in enumerate(entries) if f.pad or f.symlink is not None})

    def __len__(self) -> int:
        return len(self.lfns)

    @overload
    def __getitem__(self, i: int) -> FileEntry: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[FileEntry, ...]: ...

    def __getitem__(self, i: int | slice) -> FileEntry | tuple[FileEntry, ...]:
        if isinstance(i, slice):
            return tuple(self[k] for k in range(*i.indices(len(self))))
        if i < 0:
            i += len(self.lfns)
        special = self._special.get(i)
        if special is not None:
            return special
        return FileEntry(tuple(self.lfns[i].split("/")), self.lengths[i])

    def __iter__(self) -> Iterator[FileEntry]:
        special = self._special
        for i, (lfn, length) in enumerate(zip(self.lfns, self.lengths)):
            yield special[i] if i in special else FileEntry(tuple(lfn.split("/")), length)

    def is_pad(self, i: int) -> bool:
        entry = self._special.get(i)
        return entry is not None and entry.pad

    @property
    def data_count(self) -> int:
        """Files that are not BEP 47 padding."""
        return len(self.lfns) - sum(1 for f in self._special.values() if f.pad)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FileList):
            return (self.lfns, self.lengths, self._special) == (other.lfns, other.lengths, other._special)
        if isinstance(other, (tuple, list)):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.lfns, self.lengths.tobytes()))

    def __repr__(self) -> str:
        return f"FileList({len(self)} files, {self.total} bytes)"


@dataclass(frozen=True)
class Metainfo:
    name: str
    files: FileList  # a tuple of FileEntry is accepted and stored as one
    piece_length: int
    pieces: bytes
    private: bool
    info_hash: str  # hex SHA1 of the exact info bytes
    info_bytes: bytes
    announce: str | None = None
    announce_list: tuple[tuple[str, ...], ...] = ()
    url_list: tuple[str, ...] = ()
    info_hash_v2: str | None = None  # hex SHA256 when the torrent is hybrid
    single_file: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.files, FileList):
            object.__setattr__(self, "files", FileList.of(self.files))

    def __repr__(self) -> str:
        # Short on purpose: a dataclass repr of 100,000 files takes a second, and asyncio
        # (3.11) builds one of any task result it describes, e.g. when asyncio.run ends.
        return f"Metainfo({self.name!r}, {self.info_hash}, {len(self.files)} files, {self.total_size} bytes)"

    @property
    def total_size(self) -> int:
        return self.files.total

    @property
    def num_pieces(self) -> int:
        return len(self.pieces) // HASH_LEN

    @property
    def data_files(self) -> tuple[FileEntry, ...]:
        return tuple(f for i, f in enumerate(self.files) if not self.files.is_pad(i))

    @property
    def file_count(self) -> int:
        """Files that are not padding (len(data_files), without making them)."""
        return self.files.data_count

    @functools.cached_property
    def twins(self) -> tuple[int, ...]:
        """case_twins, computed once."""
        return tuple(_case_twins(self.files))

    def piece_hash(self, index: int) -> bytes:
        return self.pieces[index * HASH_LEN:(index + 1) * HASH_LEN]

    def trackers(self) -> list[str]:
        urls = [u for tier in self.announce_list for u in tier]
        if self.announce and self.announce not in urls:
            urls.insert(0, self.announce)
        return urls

    def magnet(self) -> str:
        parts = [f"xt=urn:btih:{self.info_hash}", f"dn={quote(self.name, safe='')}"]
        parts += [f"tr={quote(u, safe='')}" for u in self.trackers()]
        return "magnet:?" + "&".join(parts)


def case_twins(meta: "Metainfo") -> list[int]:
    """Indices of the files whose path equals another's but for case (`xt_TCPMSS.c`, `xt_tcpmss.c`).

    libtorrent renames such twins when it loads a torrent (`xt_tcpmss.1.c`), on a
    seed as on a client, so the seed cannot read them and the client writes
    them under other names; the caller gives them back their own names.
    """
    return list(meta.twins)


def _case_twins(files: FileList) -> list[int]:
    folded: dict[str, int] = {}
    twins: set[int] = set()
    for i, lfn in enumerate(files.lfns):
        if files.is_pad(i):
            continue
        key = lfn.casefold()
        j = folded.setdefault(key, i)
        if j != i:
            twins.update((i, j))
    return sorted(twins)


def own_names(meta: "Metainfo") -> dict[int, str]:
    """File index → its path as libtorrent spells paths (under the torrent's name), for the case twins."""
    prefix = "" if meta.single_file else meta.name + "/"
    return {i: prefix + meta.files.lfns[i] for i in meta.twins}


def info_dict(name: str, files: Sequence[tuple[str, int]], piece_length: int, pieces: bytes,
              private: bool = True, links: Mapping[str, str] | None = None,
              link_texts: Mapping[str, str] | None = None) -> dict:
    """The v1 info dict for `files` (LFN, size) and `links` (LFN → target inside the dataset),
    sorted by LFN for determinism. Links are BEP 47 symlinks: attr "l" only (an executable
    bit, "x", is a site's local state and would split one dataset into two info-hashes);
    `link_texts` (LFN → text) for the links not written as the plain relative path."""
    texts = link_texts or {}
    entries: list[tuple[str, dict]] = [
        (lfn, {b"length": size, b"path": [p.encode() for p in lfn.split("/")]}) for lfn, size in files]
    entries += [(lfn, {b"attr": b"l", b"length": 0, b"path": [p.encode() for p in lfn.split("/")],
                       b"symlink path": [p.encode() for p in target.split("/")],
                       **({b"symlink text": texts[lfn].encode()} if lfn in texts else {})})
                for lfn, target in (links or {}).items()]
    info: dict = {
        b"files": [entry for _, entry in sorted(entries, key=lambda e: e[0])],
        b"name": name.encode(),
        b"piece length": piece_length,
        b"pieces": pieces,
    }
    if private:
        info[b"private"] = 1
    return info


def encode_info(name: str, files: Sequence[tuple[str, int]], piece_length: int, pieces: bytes,
                private: bool = True, links: Mapping[str, str] | None = None,
                link_texts: Mapping[str, str] | None = None) -> bytes:
    """bencoding.encode(info_dict(...)), written directly: the same bytes (keys in order,
    files by LFN), a format per file instead of a dict per file and a generic encoder (a
    third of a 5,000-small-file build's time outside hashing)."""
    head, tail = encode_info_around(name, files, piece_length, len(pieces), private, links, link_texts)
    return head + pieces + tail


def encode_info_around(name: str, files: Sequence[tuple[str, int]], piece_length: int, pieces_length: int,
                       private: bool = True, links: Mapping[str, str] | None = None,
                       link_texts: Mapping[str, str] | None = None) -> tuple[bytes, bytes]:
    """encode_info's bytes before and after the pieces, from their length alone: a builder
    encodes the file list while it hashes."""
    def string(b: bytes) -> bytes:
        return b"%d:%s" % (len(b), b)

    def path(lfn: str) -> bytes:
        # UTF-8 never has a '/' byte inside a character: splitting the bytes splits the text
        b = lfn.encode()
        if b"/" not in b:
            return b"l%d:%se" % (len(b), b)
        return b"l" + b"".join([b"%d:%s" % (len(p), p) for p in b.split(b"/")]) + b"e"

    def text(lfn: str) -> bytes:
        return b"12:symlink text" + string(link_texts[lfn].encode()) if link_texts and lfn in link_texts else b""

    entries = [(lfn, b"d6:lengthi%de4:path%se" % (size, path(lfn))) for lfn, size in files]
    entries += [(lfn, b"d4:attr1:l6:lengthi0e4:path%s12:symlink path%s%se" % (path(lfn), path(target), text(lfn)))
                for lfn, target in (links or {}).items()]
    entries.sort(key=lambda e: e[0])
    head = b"".join([b"d5:filesl", *(e for _, e in entries), b"e4:name", string(name.encode()),
                     b"12:piece lengthi%de6:pieces%d:" % (piece_length, pieces_length)])
    return head, b"7:privatei1ee" if private else b"e"


def dump_encoded(info: bytes, announce: str | None = None, url_list: Iterable[str] = (),
                 comment: str | None = None) -> bytes:
    """`dump` of an info dict already encoded (encode_info): the same bytes."""
    def string(text: str) -> bytes:
        b = text.encode()
        return b"%d:%s" % (len(b), b)

    parts = [b"d"]
    if announce:
        parts += [b"8:announce", string(announce)]
    if comment:
        parts += [b"7:comment", string(comment)]
    parts += [b"4:info", info]
    urls = list(url_list)
    if urls:
        parts += [b"8:url-list", b"l", *(string(u) for u in urls), b"e"]
    parts.append(b"e")
    return b"".join(parts)


def dump(info: dict, announce: str | None = None, url_list: Iterable[str] = (),
         comment: str | None = None) -> bytes:
    """Bencode a whole .torrent. Announce and url-list stay outside the info dict."""
    top: dict = {b"info": info}
    if announce:
        top[b"announce"] = announce.encode()
    urls = list(url_list)
    if urls:
        top[b"url-list"] = [u.encode() for u in urls]
    if comment:
        top[b"comment"] = comment.encode()
    return bencoding.encode(top)


def with_url_list(data: bytes, add: Sequence[str], drop: Iterable[str] = (), subject: str = "torrent") -> bytes:
    """The same .torrent with `add` first in its `url-list` (BEP 19 web seeds), then those it had but for `drop`."""

    def change(top: dict) -> dict:
        had = top.get(b"url-list")
        had = [had] if isinstance(had, bytes) else [u for u in had if isinstance(u, bytes)] if isinstance(had, list) else []
        dropped = {u.encode() for u in drop}
        urls = list(dict.fromkeys([u.encode() for u in add] + [u for u in had if u not in dropped]))
        rest = {k: v for k, v in top.items() if k != b"url-list"}
        if urls:
            rest[b"url-list"] = urls
        return rest

    return _with_outside_info(data, change, subject)


def with_trackers(data: bytes, rewrite: Callable[[str], str], subject: str = "torrent") -> bytes:
    """The same .torrent with each tracker URL (`announce`, `announce-list`) replaced by `rewrite(url)`."""

    def one(url: object) -> object:
        return rewrite(url.decode()).encode() if isinstance(url, bytes) else url

    def change(top: dict) -> dict:
        rest = dict(top)
        if b"announce" in rest:
            rest[b"announce"] = one(rest[b"announce"])
        tiers = rest.get(b"announce-list")
        if isinstance(tiers, list):
            rest[b"announce-list"] = [[one(u) for u in tier] if isinstance(tier, list) else tier for tier in tiers]
        return rest

    return _with_outside_info(data, change, subject)


def _with_outside_info(data: bytes, change: Callable[[dict], dict], subject: str) -> bytes:
    """The .torrent whose keys beside `info` are `change(them)`.

    The info dict's bytes are copied as they are, never decoded and encoded
    again, so the info-hash stays what it was even for a torrent whose info
    dict was not written in canonical order.
    """
    limits = DEFAULT_READ_LIMITS
    top = bencoding.decode(data, bencoding.Limits(max_size=limits.max_bytes, max_depth=limits.max_depth,
                                                  max_tokens=8 * limits.max_files + 1024), subject)
    span = bencoding.dict_value_span(data, b"info")
    if not isinstance(top, dict) or span is None:
        raise MetainfoError(subject, "no info dictionary")
    rest = change({k: v for k, v in top.items() if k != b"info"})
    parts = [b"d"]
    for key in sorted([*rest, b"info"]):
        parts.append(bencoding.encode(key))
        parts.append(data[span[0]:span[1]] if key == b"info" else bencoding.encode(rest[key]))
    parts.append(b"e")
    return b"".join(parts)


def info_hash(info_bytes: bytes) -> str:
    return hashlib.sha1(info_bytes).hexdigest()


def parse(data: bytes, limits: ReadLimits = DEFAULT_READ_LIMITS, subject: str = "torrent") -> Metainfo:
    """Decode and validate a .torrent; raise MetainfoError on anything unsafe."""
    top, info, info_bytes = _decode(data, limits, subject)
    name = _name(info, subject)
    piece_length, pieces = _piece_hashes(info, limits, subject)
    single = b"files" not in info
    files = _files(info, name, subject, limits) if not single else _single(info, name, subject)
    total = files.total
    if total > limits.max_total:
        raise MetainfoError(subject, f"total size {total} is over the limit of {limits.max_total}")
    if total == 0:
        raise MetainfoError(subject, "torrent has no data")
    expected = piece_count(total, piece_length)
    if len(pieces) // HASH_LEN != expected:
        raise MetainfoError(subject, f"{len(pieces) // HASH_LEN} piece hashes for {expected} pieces")
    private = info.get(b"private") == 1
    announce, announce_list, url_list = _trackers(top)
    v2 = hashlib.sha256(info_bytes).hexdigest() if info.get(b"meta version") == 2 else None
    return Metainfo(
        name=name,
        files=files,
        piece_length=piece_length,
        pieces=pieces,
        private=private,
        info_hash=info_hash(info_bytes),
        info_bytes=info_bytes,
        announce=announce,
        announce_list=announce_list,
        url_list=url_list,
        info_hash_v2=v2,
        single_file=single,
    )


def _decode(data: bytes, limits: ReadLimits, subject: str) -> tuple[dict, dict, bytes]:
    """The top-level dict, its info dict, and the info dict's bytes as they are in `data`."""
    if len(data) > limits.max_bytes:
        raise MetainfoError(subject, f"{len(data)} bytes is over the limit of {limits.max_bytes}")
    blimits = bencoding.Limits(max_size=limits.max_bytes, max_depth=limits.max_depth,
                               max_tokens=8 * limits.max_files + 1024)
    try:
        top, span = bencoding.decode_with_span(data, b"info", blimits, subject)
    except BencodeError as exc:
        raise MetainfoError(subject, exc.problem) from None
    if not isinstance(top, dict):
        raise MetainfoError(subject, "not a dictionary")
    info = top.get(b"info")
    if not isinstance(info, dict):
        raise MetainfoError(subject, "no info dictionary")
    assert span is not None
    return top, info, bytes(data[span[0]:span[1]])


def _name(info: dict, subject: str) -> str:
    """The dataset's name: one safe path component."""
    name = _text(info.get(b"name.utf-8", info.get(b"name")), subject, "name")
    try:
        check_component(subject, name)
    except DatasetError as exc:
        raise MetainfoError(subject, f"unsafe name {name!r} ({exc.problem})") from None
    if "/" in name:
        raise MetainfoError(subject, f"unsafe name {name!r} (contains '/')")
    return name


def _piece_hashes(info: dict, limits: ReadLimits, subject: str) -> tuple[int, bytes]:
    """The piece length (a power of two, 16 KiB or more) and the pieces' SHA1s, within `limits`."""
    piece_length = info.get(b"piece length")
    if not _is_int(piece_length) or piece_length <= 0 or piece_length > limits.max_piece_length:
        raise MetainfoError(subject, f"bad piece length {piece_length!r}")
    if piece_length & (piece_length - 1) or piece_length < 16 * 1024:
        raise MetainfoError(subject, f"piece length {piece_length} is not a power of two of at least 16 KiB")
    pieces = info.get(b"pieces")
    if not isinstance(pieces, bytes) or len(pieces) % HASH_LEN:
        raise MetainfoError(subject, "pieces is not a string of 20-byte hashes")
    if len(pieces) // HASH_LEN > limits.max_pieces:
        raise MetainfoError(subject, f"{len(pieces) // HASH_LEN} pieces is over the limit of {limits.max_pieces}")
    return piece_length, pieces


def _trackers(top: dict) -> tuple[str | None, tuple[tuple[str, ...], ...], tuple[str, ...]]:
    """The announce URL, the announce-list's tiers and the web seeds (url-list), what is not text left out."""
    tiers = top.get(b"announce-list")
    url_list = top.get(b"url-list")
    if isinstance(url_list, bytes):
        url_list = [url_list]
    elif not isinstance(url_list, list):  # an int or dict here is junk, not a list to iterate
        url_list = []
    return (_opt_text(top.get(b"announce")),
            tuple(tuple(u for u in (_opt_text(x) for x in tier) if u)
                  for tier in (tiers if isinstance(tiers, list) else []) if isinstance(tier, list)),
            tuple(u for u in (_opt_text(x) for x in (url_list or [])) if u))


def _single(info: dict, name: str, subject: str) -> FileList:
    length = info.get(b"length")
    if not _is_int(length) or length < 0:
        raise MetainfoError(subject, f"bad length {length!r}")
    return FileList((name,), (length,))


# Anything check_component refuses inside a component, found in a whole LFN at once.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f\\]")


def _files(info: dict, name: str, subject: str, limits: ReadLimits) -> FileList:
    raw = info.get(b"files")
    if not isinstance(raw, list) or not raw:
        raise MetainfoError(subject, "files is not a non-empty list")
    if len(raw) > limits.max_files:
        raise MetainfoError(subject, f"{len(raw)} files is over the limit of {limits.max_files}")
    lfns: list[str] = []
    lengths: list[int] = []
    special: dict[int, FileEntry] = {}
    seen: set[str] = set()
    dirs: set[str] = set()
    for i, f in enumerate(raw):
        if not isinstance(f, dict):
            raise MetainfoError(subject, f"file {i} is not a dictionary")
        length = f.get(b"length")
        if not _is_int(length) or length < 0:
            raise MetainfoError(subject, f"file {i} has bad length {length!r}")
        path_raw = f.get(b"path.utf-8")
        if path_raw is None:
            path_raw = f.get(b"path")
        if not isinstance(path_raw, list) or not path_raw:
            raise MetainfoError(subject, f"file {i} has no path")
        try:
            parts = [p.decode("utf-8") for p in path_raw]
        except (AttributeError, UnicodeDecodeError):  # _text says which and why
            parts = [_text(p, subject, f"file {i}: path") for p in path_raw]
        attr = f.get(b"attr")
        attr = attr if isinstance(attr, bytes) else b""
        pad = b"p" in attr
        symlink = _symlink(f, attr, tuple(parts), length, subject) if attr or b"symlink path" in f else None
        lfn = "/".join(parts)
        if not pad:
            # One look at the whole LFN for the usual case; a component check for the message.
            if (lfn.count("/") != len(parts) - 1 or "" in parts or "." in parts or ".." in parts
                    or _UNSAFE.search(lfn)):
                for part in parts:
                    try:
                        check_component(lfn, part)
                    except DatasetError as exc:
                        raise MetainfoError(subject, f"unsafe path {lfn!r} ({exc.problem})") from None
            if lfn in seen:
                raise MetainfoError(subject, f"duplicate path {lfn!r}")
            seen.add(lfn)
            parent = lfn.rpartition("/")[0]
            while parent and parent not in dirs:  # a directory seen before brings its parents
                dirs.add(parent)
                parent = parent.rpartition("/")[0]
        lfns.append(lfn)
        lengths.append(length)
        if pad or symlink is not None:
            special[i] = FileEntry(tuple(parts), length, pad, symlink,
                                   _link_text(f, lfn, symlink, subject) if symlink is not None else None)
    clash = seen & dirs
    if clash:
        raise MetainfoError(subject, f"{min(clash, key=lambda d: d.split('/'))!r} is both a file and a directory")
    return FileList(lfns, lengths, special)


def _symlink(f: dict, attr: bytes, path: tuple[str, ...], length: int, subject: str) -> tuple[str, ...] | None:
    """A BEP 47 symlink's target, checked: a safe path inside the torrent, no bytes of its own."""
    lfn = "/".join(path)
    if b"l" not in attr:
        if b"symlink path" in f:
            raise MetainfoError(subject, f"{lfn}: a symlink path without the 'l' attribute")
        return None
    raw = f.get(b"symlink path")
    if not isinstance(raw, list) or not raw:
        raise MetainfoError(subject, f"{lfn}: a symlink with no symlink path")
    target = tuple(_text(p, subject, f"{lfn}: symlink path") for p in raw)
    for part in target:
        try:
            check_component(lfn, part)
        except DatasetError as exc:
            raise MetainfoError(subject, f"{lfn}: unsafe symlink target {'/'.join(target)!r} ({exc.problem})") \
                from None
    if target == path:
        raise MetainfoError(subject, f"{lfn}: a symlink to itself")
    if length != 0:
        raise MetainfoError(subject, f"{lfn}: a symlink with {length} bytes")
    return target


def _link_text(f: dict, lfn: str, target: tuple[str, ...], subject: str) -> str | None:
    """A link's "symlink text", checked: relative, and leading where its symlink path does."""
    if b"symlink text" not in f:
        return None
    text = _text(f[b"symlink text"], subject, f"{lfn}: symlink text")
    if _UNSAFE.search(text) or link_target(lfn, text) != "/".join(target):
        raise MetainfoError(subject, f"{lfn}: symlink text {text!r} does not lead to {'/'.join(target)!r}")
    return text


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: object, subject: str, what: str) -> str:
    if not isinstance(value, bytes):
        raise MetainfoError(subject, f"{what} is missing or not a string")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise MetainfoError(subject, f"{what} is not UTF-8") from None


def _opt_text(value: object) -> str | None:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def from_base64(text: str, subject: str = "torrent") -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (ValueError, TypeError):
        raise MetainfoError(subject, "not valid base64") from None
