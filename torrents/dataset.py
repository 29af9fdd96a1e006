"""The dataset model: a name and an ordered list of files, and its readers.

A site declares datasets as directories (every regular file below is an
LFN, named by its path relative to the directory) or as manifests. The
manifest formats (see docs/formats.md):

- JSON: {"name": DATASET, "files": [{"lfn", "size", "adler32"?, "pfns": [...]}]}
  or a list of such objects for several datasets;
- TSV: lines `DATASET<TAB>LFN<TAB>SIZE<TAB>ADLER32<TAB>PFN[<TAB>PFN...]`,
  `#` comments, ADLER32 may be `-`;
- Rucio: the JSON of `rucio list-file-replicas --pfns`-style output, a list of
  {"scope", "name", "bytes", "adler32", "pfns": {PFN: {...}} or [PFN...],
  "dataset"?}; the dataset name comes from each entry's "dataset" key or
  from the reader's `dataset` argument.

PFNs are listed in order of preference: a local pool replica first, the
namespace path last.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from torrents.did import DID
from torrents.errors import DatasetError

MAX_NAME = 255
MAX_LFN = 4096
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ADLER = re.compile(r"^[0-9a-fA-F]{1,8}$")


def check_component(subject: str, part: str) -> None:
    """Refuse a path component that is empty, '.', '..', or holds '/', '\\' or a control character."""
    if part in ("", ".", ".."):
        raise DatasetError(subject, f"path component {part!r} is not allowed")
    # A .torrent's path list is split by its author: one component may hold
    # '../../etc/passwd' or '/etc/passwd' and must not slip through as one name.
    if "/" in part:
        raise DatasetError(subject, "'/' in path component")
    if _CONTROL.search(part):
        raise DatasetError(subject, "control character in path component")
    if "\\" in part:
        raise DatasetError(subject, "backslash in path component")


def validate_name(name: str) -> str:
    """A dataset name is one path component: no '/', '..', control characters."""
    if not isinstance(name, str):
        raise DatasetError(repr(name), "dataset name is not a string")
    if not name:
        raise DatasetError(repr(name), "dataset name is empty")
    if len(name) > MAX_NAME:
        raise DatasetError(name[:40] + "…", f"dataset name longer than {MAX_NAME} characters")
    if "/" in name:
        raise DatasetError(name, "dataset name contains '/'")
    check_component(name, name)
    if name.startswith("."):
        raise DatasetError(name, "dataset name starts with '.'")
    return name


def validate_lfn(lfn: str) -> tuple[str, ...]:
    """Split a logical file name into safe relative components, or raise."""
    if not isinstance(lfn, str):
        raise DatasetError(repr(lfn), "file name is not a string")
    if not lfn:
        raise DatasetError(repr(lfn), "file name is empty")
    if len(lfn) > MAX_LFN:
        raise DatasetError(lfn[:40] + "…", f"file name longer than {MAX_LFN} characters")
    if lfn.startswith("/"):
        raise DatasetError(lfn, "file name is absolute")
    parts = tuple(lfn.split("/"))
    for part in parts:
        check_component(lfn, part)
    return parts


@dataclass(frozen=True)
class DatasetFile:
    lfn: str
    size: int
    adler32: str | None = None
    pfns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        validate_lfn(self.lfn)
        if not isinstance(self.size, int) or isinstance(self.size, bool) or self.size < 0:
            raise DatasetError(self.lfn, f"bad size {self.size!r}")
        if not isinstance(self.pfns, (list, tuple)) or not all(isinstance(p, str) and p for p in self.pfns):
            raise DatasetError(self.lfn, f"bad PFN list {self.pfns!r}")
        object.__setattr__(self, "pfns", tuple(self.pfns))
        if self.adler32 is not None and (not isinstance(self.adler32, str) or not _ADLER.match(self.adler32)):
            raise DatasetError(self.lfn, f"bad adler32 {self.adler32!r}")
        if self.adler32 is not None:
            object.__setattr__(self, "adler32", self.adler32.lower().rjust(8, "0"))

    def record(self) -> dict:
        """The public part (no PFNs: they are the site's own business)."""
        return {"lfn": self.lfn, "size": self.size, "adler32": self.adler32}


@dataclass(frozen=True)
class Dataset:
    name: str
    files: tuple[DatasetFile, ...]
    description: str = ""
    source: str = field(default="", compare=False)
    did: DID | None = None  # read from Rucio: the name is then str(did) (torrents.did)

    def __post_init__(self) -> None:
        validate_name(self.name)
        if self.did is not None and str(self.did) != self.name:
            raise DatasetError(self.name, f"named otherwise than its DID {self.did}")
        ordered = tuple(sorted(self.files, key=lambda f: f.lfn))
        seen: set[str] = set()
        dirs: set[str] = set()
        for f in ordered:
            if f.lfn in seen:
                raise DatasetError(f"{self.name}/{f.lfn}", "listed twice")
            seen.add(f.lfn)
            parts = f.lfn.split("/")
            dirs.update("/".join(parts[:i]) for i in range(1, len(parts)))
        clash = seen & dirs
        if clash:
            raise DatasetError(f"{self.name}/{min(clash)}", "is both a file and a directory")
        if not ordered:
            raise DatasetError(self.name, "dataset has no files")
        object.__setattr__(self, "files", ordered)

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files)

    def record(self) -> dict:
        out = {
            "name": self.name,
            "description": self.description,
            "total_size": self.total_size,
            "files": [f.record() for f in self.files],
        }
        if self.did is not None:
            out["did"] = self.did.record()
        return out


