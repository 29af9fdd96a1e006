"""Precomputed .torrent files: <state>/torrents/<dataset>.torrent + .json.

The .json holds the fingerprint (LFN, size, mtime, target of every farm
link, plus the build parameters), the info-hash and each file's sums
(xxh3, adler32) as the build read them. An unchanged fingerprint means the
stored .torrent and sums are still right and nothing is rehashed; a
changed one means a new build and a new info-hash. Blocking (hashing, stat
of every file): callers run `ensure` off the event loop.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from torrents import metainfo
from torrents.build import FileSum
from torrents.errors import MetainfoError
from torrents.fingerprint import fingerprint

from btserver.builder import BuildParams, make, trackers_match, with_trackers

log = logging.getLogger("btswarm.server.metacache")


@dataclass(frozen=True)
class Cached:
    name: str
    info_hash: str
    torrent_path: Path
    fingerprint: str
    built: bool  # True when this call hashed the files
    meta: metainfo.Metainfo
    sums: dict[str, FileSum]  # LFN → what the file held when it was hashed


class MetaCache:
    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)

    def paths(self, name: str) -> tuple[Path, Path]:
        return self.directory / f"{name}.torrent", self.directory / f"{name}.json"

    def ensure(self, name: str, entries: Sequence[tuple[str, str]], params: BuildParams,
               links: Mapping[str, str] | None = None) -> Cached:
        """The .torrent for (LFN, farm path) entries and the dataset's links (LFN → target LFN):
        reused if the fingerprint matches, else built."""
        self.directory.mkdir(parents=True, exist_ok=True)
        torrent_path, json_path = self.paths(name)
        fp = fingerprint(entries, extra=params.key(), links=links or {})
        reused = self._load(name, fp, params)
        if reused is not None:
            return reused
        started = time.monotonic()
        built = make(name, entries, params, links)
        meta = built.meta
        _write_atomic(torrent_path, built.torrent)
        record = {"name": name, "info_hash": meta.info_hash, "fingerprint": fp, "params": params.key(),
                  "total_size": meta.total_size, "files": meta.file_count, "built_at": int(time.time()),
                  "sums": {lfn: [s.size, s.xxh3, s.adler32] for lfn, s in built.sums.items()}}
        _write_atomic(json_path, json.dumps(record, separators=(",", ":")).encode())
        log.info("torrent %s: built %s in %.2f s (%d files)", name, meta.info_hash,
                 time.monotonic() - started, meta.file_count)
        return Cached(name, meta.info_hash, torrent_path, fp, True, meta, built.sums)

    def _load(self, name: str, fp: str, params: BuildParams) -> Cached | None:
        torrent_path, json_path = self.paths(name)
        try:
            record = json.loads(json_path.read_text(encoding="utf-8"))
            data = torrent_path.read_bytes()
        except (OSError, ValueError):
            return None
        if record.get("fingerprint") != fp:
            return None
        try:
            sums = {lfn: FileSum(int(size), str(xxh), adler) for lfn, (size, xxh, adler) in record["sums"].items()}
        except (KeyError, TypeError, ValueError, AttributeError):
            return None  # made before files were summed: hash once more
        try:
            meta = metainfo.parse(data, subject=str(torrent_path))
        except MetainfoError as exc:  # a damaged cache entry is rebuilt, not fatal
            log.warning("%s: unreadable cached torrent (%s); rebuilding", torrent_path, exc)
            return None
        if meta.info_hash != record.get("info_hash"):
            return None
        if params.announce and not trackers_match(meta, params):
            # The trackers moved: only announce and announce-list (outside
            # the info dict) change, so rewrite them without rehashing.
            data, meta = with_trackers(data, meta, params)
            _write_atomic(torrent_path, data)
        log.debug("torrent %s: unchanged (%s)", name, meta.info_hash)
        return Cached(name, meta.info_hash, torrent_path, fp, False, meta, sums)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
