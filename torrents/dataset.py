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
import fnmatch
import io
import json
import os
import posixpath
import re
import stat
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from torrents.did import DID
from torrents.errors import DatasetError

MAX_NAME = 255
MAX_LFN = 4096
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ADLER = re.compile(r"^[0-9a-fA-F]{1,8}$")
# A relative path every component of which check_component accepts: one match instead of
# a check per component (a builder validates every name of a 20,000-file dataset).
_COMPONENT = r"(?!\.\.?(?:/|\Z))[^/\\\x00-\x1f\x7f]+"
_PLAIN_LFN = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")


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
    parts = tuple(lfn.split("/"))
    if _PLAIN_LFN.fullmatch(lfn):
        return parts
    if lfn.startswith("/"):
        raise DatasetError(lfn, "file name is absolute")
    for part in parts:
        check_component(lfn, part)
    return parts


def link_target(lfn: str, text: str) -> str | None:
    """Where a relative link's `text` leads from the link at `lfn`, as a path inside the dataset
    (its root-relative target), or None when it leaves the dataset or is absolute."""
    if not text or text.startswith("/"):
        return None
    target = posixpath.normpath(posixpath.join(posixpath.dirname(lfn), text))
    return None if target in (".", "..") or target.startswith("../") else target


def plain_link_text(lfn: str, target: str) -> str:
    """The link text a BitTorrent client writes for a link at `lfn` to `target` (both inside the dataset)."""
    return posixpath.relpath(target, posixpath.dirname(lfn) or ".")


@dataclass(frozen=True)
class DatasetFile:
    lfn: str
    size: int
    adler32: str | None = None
    pfns: tuple[str, ...] = ()
    symlink: str | None = None  # a link inside the dataset: its target, relative to the dataset's root
    # The link's own text where it is not the plain relative path to `symlink` (`a/./b`, `x/../b`):
    # carried so that a copy holds the link as the site wrote it.
    link_text: str | None = None

    def __post_init__(self) -> None:
        validate_lfn(self.lfn)
        if self.symlink is not None:
            if not isinstance(self.symlink, str):
                raise DatasetError(self.lfn, f"bad symlink target {self.symlink!r}")
            with _context(self.lfn):
                validate_lfn(self.symlink)
            if self.size != 0 or self.pfns:
                raise DatasetError(self.lfn, "a symlink has no bytes and no PFN")
        if self.link_text is not None and (self.symlink is None or
                                           link_target(self.lfn, self.link_text) != self.symlink):
            raise DatasetError(self.lfn, f"link text {self.link_text!r} does not lead to {self.symlink!r}")
        if not isinstance(self.size, int) or isinstance(self.size, bool) or self.size < 0:
            raise DatasetError(self.lfn, f"bad size {self.size!r}")
        if not isinstance(self.pfns, (list, tuple)) or \
                (self.pfns and not all(isinstance(p, str) and p for p in self.pfns)):
            raise DatasetError(self.lfn, f"bad PFN list {self.pfns!r}")
        if type(self.pfns) is not tuple:
            object.__setattr__(self, "pfns", tuple(self.pfns))
        if self.adler32 is not None and (not isinstance(self.adler32, str) or not _ADLER.match(self.adler32)):
            raise DatasetError(self.lfn, f"bad adler32 {self.adler32!r}")
        if self.adler32 is not None:
            object.__setattr__(self, "adler32", self.adler32.lower().rjust(8, "0"))

    def record(self) -> dict:
        """The public part (no PFNs: they are the site's own business)."""
        doc = {"lfn": self.lfn, "size": self.size, "adler32": self.adler32}
        if self.symlink is not None:
            doc["symlink"] = self.symlink
        return doc


def check_listing(name: str, lfns: Sequence[str]) -> None:
    """Refuse a dataset's sorted LFNs (each valid on its own) if one is listed twice, is both a
    file and a directory, or if there are none."""
    seen: set[str] = set()
    dirs: set[str] = set()
    for lfn in lfns:
        if lfn in seen:
            raise DatasetError(f"{name}/{lfn}", "listed twice")
        seen.add(lfn)
        if "/" in lfn:
            parts = lfn.split("/")
            dirs.update("/".join(parts[:i]) for i in range(1, len(parts)))
    clash = seen & dirs
    if clash:
        raise DatasetError(f"{name}/{min(clash)}", "is both a file and a directory")
    if not lfns:
        raise DatasetError(name, "dataset has no files")


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
        check_listing(self.name, [f.lfn for f in ordered])
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