def from_directory(path: str | os.PathLike, name: str | None = None) -> Dataset:
    """A directory as a dataset: every regular file below it, symlinks followed."""
    root = Path(path)
    if not root.is_dir():
        raise DatasetError(root, "not a directory")
    files = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for fn in sorted(filenames):
            if fn.startswith("."):
                continue
            full = Path(dirpath) / fn
            try:
                st = full.stat()
            except OSError as exc:
                raise DatasetError(full, f"cannot read ({exc.strerror})") from None
            if not full.is_file():
                continue
            lfn = full.relative_to(root).as_posix()
            files.append(DatasetFile(lfn, st.st_size, None, (str(full),)))
    return Dataset(name or root.name, tuple(files), source=str(root))


def read_manifest(path: str | os.PathLike, dataset: str | None = None) -> list[Dataset]:
    """Read a JSON, TSV or Rucio-style manifest file into datasets."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(p, f"cannot read manifest ({exc})") from None
    suffix = p.suffix.lower()
    tsv = True if suffix in (".tsv", ".txt") else False if suffix == ".json" else None
    return parse_manifest(text, subject=str(p), dataset=dataset, tsv=tsv)


def parse_manifest(text: str, subject: str = "manifest", dataset: str | None = None,
                   tsv: bool | None = None) -> list[Dataset]:
    if tsv is None:
        tsv = not text.lstrip().startswith(("{", "["))
    if tsv:
        return _group(_tsv_rows(text, subject), subject)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(subject, f"not valid JSON ({exc.msg} at line {exc.lineno})") from None
    items = doc if isinstance(doc, list) else [doc]
    if items and all(isinstance(i, dict) and "files" in i for i in items):
        return [_json_dataset(i, subject) for i in items]
    return _group(_rucio_rows(items, subject, dataset), subject)


def _json_dataset(doc: dict, subject: str) -> Dataset:
    if "name" not in doc:
        raise DatasetError(subject, "missing field 'name'")
    raw = doc["files"]
    if not isinstance(raw, list):
        raise DatasetError(subject, "'files' is not a list")
    files = []
    for i, f in enumerate(raw):
        where = f"{subject}: files[{i}]"
        if not isinstance(f, dict):
            raise DatasetError(where, "expected an object")
        for key in ("lfn", "size"):
            if key not in f:
                raise DatasetError(where, f"missing field {key!r}")
        with _context(where):
            files.append(DatasetFile(f["lfn"], _int(f["size"], where), f.get("adler32"),
                                     _pfns(f.get("pfns", ()), where)))
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise DatasetError(subject, f"bad description {description!r}")
    with _context(subject):
        return Dataset(doc["name"], tuple(files), description, source=subject)


def _tsv_rows(text: str, subject: str) -> Iterable[tuple[str, DatasetFile]]:
    # QUOTE_NONE: a '"' in a path is a character, not the start of a quoted field
    for lineno, row in enumerate(csv.reader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE), 1):
        if not row or not "".join(row).strip() or row[0].startswith("#"):
            continue
        if len(row) < 5:
            raise DatasetError(f"{subject}:{lineno}", "expected DATASET, LFN, SIZE, ADLER32, PFN...")
        name, lfn, size, adler, *pfns = (c.strip() for c in row)
        where = f"{subject}:{lineno}"
        with _context(where):
            validate_name(name)
            yield name, DatasetFile(lfn, _int(size, where), None if adler in ("", "-") else adler,
                                    tuple(p for p in pfns if p))


def _rucio_rows(items: list, subject: str, dataset: str | None) -> Iterable[tuple[str, DatasetFile]]:
    for i, item in enumerate(items):
        where = f"{subject}[{i}]"
        if not isinstance(item, dict):
            raise DatasetError(where, "expected an object")
        name = item.get("dataset") or dataset
        if not name:
            raise DatasetError(where, "no dataset name (no 'dataset' key and none given)")
        pfns = item.get("pfns") or {}
        if isinstance(pfns, dict):
            # Rucio lists PFNs with a priority; lower is preferred.
            pfns = sorted(pfns, key=lambda p: _priority(pfns[p]))
        for key in ("name", "bytes"):
            if key not in item:
                raise DatasetError(where, f"missing field {key!r}")
        with _context(where):
            validate_name(name)
            yield name, DatasetFile(item["name"], _int(item["bytes"], where), item.get("adler32"),
                                    _pfns(pfns, where))


def _group(rows: Iterable[tuple[str, DatasetFile]], subject: str) -> list[Dataset]:
    grouped: dict[str, list[DatasetFile]] = {}
    for name, f in rows:
        grouped.setdefault(name, []).append(f)
    with _context(subject):
        return [Dataset(name, tuple(files), source=subject) for name, files in grouped.items()]


@contextmanager
def _context(subject: str) -> Iterator[None]:
    """Prefix a DatasetError raised inside with the manifest (and line or entry) it came from."""
    try:
        yield
    except DatasetError as exc:
        if exc.subject == subject or exc.subject.startswith(subject + ":"):  # already says where
            raise
        raise DatasetError(subject, str(exc)) from None


def _pfns(value: object, subject: str) -> tuple[str, ...]:
    if isinstance(value, str):  # one PFN given bare; tuple("...") would split it into characters
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(p, str) and p for p in value):
        raise DatasetError(subject, f"bad pfns {value!r} (expected a list of paths)")
    return tuple(value)


def _priority(attrs: object) -> float:
    if isinstance(attrs, dict):
        p = attrs.get("priority", 0)
        if isinstance(p, (int, float)) and not isinstance(p, bool):
            return p
    return 0


def _int(value: object, subject: str) -> int:
    # JSON gives ints, TSV gives digit strings; 1.5, true or "1_000" are mistakes, not sizes
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]+\s*", value):
        n = int(value)
    else:
        raise DatasetError(subject, f"bad size {value!r}")
    if n < 0:
        raise DatasetError(subject, f"negative size {n}")
    return n
