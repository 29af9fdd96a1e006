"""The result of a run: the --json document and the human summary (pure).

`SourceLog` keeps the bytes per source over a run, for --json's `sources_over_time` (what `btswarm plot`
draws). The parent sees each worker's cumulative bytes per peer endpoint in its Progress events (sampled
from libtorrent every 50 ms); it keeps their sum at most once a second, and the last one, so a run of an
hour is a few hundred points whatever its events. Past MAX_SAMPLES every other sample is dropped and the
interval doubles: a long run keeps its whole span at a coarser step. Time is passed in.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from dataclasses import dataclass

from torrents.exitstatus import ExitStatus
from torrents.hostport import host_of
from torrents.metainfo import Metainfo
from torrents.units import human_duration, human_rate, human_size

from btget.events import WEB_SEED, Progress

INTERVAL = 0.25  # SourceLog: seconds between samples, at first
MAX_SAMPLES = 600


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


def source_name(endpoint: str, sites: Mapping[str, str], workers: Mapping[str, int],
                web_sites: Mapping[str, str] | None = None) -> str:
    """What a peer endpoint is: a site (by the tracker's `/api/sites`: its endpoint, else its
    address), a worker of this bt-get (its listening endpoint, or a connection it opened, known by
    its peer id), else the peer itself by address (a T3's bt-get or any other client, even one on
    our own address). A web seed (`web seed host:port`) is named by the site the repository listed
    it for (`web_sites`: host:port → site), `web seed SITE`."""
    if endpoint.startswith(WEB_SEED):
        return WEB_SEED + (web_sites or {}).get(endpoint[len(WEB_SEED):], endpoint[len(WEB_SEED):])
    if endpoint in sites:
        return sites[endpoint]
    if endpoint in workers:
        return f"worker {workers[endpoint]}"
    ip = host_of(endpoint)
    for ep, name in sites.items():
        if host_of(ep) == ip:
            return name
    return endpoint


def name_sources(raw: Mapping[str, int], sites: Mapping[str, str], workers: Mapping[str, int],
                 web_sites: Mapping[str, str] | None = None) -> dict[str, int]:
    """Per-endpoint byte counts → per-source (source_name), largest first."""
    out: dict[str, int] = {}
    for ep, n in raw.items():
        name = source_name(ep, sites, workers, web_sites)
        out[name] = out.get(name, 0) + n
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def sources_over_time(samples: Sequence[tuple[float, Mapping[str, int]]], sites: Mapping[str, str],
                      workers: Mapping[str, int], web_sites: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """SourceLog's samples → `[{"t": seconds from the start, "sources": {name: bytes so far}}]`."""
    return [{"t": round(t, 3), "sources": name_sources(raw, sites, workers, web_sites)} for t, raw in samples]


def bad_sources(workers: Sequence[WorkerReport], sites: Mapping[str, str], endpoints: Mapping[str, int],
                web_sites: Mapping[str, str] | None = None) -> tuple[dict[str, int], list[str]]:
    """Hash failures per source and the sources banned for corrupt pieces, over every worker."""
    failures: dict[str, int] = {}
    banned: set[str] = set()
    for w in workers:
        if w.last is None:
            continue
        for ep, n in w.last.peer_hash_failures.items():
            name = source_name(ep, sites, endpoints, web_sites)
            failures[name] = failures.get(name, 0) + n
        banned.update(source_name(ep, sites, endpoints, web_sites) for ep in w.last.banned)
    return dict(sorted(failures.items(), key=lambda kv: -kv[1])), sorted(banned)