@dataclass(frozen=True)
class Problem:
    """Something a scan refused or could not read; `dataset` is '' when it is not known."""

    dataset: str
    subject: str
    problem: str
    serious: bool = True  # refused or unreadable; an empty dataset directory is said, not a failure

    def __str__(self) -> str:
        return f"{self.subject}: {self.problem}"


@dataclass(frozen=True)
class DirectoryScan:
    """What a dataset directory holds: the dataset (None when nothing can be served), what was
    refused (problems) and what was left out on purpose (excluded: path, why)."""

    dataset: Dataset | None
    problems: tuple[Problem, ...] = ()
    excluded: tuple[tuple[str, str], ...] = ()


def excluded_by(lfn: str, patterns: Iterable[str]) -> str | None:
    """The first pattern matching the LFN or one of its components (fnmatch, case-sensitive), or None."""
    parts = lfn.split("/")
    for pattern in patterns:
        if fnmatch.fnmatchcase(lfn, pattern) or any(fnmatch.fnmatchcase(p, pattern) for p in parts):
            return pattern
    return None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def scan_directory(path: str | os.PathLike, name: str | None = None, *, exclude: Sequence[str] = (),
                   allowed_roots: Sequence[str] | None = None, require_whole: bool = False) -> DirectoryScan:
    """A directory as a dataset, every entry below it accounted for.

    Regular files, hidden ones too, are the dataset's files (unless a pattern
    of `exclude` matches the LFN or a component). A link whose target stays
    inside the dataset is kept as a link (served as BEP 47 symlink). A link
    to a regular file elsewhere inside `allowed_roots` (None: anywhere) is
    served as that file: this is how sites point LFNs at pool replicas. Any
    other link (leaving the roots, a directory link leaving the dataset,
    dangling outside it), an unreadable entry, or something that is not a
    file is a problem; the rest of the dataset is served, unless
    `require_whole`. Empty directories cannot be carried by a torrent and
    are listed as excluded.
    """
    root = Path(path)
    dataset_name = name or root.name
    if not root.is_dir():
        return DirectoryScan(None, (Problem(dataset_name, str(root), "not a directory"),))
    scan = _Scanner(root, dataset_name, exclude, allowed_roots)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False, onerror=scan.walk_error):
        dirnames[:] = scan.directory(Path(dirpath), dirnames, filenames)
    return scan.result(require_whole)


class _Scanner:
    """scan_directory's walk: each entry a file of the dataset, an excluded one, or a problem."""

    def __init__(self, root: Path, name: str, exclude: Sequence[str], allowed_roots: Sequence[str] | None) -> None:
        self.root = root
        self.name = name
        self.exclude = exclude
        self.real_root = os.path.realpath(root)
        self.roots = None if allowed_roots is None else [os.path.realpath(r) for r in allowed_roots]
        self.problems: list[Problem] = []
        self.excluded: list[tuple[str, str]] = []
        self.files: list[DatasetFile] = []

    def refuse(self, full: Path, problem: str) -> None:
        self.problems.append(Problem(self.name, str(full), problem))

    def walk_error(self, exc: OSError) -> None:
        self.refuse(Path(exc.filename or self.root), f"cannot read ({exc.strerror})")

    def directory(self, here: Path, dirnames: list[str], filenames: list[str]) -> list[str]:
        """The entries of one directory, in name order; the subdirectories to walk into."""
        rel_dir = here.relative_to(self.root).as_posix()
        entries = [(n, True) for n in dirnames] + [(n, False) for n in filenames]
        keep_dirs = []
        for entry, is_dir in sorted(entries):
            if self.entry(here / entry, entry if rel_dir == "." else f"{rel_dir}/{entry}"):
                keep_dirs.append(entry)
        return keep_dirs

    def entry(self, full: Path, lfn: str) -> bool:
        """One entry accounted for; True for a directory to walk into."""
        pattern = excluded_by(lfn, self.exclude)
        if pattern is not None:
            self.excluded.append((lfn, f"excluded by {pattern!r}"))
            return False
        try:
            validate_lfn(lfn)
            st = full.lstat()
        except DatasetError as exc:
            self.refuse(full, exc.problem)
            return False
        except OSError as exc:
            self.refuse(full, f"cannot read ({exc.strerror})")
            return False
        if stat.S_ISLNK(st.st_mode):
            found = _link(full, lfn, self.real_root, self.roots)
            if isinstance(found, str):
                self.refuse(full, found)
            else:
                self.files.append(found)
        elif stat.S_ISDIR(st.st_mode):
            if not any(os.scandir(full)):
                self.excluded.append((lfn, "empty directory (a torrent cannot carry one)"))
            return True
        elif stat.S_ISREG(st.st_mode):
            if not os.access(full, os.R_OK):
                self.refuse(full, "cannot read (Permission denied)")
            else:
                self.files.append(DatasetFile(lfn, st.st_size, None, (str(full),)))
        else:
            self.refuse(full, "not a regular file, a directory or a link; refused")
        return False

    def result(self, require_whole: bool) -> DirectoryScan:
        name, problems, excluded = self.name, self.problems, tuple(self.excluded)
        files = _carried_links(self.files, problems, self.root, name)
        if problems and require_whole:
            problems.append(Problem(name, str(self.root), f"{len(problems)} entries refused and the dataset must "
                                                          "be whole (require_whole); not served"))
            return DirectoryScan(None, tuple(problems), excluded)
        if not files:
            problems.append(Problem(name, name, "dataset has no files", serious=bool(problems)))
            return DirectoryScan(None, tuple(problems), excluded)
        try:
            ds = Dataset(name, tuple(files), source=str(self.root))
        except DatasetError as exc:
            problems.append(Problem(name, exc.subject, exc.problem))
            return DirectoryScan(None, tuple(problems), excluded)
        return DirectoryScan(ds, tuple(problems), excluded)


