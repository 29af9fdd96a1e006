"""The site's prepared datasets: scan → layout → farms → torrents.

`prepare` is the whole pipeline, blocking (disk scans, hashing): the
daemon runs it in a thread and gets each dataset through `on_ready` as
soon as its torrent exists, so small datasets become seedable while big
ones still hash.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from torrents import metainfo
from torrents.build import FileSum
from torrents.dataset import Dataset, Problem
from torrents.errors import BtswarmError

from btserver import checksums, farm, holdings, layout, rucio_map, sharelist
from btserver.builder import BuildParams
from btserver.config import ServerConfig
from btserver.metacache import MetaCache

log = logging.getLogger("btswarm.server.inventory")

MAX_LEFT_OUT = 1000  # entries of a record's left_out list (its count says how many there were)


@dataclass(frozen=True)
class Prepared:
    """A dataset ready to seed and publish, held for as long as the site serves it: its
    summary and its publish record, encoded once, not its file list as objects (a
    Dataset, Metainfo and sums: several times the memory; docs/benchmarks.md "cost")."""

    name: str
    info_hash: str
    torrent_path: Path
    farm: Path
    total_size: int
    file_count: int
    own_names: dict[int, str]  # metainfo.own_names: the case twins libtorrent must not rename
    built: bool
    record_json: bytes = field(repr=False, default=b"{}")

    @classmethod
    def of(cls, dataset: Dataset, info_hash: str, torrent_path: Path, farm: Path, meta: metainfo.Metainfo,
           built: bool, sums: Mapping[str, FileSum], left_out: tuple[tuple[str, str], ...] = ()) -> "Prepared":
        return cls(dataset.name, info_hash, torrent_path, farm, meta.total_size, meta.file_count,
                   metainfo.own_names(meta), built, _record(dataset, info_hash, sums, left_out))

    def record(self) -> dict:
        """The dataset record of the publish contract: the catalog's checksums (adler32, or
        null), and each file's xxh3 as this site's replica holds it (docs/contracts.md)."""
        return json.loads(self.record_json)


def _record(dataset: Dataset, info_hash: str, sums: Mapping[str, FileSum],
            left_out: tuple[tuple[str, str], ...]) -> bytes:
    doc = {**dataset.record(), "info_hash": info_hash}
    for f in doc["files"]:
        have = sums.get(f["lfn"])
        if have is not None:
            f["xxh3"] = have.xxh3
    if left_out:
        doc["left_out"] = [{"path": p, "why": why} for p, why in left_out[:MAX_LEFT_OUT]]
        doc["left_out_count"] = len(left_out)
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass
class Report:
    prepared: list[Prepared] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    gone: list[Prepared] = field(default_factory=list)  # ready before this scan, absent from it
    excluded: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)  # dataset → (LFN, why)


def build_params(config: ServerConfig) -> BuildParams:
    urls = [f"{t.rstrip('/')}/announce" for t in config.tracker_urls()]
    return BuildParams(announce=urls[0] if urls else None, private=config.private, hybrid=config.hybrid,
                       threads=config.hash_threads, announce_list=tuple(urls) if len(urls) > 1 else ())


class Inventory:
    def __init__(self, config: ServerConfig, cache: MetaCache | None = None) -> None:
        self.config = config
        self.state = Path(config.state)
        self.farm_root = self.state / "farm"
        self.cache = cache or MetaCache(self.state / "torrents")
        self.params = build_params(config)
        self._lock = threading.Lock()
        self._by_name: dict[str, Prepared] = {}
        self.problems: list[Problem] = []
        self.excluded: dict[str, tuple[tuple[str, str], ...]] = {}
        self.done = threading.Event()
        self.external = holdings.Catalog((), ())  # datasets read elsewhere (Rucio), set by set_external
        self.shares: list[sharelist.Share] = []  # read again at each scan

    def set_external(self, cat: holdings.Catalog) -> None:
        """Datasets (and their problems) from the site's catalog service, used from the next prepare on."""
        self.external = cat

    def allowed_roots(self) -> list[str]:
        # The local side of the Rucio PFN map is where the RSE keeps its files.
        rse_roots = rucio_map.local_roots(self.config.rucio.pfn_map)
        return [os.path.realpath(r) for r in (*self.config.roots, *self.config.storage_roots, *rse_roots,
                                              *(s.path for s in self.shares))]

    def prepare(self, on_ready: Callable[[Prepared, Prepared | None], None] | None = None,
                stop: threading.Event | None = None) -> Report:
        """Scan and prepare every dataset; `on_ready(new, replaced)` for each one that is ready."""
        report = Report()
        try:
            self.shares = sharelist.load(self.state)
        except BtswarmError as exc:  # a damaged list shares nothing until mended; the rest goes on
            report.problems.append(Problem("", exc.subject, exc.problem))
            self.shares = []
        external = self.external
        cat = holdings.scan(self.config.roots, self.config.manifests, external.datasets, exclude=self.config.exclude,
                           allowed_roots=self.allowed_roots(), require_whole=self.config.require_whole,
                           shares=[(s.name, s.path) for s in self.shares])
        report.problems.extend(external.problems)
        report.problems.extend(cat.problems)
        report.excluded = cat.excluded
        layouts = layout.plan(cat.datasets, self.allowed_roots(), farm.prober())
        for lay in layouts:
            report.problems.extend(lay.problems)
            for p in lay.problems:
                log.warning("%s", p)
        farm.remove_stale(self.farm_root, [lay.name for lay in layouts if lay.ok])
        for lay in layouts:
            if stop is not None and stop.is_set():
                break
            if not lay.ok:
                continue
            left_out = cat.excluded.get(lay.name, ()) + tuple(
                (p.subject, p.problem) for p in report.problems if p.dataset == lay.name)
            try:
                prepared = self._prepare_one(lay, left_out)
            except (BtswarmError, OSError) as exc:
                prepared = [Problem(lay.name, getattr(exc, "subject", lay.name),
                                    getattr(exc, "problem", None) or str(exc))]
            if isinstance(prepared, list):
                for problem in prepared:
                    log.warning("%s", problem)
                report.problems.extend(prepared)
                continue
            with self._lock:
                replaced = self._by_name.get(prepared.name)
                self._by_name[prepared.name] = prepared
            report.prepared.append(prepared)
            if on_ready is not None:
                on_ready(prepared, replaced if replaced is not None and replaced.info_hash != prepared.info_hash
                         else None)
        if stop is None or not stop.is_set():
            keep = {p.name for p in report.prepared}
            with self._lock:
                for name in [n for n in self._by_name if n not in keep]:
                    report.gone.append(self._by_name.pop(name))
        self.problems = report.problems
        self.excluded = report.excluded
        self.done.set()
        return report

    def _prepare_one(self, lay: layout.DatasetLayout, left_out: tuple[tuple[str, str], ...] = ()
                     ) -> Prepared | list[Problem]:
        """The prepared dataset, or the problems that keep it from being published."""
        farm_dir, _ = farm.apply(lay, self.farm_root)
        top = str(farm_dir)
        entries = [(link.lfn, os.path.join(top, link.lfn)) for link in lay.links if not link.symlink]
        links = {link.lfn: link.text for link in lay.links if link.symlink}
        params = dataclasses.replace(self.params, adler32=checksums.wants_adler32(lay.dataset))
        cached = self.cache.ensure(lay.name, entries, params, links)
        bad = checksums.mismatches(lay.dataset, cached.sums)
        if bad:
            return bad
        fetched = next((s.info_hash for s in self.shares if s.name == lay.name and s.info_hash), None)
        if fetched is not None and fetched != cached.info_hash:
            # Published, it would be a rival version of the same bytes: its own swarm, no help to anyone.
            return [Problem(lay.name, lay.name, f"hashed here as {cached.info_hash}, but fetched as {fetched}: "
                            "this site builds torrents with other settings ([server] private, hybrid) than the "
                            "sites it fetched from, or the directory changed since; not shared")]
        return Prepared.of(lay.dataset, cached.info_hash, cached.torrent_path, farm_dir, cached.meta,
                           cached.built, cached.sums, left_out)

    def by_name(self, name: str) -> Prepared | None:
        with self._lock:
            return self._by_name.get(name)

    def all(self) -> list[Prepared]:
        with self._lock:
            return sorted(self._by_name.values(), key=lambda p: p.name)
