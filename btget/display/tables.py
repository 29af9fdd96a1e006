"""What `bt-get --search` and `bt-get --list-files` print: rows and aligned tables (pure).

Like `rucio list-dids` and `rucio list-files`: one line per dataset (or
file), columns aligned over the whole answer so that `sort`, `awk` and an
eye all read them, the name (or LFN) last and whole, because ATLAS names
and LFNs differ in their last tokens. Sizes are human (torrents.units)
in the table and bytes in `--json`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from torrents.units import human_size

UNKNOWN = "?"  # a count nobody could tell (the tracker did not answer)


@dataclass(frozen=True)
class DatasetRow:
    """One dataset as the repository's search answers it, with its live swarm when known."""

    name: str
    info_hash: str
    size: int
    files: int
    t2_sites: tuple[str, ...]
    t3_sites: tuple[str, ...]
    seeds: int | None  # seeds in the swarm now; None: unknown
    leechers: int | None
    replicas: str = "agree"
    last_published: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "info_hash": self.info_hash, "total_size": self.size, "file_count": self.files,
                "t2_sites": list(self.t2_sites), "t3_sites": list(self.t3_sites), "seeds": self.seeds,
                "leechers": self.leechers, "replicas": self.replicas, "last_published": self.last_published}


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _count(doc: Any, key: str) -> int | None:
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def dataset_row(doc: Mapping[str, Any]) -> DatasetRow:
    """A row of GET /api/datasets?swarm=1 → DatasetRow. A repository without T2/T3 apart
    (`t2_sites` absent) has every holder counted a T2; one without `swarm` leaves the seeds unknown."""
    sites = _strings(doc.get("sites"))
    t3 = _strings(doc.get("t3_sites"))
    t2 = _strings(doc["t2_sites"]) if isinstance(doc.get("t2_sites"), list) else \
        tuple(s for s in sites if s not in t3)
    swarm = doc.get("swarm")
    return DatasetRow(name=str(doc.get("name", "")), info_hash=str(doc.get("info_hash", "")),
                      size=_count(doc, "total_size") or 0, files=_count(doc, "file_count") or 0,
                      t2_sites=t2, t3_sites=t3, seeds=_count(swarm, "seeds"), leechers=_count(swarm, "leechers"),
                      replicas=str(doc.get("replicas", "agree")), last_published=str(doc.get("last_published", "")))


def _cell(n: int | None) -> str:
    return UNKNOWN if n is None else str(n)


def _joined(names: Sequence[str]) -> str:
    return ",".join(names) if names else "-"


SEARCH_HEADER = ("SIZE", "FILES", "SEEDS", "T2", "T3", "DATASET")


def search_table(rows: Sequence[DatasetRow]) -> list[str]:
    """Header and one line per dataset: SIZE FILES SEEDS T2-SITES T3-SITES DATASET.

    Every column is as wide as its widest cell in this answer; the name comes
    last so that a long one pushes nothing out of line. A dataset whose
    replicas the repository has not settled says so after its name.
    """
    cells = [(human_size(r.size), str(r.files), _cell(r.seeds), _joined(r.t2_sites), _joined(r.t3_sites),
              r.name + ("" if r.replicas == "agree" else f"  (replicas: {r.replicas})")) for r in rows]
    return _table(SEARCH_HEADER, cells, right=(0, 1, 2))


@dataclass(frozen=True)
class FileRow:
    lfn: str
    size: int
    adler32: str | None  # the catalog's, when the repository's record has it
    symlink: str | None = None  # a link of the dataset (BEP 47): its target


def file_rows(files: Iterable[tuple[str, int, str | None]], record: Mapping[str, Any] | None) -> list[FileRow]:
    """(LFN, size, link target) from the .torrent, in its order, with the record's adler32 by LFN."""
    adler: dict[str, str] = {}
    for f in (record or {}).get("files", []) or []:
        if isinstance(f, dict) and isinstance(f.get("lfn"), str) and isinstance(f.get("adler32"), str):
            adler[f["lfn"]] = f["adler32"]
    return [FileRow(lfn, size, adler.get(lfn), target) for lfn, size, target in files]


FILES_HEADER = ("SIZE", "BYTES", "ADLER32", "LFN")


def files_table(rows: Sequence[FileRow]) -> list[str]:
    """Header, one line per file (SIZE BYTES ADLER32 LFN; a link as `LFN -> TARGET`), and a total."""
    cells = [(human_size(r.size), str(r.size), r.adler32 or "-",
              r.lfn if r.symlink is None else f"{r.lfn} -> {r.symlink}") for r in rows]
    lines = _table(FILES_HEADER, cells, right=(0, 1))
    lines.append(files_total(rows))
    return lines


def files_total(rows: Sequence[FileRow]) -> str:
    total = sum(r.size for r in rows)
    return f"total: {len(rows)} {'file' if len(rows) == 1 else 'files'}, {human_size(total)} ({total} bytes)"


def files_document(name: str, info_hash: str, rows: Sequence[FileRow], of: int) -> dict[str, Any]:
    """`--list-files --json`: the files chosen (all, or what --files/--nrandom/--shard pick) of `of`."""
    return {"name": name, "info_hash": info_hash, "file_count": len(rows), "of": of,
            "total_size": sum(r.size for r in rows),
            "files": [{"lfn": r.lfn, "size": r.size, "adler32": r.adler32,
                       **({"symlink": r.symlink} if r.symlink is not None else {})} for r in rows]}


def search_document(query: str, repo: str, total: int, rows: Sequence[DatasetRow]) -> dict[str, Any]:
    return {"query": query, "repo": repo, "total": total, "shown": len(rows),
            "datasets": [r.to_json() for r in rows]}


def _table(header: Sequence[str], cells: Sequence[Sequence[str]], right: Sequence[int]) -> list[str]:
    """Columns two spaces apart, each as wide as its widest cell; the last one unpadded."""
    widths = [max([len(header[i])] + [len(c[i]) for c in cells]) for i in range(len(header) - 1)]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths))]
        return "  ".join(parts + [values[-1]])

    return [line(header)] + [line(c) for c in cells]
