"""The result of a run: the --json document and the human summary (pure)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from dataclasses import dataclass

from torrents.exitstatus import ExitStatus
from torrents.metainfo import Metainfo
from torrents.units import human_duration, human_rate, human_size

from btget.events import Progress


@dataclass(frozen=True)
class WorkerReport:
    """One worker's share and its last event, for the summary."""

    worker: int
    files_count: int
    bytes: int
    last: Progress | None


def file_status(size: int, done: int | None, selected: bool, verified: bool | None) -> str:
    """skipped | missing | partial | complete | verified | corrupt."""
    if not selected:
        return "skipped"
    if done is None or (done == 0 and size > 0):
        return "missing"
    if done < size:
        return "partial"
    if verified is None:
        return "complete"
    return "verified" if verified else "corrupt"


WEB_SEED = "web seed "


def name_sources(raw: Mapping[str, int], sites: Mapping[str, str], workers: Mapping[str, int],
                 listen_ip: str, web_sites: Mapping[str, str] | None = None) -> dict[str, int]:
    """Per-endpoint byte counts → per-source, named by site where the tracker knows the endpoint;
    a web seed's bytes as `web seed SITE` where the repository named its site (`web_sites`:
    host:port → site), else `web seed host:port`."""
    site_ips = {ep.rsplit(":", 1)[0]: name for ep, name in sites.items()}
    out: dict[str, int] = {}
    for ep, n in raw.items():
        ip = ep.rsplit(":", 1)[0]
        if ep.startswith(WEB_SEED):
            name = WEB_SEED + (web_sites or {}).get(ep[len(WEB_SEED):], ep[len(WEB_SEED):])
        elif ep in sites:
            name = sites[ep]
        elif ep in workers:
            name = f"worker {workers[ep]}"
        elif ip in site_ips:
            name = site_ips[ip]
        elif workers and ip == listen_ip:
            name = "other workers"  # an incoming connection from a sibling (ephemeral port)
        else:
            name = ep
        out[name] = out.get(name, 0) + n
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def document(meta: Metainfo, directory: str, selected: set[int], files_done: Mapping[int, int],
             verified: Mapping[str, bool], workers: Sequence[WorkerReport], sources: Mapping[str, int],
             seconds: float, status: ExitStatus, web_switches: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The one JSON document `bt-get --json` prints (schema in docs/bt-get.md)."""
    files = []
    for i, f in enumerate(meta.files):
        if f.pad:
            continue
        files.append({"lfn": f.lfn, "size": f.length,
                      "status": file_status(f.length, files_done.get(i), i in selected, verified.get(f.lfn))})
    last = [w.last for w in workers if w.last is not None]
    downloaded = sum(p.downloaded for p in last)
    first = [p.first_byte_at for p in last if p.first_byte_at is not None]
    return {
        "dataset": meta.name,
        "info_hash": meta.info_hash,
        "directory": directory,
        "files": files,
        "bytes_total": sum(f.length for i, f in enumerate(meta.files) if i in selected and not f.pad),
        "bytes_downloaded": downloaded,
        "bytes_redundant": sum(p.redundant for p in last),
        "seconds": round(seconds, 3),
        "rate": round(downloaded / seconds, 1) if seconds > 0 else 0.0,
        "first_byte_at": round(min(first), 3) if first else None,
        "sources": dict(sources),
        "hash_failures": sum(p.hash_failures for p in last),
        "web_seed_switches": [dict(s) for s in web_switches],
        "workers": [{"worker": w.worker, "files": w.files_count, "bytes": w.bytes,
                     "done": w.last.done if w.last else 0, "downloaded": w.last.downloaded if w.last else 0,
                     "uploaded": w.last.uploaded if w.last else 0} for w in workers],
        "exit_status": status.name,
        "exit_code": int(status),
    }


def human(doc: Mapping[str, Any]) -> str:
    """A few lines for a person: what, where, how big, how fast, from whom."""
    counts: dict[str, int] = {}
    for f in doc["files"]:
        counts[f["status"]] = counts.get(f["status"], 0) + 1
    lines = [
        f"{doc['dataset']}",
        f"  directory  {doc['directory']}",
        "  files      " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())),
        f"  size       {human_size(doc['bytes_total'])} ({human_size(doc['bytes_downloaded'])} downloaded now)",
        f"  time       {human_duration(doc['seconds'])}, average {human_rate(doc['rate'])}",
    ]
    if doc["sources"]:
        lines.append("  sources    " + ", ".join(f"{k} {human_size(v)}" for k, v in doc["sources"].items()))
    if doc["hash_failures"]:
        lines.append(f"  hash failures {doc['hash_failures']} (bad pieces were fetched again)")
    lines.append(f"  status     {doc['exit_status'].lower()}")
    return "\n".join(lines)