def _carried_links(files: list[DatasetFile], problems: list[Problem], root: Path, name: str) -> list[DatasetFile]:
    """Keep the links whose target the dataset carries (a file, a link, or a directory holding some);
    refuse the others: libtorrent turns a link to nothing into a link to itself."""
    lfns = {f.lfn for f in files}
    dirs = {"/".join(parts[:i]) for f in files if f.symlink is None for parts in [f.lfn.split("/")]
            for i in range(1, len(parts))}
    kept = []
    for f in files:
        if f.symlink is not None and f.symlink not in lfns and f.symlink not in dirs:
            problems.append(Problem(name, str(root / f.lfn), f"link to {f.symlink}, which the dataset does not "
                                                              "carry (missing, excluded or refused); refused"))
            continue
        kept.append(f)
    return kept


def _link(full: Path, lfn: str, real_root: str, roots: Sequence[str] | None) -> DatasetFile | str:
    """A link as a dataset file (a link kept, or the file it points at), or why it is refused."""
    text = os.readlink(full)
    lexical = link_target(lfn, text)
    resolved = os.path.realpath(full)
    exists = os.path.exists(resolved)
    if lexical is not None and (not exists or _inside(resolved, real_root)):
        # Stays inside the dataset: a link it carries (its target, relative to the dataset's root).
        return DatasetFile(lfn, 0, symlink=lexical,
                           link_text=None if text == plain_link_text(lfn, lexical) else text)
    if text.startswith("/") and exists and _inside(resolved, real_root) and resolved != real_root:
        return DatasetFile(lfn, 0, symlink=os.path.relpath(resolved, real_root).replace(os.sep, "/"))
    if not exists:
        return f"link to {text} leads nowhere outside the dataset; refused"
    if os.path.isdir(resolved):
        return f"directory link to {resolved} leaves the dataset; not followed"
    if roots is not None and not any(_inside(resolved, r) for r in roots):
        return f"link to {resolved} leaves the storage roots; refused"
    try:
        st = os.stat(resolved)
    except OSError as exc:
        return f"cannot read ({exc.strerror})"
    if not stat.S_ISREG(st.st_mode) or not os.access(resolved, os.R_OK):
        return f"link to {resolved}: not a readable regular file; refused"
    return DatasetFile(lfn, st.st_size, None, (str(full),))


def from_directory(path: str | os.PathLike, name: str | None = None) -> Dataset:
    """A directory as a dataset (see scan_directory); DatasetError at the first problem."""
    scan = scan_directory(path, name)
    if scan.problems or scan.dataset is None:
        first = scan.problems[0]
        raise DatasetError(first.subject, first.problem)
    return scan.dataset


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