def document(meta: Metainfo, directory: str, selected: set[int], files_done: Mapping[int, int],
             verified: Mapping[str, bool], workers: Sequence[WorkerReport], sources: Mapping[str, int],
             seconds: float, status: ExitStatus, *, hash_failures_by_source: Mapping[str, int] | None = None,
             banned: Sequence[str] = (), web_switches: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
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
        "bytes_done": sum(min(f.length, files_done.get(i, 0)) for i, f in enumerate(meta.files)
                          if i in selected and not f.pad),
        "bytes_downloaded": downloaded,
        "bytes_redundant": sum(p.redundant for p in last),
        "seconds": round(seconds, 3),
        "rate": round(downloaded / seconds, 1) if seconds > 0 else 0.0,
        "first_byte_at": round(min(first), 3) if first else None,
        "sources": dict(sources),
        "hash_failures": sum(p.hash_failures for p in last),
        "hash_failures_by_source": dict(hash_failures_by_source or {}),
        "banned": list(banned),
        "web_seed_switches": [dict(s) for s in web_switches],
        "workers": [{"worker": w.worker, "files": w.files_count, "bytes": w.bytes,
                     "done": w.last.done if w.last else 0, "downloaded": w.last.downloaded if w.last else 0,
                     "uploaded": w.last.uploaded if w.last else 0} for w in workers],
        "exit_status": status.name,
        "exit_code": int(status),
    }


def size_line(doc: Mapping[str, Any]) -> str:
    """The selected size; while incomplete, how much of it is verified on disk (the display's last count)."""
    total, done = doc["bytes_total"], doc.get("bytes_done", doc["bytes_total"])
    part = f", {human_size(done)} of it verified" if done < total else ""
    return f"{human_size(total)}{part} ({human_size(doc['bytes_downloaded'])} downloaded now)"


def pace(doc: Mapping[str, Any]) -> str:
    """The average rate; nothing to average when no byte moved."""
    if doc["bytes_downloaded"]:
        return f"average {human_rate(doc['rate'])}"
    if doc.get("bytes_done", 0) >= doc["bytes_total"]:
        return "already complete: nothing to fetch"
    return "nothing downloaded"


def human(doc: Mapping[str, Any]) -> str:
    """A few lines for a person: what, where, how big, how fast, from whom."""
    counts: dict[str, int] = {}
    for f in doc["files"]:
        counts[f["status"]] = counts.get(f["status"], 0) + 1
    lines = [
        f"{doc['dataset']}",
        f"  directory  {doc['directory']}",
        "  files      " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())),
        f"  size       {size_line(doc)}",
        f"  time       {human_duration(doc['seconds'])}, {pace(doc)}",
    ]
    if doc["sources"]:
        lines.append("  sources    " + ", ".join(f"{k} {human_size(v)}" for k, v in doc["sources"].items()))
    if doc["hash_failures"]:
        lines.append(f"  hash failures {doc['hash_failures']} (bad pieces were fetched again)")
    if doc.get("banned"):
        lines.append("  banned     " + ", ".join(doc["banned"]) + " (sent corrupt pieces)")
    lines.append(f"  status     {doc['exit_status'].lower()}")
    return "\n".join(lines)


class SourceLog:
    def __init__(self, interval: float = INTERVAL, max_samples: int = MAX_SAMPLES) -> None:
        self.interval = interval
        self.max_samples = max_samples
        self.samples: list[tuple[float, dict[str, int]]] = []  # (seconds from the start, endpoint → bytes so far)

    def sample(self, t: float, raw: Mapping[str, int]) -> None:
        """The cumulative bytes per endpoint at `t` seconds from the start."""
        if self.samples and t - self.samples[-1][0] < self.interval:
            return
        self.samples.append((t, dict(raw)))
        if len(self.samples) > self.max_samples:
            self.samples = [*self.samples[:-1:2], self.samples[-1]]  # the first and the newest stay
            self.interval *= 2

    def finish(self, t: float, raw: Mapping[str, int]) -> list[tuple[float, dict[str, int]]]:
        """Every sample kept, with the end of the run (`t`, `raw`) last."""
        if self.samples and self.samples[-1][0] >= t:
            self.samples.pop()
        self.samples.append((t, dict(raw)))
        return self.samples
