"""What Rucio says about a dataset at this site's RSE, as a btswarm Dataset. Pure.

Rucio gives a dataset's content (`GET /dids/{scope}/{name}/files`: every
file's DID, bytes, adler32) and its replicas at the RSE (`POST
/replicas/list` restricted to it: PFNs by priority). Each file becomes a
`DatasetFile` whose LFN is its DID name and whose candidate paths are its
PFNs mapped to local paths by the site's prefix map; the farm hides the
hashed directories of Rucio's deterministic layout behind the LFNs.

A dataset is offered only when every file has a replica here and a PFN
that maps: a partial copy would get another info-hash than the complete
replicas at other sites. Every file that keeps it back is a `Problem`
saying why. Whether a mapped path exists and has the catalog's size is
decided later, by layout.py, as for every other dataset.

The snapshot of the last good refresh is kept on disk (`catalog_to_json`,
`catalog_from_json`) so a restart while Rucio is down still serves the
datasets known before.
"""

from __future__ import annotations

import posixpath
from typing import Any, Iterable, Mapping, Sequence

from torrents.dataset import Dataset, DatasetFile
from torrents.did import DID, parse_did
from torrents.errors import BtswarmError

from btserver.holdings import Catalog, Problem

SNAPSHOT_VERSION = 1


def local_roots(pfn_map: Mapping[str, str]) -> list[str]:
    """The local prefixes: where the RSE's files are, so where the site may serve from."""
    return sorted({posixpath.normpath(local) for local in pfn_map.values()})


def pfn_to_path(pfn: str, pfn_map: Mapping[str, str]) -> str | None:
    """The local path of a PFN by the longest matching prefix; None when no prefix matches
    or the rest of the PFN would climb out of the local prefix ('..')."""
    best = max((p for p in pfn_map if pfn.startswith(p)), key=len, default=None)
    if best is None:
        return None
    local = pfn_map[best]
    rest = pfn[len(best):]
    path = posixpath.normpath(local.rstrip("/") + "/" + rest.lstrip("/"))
    root = posixpath.normpath(local)
    if path != root and not path.startswith(root.rstrip("/") + "/"):
        return None
    return path


def _priority(attrs: object) -> float:
    p = attrs.get("priority", 0) if isinstance(attrs, dict) else 0
    return p if isinstance(p, (int, float)) and not isinstance(p, bool) else 0


def replica_pfns(replica: Mapping[str, Any], rse: str) -> list[str]:
    """PFNs of one `list_replicas` entry at `rse`, lowest priority value first (Rucio's order kept on ties)."""
    pfns = replica.get("pfns") or {}
    if isinstance(pfns, dict):
        here = [p for p, a in pfns.items() if not isinstance(a, dict) or a.get("rse", rse) == rse]
        return sorted(here, key=lambda p: _priority(pfns[p]))
    rses = replica.get("rses") or {}
    return list(rses.get(rse, [])) if isinstance(rses, dict) else []


def dataset_from_rucio(did: DID, content: Sequence[Mapping[str, Any]], replicas: Iterable[Mapping[str, Any]],
                       rse: str, pfn_map: Mapping[str, str], source: str = "") -> tuple[Dataset | None, list[Problem]]:
    """The dataset `did` at `rse`, or None and the problems that keep it back."""
    name = str(did)
    problems: list[Problem] = []
    by_did: dict[tuple[str, str], list[str]] = {}
    for rep in replicas:
        key = (rep.get("scope"), rep.get("name"))
        by_did.setdefault(key, []).extend(replica_pfns(rep, rse))  # type: ignore[arg-type]
    files: list[DatasetFile] = []
    for entry in content:
        scope, lfn = entry.get("scope"), entry.get("name")
        where = f"{name}/{lfn}"
        size, adler = entry.get("bytes"), entry.get("adler32")
        pfns = by_did.get((scope, lfn))
        if not pfns:
            problems.append(Problem(name, where, f"no replica at {rse}"))
            continue
        local: list[str] = []
        for pfn in pfns:
            path = pfn_to_path(pfn, pfn_map)
            if path is not None and path not in local:
                local.append(path)
        if not local:
            problems.append(Problem(name, where, f"no pfn_map prefix matches its PFN at {rse} ({pfns[0]})"))
            continue
        if not isinstance(size, int) or isinstance(size, bool):
            problems.append(Problem(name, where, f"Rucio gives no size ({size!r})"))
            continue
        try:
            files.append(DatasetFile(lfn, size, adler if adler else None, tuple(local)))  # type: ignore[arg-type]
        except BtswarmError as exc:
            problems.append(Problem(name, where, exc.problem))
    if problems:
        problems.append(Problem(name, name, f"{len(problems)} of {len(content)} files not usable at {rse}; "
                                            "not served until complete"))
        return None, problems
    if not files:
        return None, [Problem(name, name, "dataset has no files in Rucio; not served")]
    try:
        return Dataset(name, tuple(files), source=source or f"rucio {rse}", did=did), []
    except BtswarmError as exc:  # e.g. two files of other scopes with one name
        return None, [Problem(name, exc.subject, f"{exc.problem}; not served")]


# -- the snapshot kept on disk -----------------------------------------------------------------
def catalog_to_json(cat: Catalog, saved_at: float) -> dict:
    return {
        "version": SNAPSHOT_VERSION,
        "saved_at": saved_at,
        "datasets": [{"did": d.did.record() if d.did else None, "source": d.source,
                      "files": [{**f.record(), "pfns": list(f.pfns)} for f in d.files]} for d in cat.datasets],
        "problems": [{"dataset": p.dataset, "subject": p.subject, "problem": p.problem} for p in cat.problems],
        "containers": {c: list(ds) for c, ds in cat.containers.items()},
    }


def catalog_from_json(doc: Any) -> Catalog:
    """A saved snapshot back; BtswarmError when it is not one (the caller then starts empty)."""
    if not isinstance(doc, dict) or doc.get("version") != SNAPSHOT_VERSION:
        raise BtswarmError("rucio snapshot", "not a snapshot of this version")
    try:
        datasets = []
        for d in doc.get("datasets", []):
            did = parse_did(f"{d['did']['scope']}:{d['did']['name']}")
            files = tuple(DatasetFile(f["lfn"], f["size"], f.get("adler32"), tuple(f.get("pfns", ())))
                          for f in d["files"])
            datasets.append(Dataset(str(did), files, source=d.get("source", ""), did=did))
        problems = tuple(Problem(p["dataset"], p["subject"], p["problem"]) for p in doc.get("problems", []))
        containers = {str(parse_did(c)): tuple(str(parse_did(d)) for d in ds)
                      for c, ds in (doc.get("containers") or {}).items()}
    except (KeyError, TypeError, AttributeError) as exc:
        raise BtswarmError("rucio snapshot", f"damaged ({exc.__class__.__name__}: {exc})") from None
    return Catalog(tuple(datasets), problems, containers=containers)
