"""The catalog in SQLite: the queries the pages and API need (the schema: btrepo/schema.py).

SQLite calls block, so none runs on the event loop: writes go through one
dedicated writer thread (one connection, so publishes are serialised and a
publish's read-decide-write happens in one transaction), reads through a
small pool with a connection per thread. WAL lets readers run beside the
writer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping, Sequence, TypeVar

from torrents.errors import Conflict, Forbidden, NotFound
from torrents.sitekinds import T2, T3

from btrepo import catalog, identity, rights
from btrepo.schema import connect, migrate

log = logging.getLogger("btswarm.repo.db")
T = TypeVar("T")

# bm25 weights for (name, files, description): a word in the name counts most.
_BM25 = "bm25(datasets_fts, 10.0, 1.0, 3.0)"

_SUMMARY_COLUMNS = """
    d.id, d.name, d.description, d.first_published, d.last_published,
    v.id, v.info_hash, v.total_size, v.file_count, d.decision, d.did_scope, d.did_name
"""
_SUMMARY_WIDTH = 12


MAX_HISTORY = 1000  # changes of the served version listed per dataset, newest first

# A swarm sample: (info-hash, seeds, leechers, completed, the sites' counts of it: {site: bytes sent}).
SwarmRow = tuple[str, int, int, int, Mapping[str, int]]


def utcnow() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def iso(stamp: str) -> str:
    """Stored stamps keep microseconds (for ordering); answers show whole seconds."""
    return stamp[:19] + "Z" if stamp else stamp


@dataclass(frozen=True)
class Summary:
    name: str
    info_hash: str
    total_size: int
    file_count: int
    sites: tuple[str, ...]
    description: str
    first_published: str
    last_published: str
    replicas: str = "agree"  # agree | partial | conflict | disputed | incomplete (see replicas_state)
    did: tuple[str, str] | None = None  # (scope, name) of a dataset read from Rucio
    t3_sites: tuple[str, ...] = ()  # those of `sites` that are T3s sharing what they fetched

    @property
    def t2_sites(self) -> tuple[str, ...]:
        return tuple(s for s in self.sites if s not in self.t3_sites)

    def to_json(self) -> dict:
        return {"name": self.name, "info_hash": self.info_hash, "total_size": self.total_size,
                "file_count": self.file_count, "sites": list(self.sites), "t2_sites": list(self.t2_sites),
                "t3_sites": list(self.t3_sites), "description": self.description,
                "first_published": iso(self.first_published), "last_published": iso(self.last_published),
                "replicas": self.replicas, "did": {"scope": self.did[0], "name": self.did[1]} if self.did else None}


def replicas_state(decision: identity.Decision) -> str:
    """One word for a listing: how the sites' replicas stand (worst first)."""
    if decision.disputed:
        return "disputed"
    if not decision.held:
        return "incomplete"
    if decision.conflict:
        return "conflict"
    if any(v.state is identity.SiteState.PARTIAL for v in decision.sites):
        return "partial"
    return "agree"


@dataclass(frozen=True)
class Version:
    info_hash: str
    first_published: str
    total_size: int
    file_count: int
    sites: tuple[str, ...]
    relation: str = "created"

    def to_json(self) -> dict:
        return {"info_hash": self.info_hash, "first_published": iso(self.first_published),
                "total_size": self.total_size, "file_count": self.file_count, "sites": list(self.sites),
                "relation": self.relation}


@dataclass(frozen=True)
class FileRow:
    lfn: str
    size: int
    adler32: str | None
    symlink: str | None = None

    def to_json(self) -> dict:
        doc = {"lfn": self.lfn, "size": self.size, "adler32": self.adler32}
        if self.symlink is not None:
            doc["symlink"] = self.symlink
        return doc


@dataclass(frozen=True)
class Detail:
    summary: Summary
    files: tuple[FileRow, ...]
    versions: tuple[Version, ...]  # newest first
    magnet: str
    piece_length: int
    decision: identity.Decision
    pinned: str | None = None
    left_out: dict[str, dict] = field(default_factory=dict)  # site → {"count", "entries": [[path, why]]}
    history: tuple[rights.Change, ...] = ()  # every change of the served version, newest first


@dataclass(frozen=True)
class TorrentFile:
    data: bytes
    info_hash: str
    decision: identity.Decision


@dataclass(frozen=True)
class SiteRow:
    name: str
    datasets: int
    last_published: str | None
    kind: str = "T2"

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "datasets": self.datasets,
                "last_published": iso(self.last_published) if self.last_published else None}


@dataclass(frozen=True)
class Published:
    outcome: catalog.Outcome
    name: str
    info_hash: str
    versions: int
    decision: identity.Decision
    why: str = ""  # how a new version relates to the served one

    @property
    def view(self) -> identity.SiteView | None:
        return next((v for v in self.decision.sites if v.info_hash == self.info_hash), None)

    def to_json(self) -> dict:
        """The publish answer: what happened, and where this site's replica stands (docs/contracts.md)."""
        view = self.view
        doc = {"result": self.outcome.value, "name": self.name, "info_hash": self.info_hash,
               "versions": self.versions, "served": self.decision.current,
               "state": view.state.value if view else "current", "why": self.why,
               "differing": list(view.difference.differing) if view else [],
               "missing": list(view.difference.missing) if view else [],
               "extra": list(view.difference.extra) if view else []}
        if view is not None and view.state is not identity.SiteState.CURRENT or self.decision.disputed:
            doc["problem"] = self.decision.summary(self.name)
        return doc


@dataclass
class _Connections:
    path: str
    all: list[sqlite3.Connection] = field(default_factory=list)
    local: threading.local = field(default_factory=threading.local)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self) -> sqlite3.Connection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            self.local.conn = conn
            with self.lock:
                self.all.append(conn)
        return conn


class Database:
    """The catalog; every public method is a coroutine that runs its SQL off the event loop."""

    def __init__(self, path: str | Path, *, readers: int = 2, kinds: Mapping[str, str] | None = None) -> None:
        """`kinds`: every configured site's kind ([repo] site_kinds, T2 by default); a stored site whose
        kind differs is set to it at once, and the datasets it holds decided again."""
        self.path = str(path)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="repo-db-writer")
        self._readers = ThreadPoolExecutor(readers, thread_name_prefix="repo-db-reader")
        self._conns = _Connections(self.path)
        self._closed = False
        # Migrate on the writer thread so its connection is the one that made the schema.
        self._writer.submit(lambda: _in_transaction(self._conns.get(),
                                                    lambda conn: _migrate_and_decide(conn, kinds or {}))).result()
        # Only ever asked for PRAGMA data_version (generation), so every commit is another's. No busy
        # wait (timeout 0): it is asked on the event loop, and a busy catalog is an unknown generation.
        self._watch = sqlite3.connect(self.path, timeout=0, isolation_level=None, check_same_thread=False)
        self._unknown = 0

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, lambda: fn(self._conns.get()))

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._writer, lambda: _in_transaction(self._conns.get(), fn))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._writer.shutdown(wait=True)
        self._readers.shutdown(wait=True)
        for conn in self._conns.all:
            conn.close()
        self._watch.close()

    def generation(self) -> int:
        """A number that changes whenever a commit (from any connection or process) changed the catalog.

        Called on the event loop, once per cached request (btrepo.cache): in WAL mode it reads the
        shared wal-index header without waiting for a writer (cheap: docs/benchmarks.md "repo").
        When SQLite answers busy instead (a recovery, a change of journal mode), a
        number never returned before: nothing kept is used until the catalog can say again.
        """
        try:
            return self._watch.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.OperationalError:
            self._unknown -= 1
            return self._unknown

    # -- writes -----------------------------------------------------------

    async def publish(self, pub: catalog.Publication, curators: tuple[str, ...] = ()) -> Published:
        """Store a publication, or refuse it (Forbidden) when the site's role does not allow it;
        `curators`: the T2 sites that may publish a new version of any dataset (btrepo/rights.py)."""
        return await self._write(lambda conn: _publish(conn, pub, utcnow(), curators))

    async def set_container(self, site: str, kind: str, container: str, datasets: Sequence[str]) -> int:
        """What `site` read from Rucio of a container: its datasets, replacing the site's earlier list
        (an empty one withdraws it). Returns how many datasets the container holds now, by every site."""
        return await self._write(lambda conn: _set_container(conn, site, kind, container, datasets, utcnow()))

    # -- reads ------------------------------------------------------------

    async def did(self, did: str) -> dict | None:
        """What a Rucio DID names here (`{"type": dataset|container|file, "datasets": [...]}`), or None."""
        return await self._read(lambda conn: _did(conn, did))

    async def search(self, params: catalog.SearchParams) -> tuple[int, list[Summary]]:
        return await self._read(lambda conn: _search(conn, params))

    async def choose(self, name: str, info_hash: str | None) -> identity.Decision:
        """An operator's choice of the version to serve (None: let the rules decide again)."""
        return await self._write(lambda conn: _choose(conn, name, info_hash))

    async def detail(self, name: str) -> Detail | None:
        return await self._read(lambda conn: _detail(conn, name))

    async def torrent(self, name: str, info_hash: str | None = None) -> TorrentFile | None:
        return await self._read(lambda conn: _torrent(conn, name, info_hash))

    async def conflicts(self) -> tuple[int, int]:
        """(datasets whose replicas conflict, datasets whose version is disputed), for the metrics."""
        return await self._read(_conflicts)

    async def info_hashes(self) -> list[str]:
        return await self._read(lambda conn: [r[0] for r in conn.execute(
            "SELECT info_hash FROM versions ORDER BY info_hash")])

    async def sites(self) -> list[SiteRow]:
        return await self._read(_sites)

    async def web_seeds(self, info_hash: str) -> list[tuple[str, str]]:
        """(site, BEP 19 base URL) of every site that published this version with web seeds, by site."""
        return await self._read(lambda conn: _web_seeds(conn, info_hash))

    async def count(self) -> int:
        return await self._read(lambda conn: conn.execute("SELECT count(*) FROM datasets").fetchone()[0])

    async def record_swarms(self, at: float, swarms: Sequence[SwarmRow], forget_before: float,
                            sites: Sequence[tuple[str, int]] = ()) -> int:
        """Keep the swarms (SwarmRow) at epoch `at` for the versions in the catalog, and (site, bytes it
        sent) for its sites; forget samples older than `forget_before`. One commit. Returns how many
        swarms were kept."""
        return await self._write(lambda conn: _record_swarms(conn, at, swarms, sites, forget_before))

    async def swarm_history(self, info_hash: str, since: float) -> list[tuple[float, int, int, int]]:
        """(epoch, seeds, leechers, completed) of a version since `since`, oldest first."""
        return await self._read(lambda conn: conn.execute(
            "SELECT at, seeds, leechers, completed FROM swarm_samples WHERE info_hash = ? AND at >= ? ORDER BY at",
            (info_hash, since)).fetchall())

    async def served_history(self, info_hash: str, since: float) -> list[tuple[float, int, dict[str, int]]]:
        """(epoch, completed, {site: bytes of it sent}) of a version since `since`, oldest first; {} where
        the tracker did not say."""
        rows = await self._read(lambda conn: conn.execute(
            "SELECT at, completed, uploaded_by_site FROM swarm_samples WHERE info_hash = ? AND at >= ? ORDER BY at",
            (info_hash, since)).fetchall())
        return [(at, completed, json.loads(by_site) if by_site else {}) for at, completed, by_site in rows]

    async def site_history(self, site: str, since: float) -> list[tuple[float, int]]:
        """(epoch, bytes the site had sent) since `since`, oldest first."""
        return await self._read(lambda conn: conn.execute(
            "SELECT at, uploaded FROM site_samples WHERE site = ? AND at >= ? ORDER BY at", (site, since)).fetchall())

    async def site(self, name: str) -> SiteRow | None:
        rows = await self._read(lambda conn: _sites(conn, name))
        return rows[0] if rows else None

    async def dataset_names(self, info_hashes: list[str]) -> dict[str, str]:
        """info-hash → the name of the dataset it is a version of, for those in the catalog."""
        def names(conn: sqlite3.Connection) -> dict[str, str]:
            marks = ",".join("?" * len(info_hashes))
            return dict(conn.execute("SELECT v.info_hash, d.name FROM versions v JOIN datasets d "
                                     f"ON d.id = v.dataset_id WHERE v.info_hash IN ({marks})", info_hashes).fetchall())
        return await self._read(names) if info_hashes else {}


def _set_container(conn: sqlite3.Connection, site: str, kind: str, container: str, datasets: Sequence[str],
                   now: str) -> int:
    site_id = _site_id(conn, site, now, kind)
    kept = {r[0]: r[1] for r in conn.execute(
        "SELECT dataset, since FROM container_datasets WHERE container = ? AND site_id = ?", (container, site_id))}
    conn.execute("DELETE FROM container_datasets WHERE container = ? AND site_id = ?", (container, site_id))
    conn.executemany("INSERT INTO container_datasets (container, site_id, dataset, since) VALUES (?, ?, ?, ?)",
                     [(container, site_id, d, kept.get(d, now)) for d in dict.fromkeys(datasets)])
    return conn.execute("SELECT count(DISTINCT dataset) FROM container_datasets WHERE container = ?",
                        (container,)).fetchone()[0]


def _did(conn: sqlite3.Connection, did: str) -> dict | None:
    """A dataset by its name; else a container by any site's word; else a file of a dataset of its scope."""
    if conn.execute("SELECT 1 FROM datasets WHERE name = ?", (did,)).fetchone():
        return {"did": did, "type": "dataset", "datasets": [did]}
    members = [r[0] for r in conn.execute(
        "SELECT DISTINCT dataset FROM container_datasets WHERE container = ? ORDER BY dataset", (did,))]
    if members:
        sites = [r[0] for r in conn.execute("""SELECT DISTINCT s.name FROM container_datasets c
                                               JOIN sites s ON s.id = c.site_id WHERE c.container = ?
                                               ORDER BY s.name""", (did,))]
        return {"did": did, "type": "container", "datasets": members, "sites": sites}
    scope, _, name = did.partition(":")
    # The file's scope is its dataset's: a file of another scope attached to the dataset is not found.
    holders = [r[0] for r in conn.execute("""SELECT DISTINCT d.name FROM files f
                                             JOIN datasets d ON d.current_version_id = f.version_id
                                             WHERE f.lfn = ? AND d.did_scope = ? ORDER BY d.name""",
                                          (name, scope))]
    if holders:
        return {"did": did, "type": "file", "file": name, "datasets": holders}
    return None


def _migrate_and_decide(conn: sqlite3.Connection, kinds: Mapping[str, str]) -> None:
    conn.execute("COMMIT")  # migrate() runs its own transactions
    migrate(conn)
    conn.execute("BEGIN IMMEDIATE")
    now = utcnow()
    # Datasets stored before the identity rules get their first decision.
    for (dataset_id,) in conn.execute("SELECT id FROM datasets WHERE decision = '{}'").fetchall():
        _decide(conn, dataset_id, now, rights.REPOSITORY, "first decision (the catalog was upgraded)")
    _set_kinds(conn, kinds, now)


def _set_kinds(conn: sqlite3.Connection, kinds: Mapping[str, str], now: str) -> None:
    """Stored sites get the kind the configuration gives them; what they hold is decided again."""
    changed = [(site_id, name, kinds[name]) for site_id, name, kind in conn.execute("SELECT id, name, kind FROM sites")
               if name in kinds and kinds[name] != kind]
    for site_id, name, kind in changed:
        log.warning("site %s is a %s now ([repo] site_kinds): deciding again what it holds", name, kind)
        conn.execute("UPDATE sites SET kind = ? WHERE id = ?", (kind, site_id))
        if kind != T2:
            conn.execute("DELETE FROM keepers WHERE site_id = ?", (site_id,))
        datasets = conn.execute("""SELECT DISTINCT v.dataset_id FROM publications p
                                   JOIN versions v ON v.id = p.version_id WHERE p.site_id = ?""", (site_id,)).fetchall()
        for (dataset_id,) in datasets:
            _decide(conn, dataset_id, now, rights.REPOSITORY, f"{name} is a {kind} now ([repo] site_kinds)")


def _in_transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result


def _publish(conn: sqlite3.Connection, pub: catalog.Publication, now: str, curators: tuple[str, ...] = ()
             ) -> Published:
    row = conn.execute("SELECT id, description, current_version_id, pinned_version_id FROM datasets WHERE name = ?",
                       (pub.name,)).fetchone()
    versions = _facts(conn, row[0]) if row is not None else []
    served = next((v for v in versions if row is not None and v.order == row[2]), None)
    if why_not := rights.refusal_by_kind(pub.site, pub.kind, info_hash=pub.info_hash,
                                         served=served.info_hash if served else None, declared=pub.declared):
        raise Forbidden(f"publish {pub.name}", why_not)
    site_id = _site_id(conn, pub.site, now, pub.kind)
    known = conn.execute("""SELECT v.id, v.relation, EXISTS (SELECT 1 FROM publications p WHERE p.version_id = v.id
                                                      AND p.site_id = ?)
                            FROM versions v WHERE v.info_hash = ?""", (site_id, pub.info_hash)).fetchone()

    if row is None:
        dataset_id = conn.execute(
            "INSERT INTO datasets (name, description, first_published, last_published) VALUES (?, ?, ?, ?)",
            (pub.name, pub.dataset.description, now, now)).lastrowid
    else:
        dataset_id = row[0]
    if pub.dataset.did is not None:  # once known it stays: a site publishing without one does not erase it
        conn.execute("UPDATE datasets SET did_scope = ?, did_name = ? WHERE id = ?",
                     (pub.dataset.did.scope, pub.dataset.did.name, dataset_id))
    if known is None:
        version_id, outcome, why, new_version = _add_version(conn, pub, dataset_id, served, now, curators)
    else:
        version_id = known[0]
        outcome, why, new_version = _republish(conn, pub, known, served, versions, curators)
    _record_publication(conn, pub, version_id, site_id, dataset_id, now)
    if row is not None:
        # A new version brings its own description; a re-publish only fills a missing one.
        replaces = outcome is catalog.Outcome.NEW_VERSION or not row[1]
        conn.execute("UPDATE datasets SET last_published = ?, description = ? WHERE id = ?",
                     (now, (pub.dataset.description if replaces else row[1]) or row[1], dataset_id))
    decision = _decide(conn, dataset_id, now, pub.site, rights.publication_why(outcome.value, why, new_version))
    versions_count = conn.execute("SELECT count(*) FROM versions WHERE dataset_id = ?", (dataset_id,)).fetchone()[0]
    return Published(outcome, pub.name, pub.info_hash, versions_count, decision, why)


def _add_version(conn: sqlite3.Connection, pub: catalog.Publication, dataset_id: int,
                 served: identity.VersionFacts | None, now: str, curators: tuple[str, ...]
                 ) -> tuple[int, catalog.Outcome, str, bool]:
    """A version nobody published yet, stored with its files: (its id, the outcome, why, whether it is a new
    version). Judged against the version served and the holdings before this publication."""
    judged = identity.classify(pub.facts(), pub.site, served, declared=pub.declared)
    new_version = judged.relation is identity.Relation.NEW_VERSION
    if new_version:
        assert served is not None  # a new version replaces one
        adds_only = not pub.declared and identity.compare(served.files, pub.facts()).adds_only
        _may_replace(conn, pub, served, all(f.adler32 is not None for f in pub.dataset.files), curators,
                     adds_only)
    outcome = catalog.Outcome.of(judged.relation, False)
    version_id = conn.execute(
        """INSERT INTO versions (dataset_id, info_hash, total_size, file_count, piece_length, magnet, torrent,
                                 first_published, relation, base_version_id)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        (dataset_id, pub.info_hash, pub.dataset.total_size, len(pub.dataset.files), pub.meta.piece_length,
         pub.meta.magnet(), pub.torrent, now, judged.relation.value, served.order if served else None)).lastrowid
    conn.executemany("""INSERT INTO files (version_id, idx, lfn, size, adler32, xxh3, symlink)
                        VALUES (?, ?, ?, ?, ?, ?, ?)""",
                     [(version_id, i, f.lfn, f.size, f.adler32, pub.xxh3.get(f.lfn), f.symlink)
                      for i, f in enumerate(pub.dataset.files)])
    return version_id, outcome, judged.why, new_version


def _republish(conn: sqlite3.Connection, pub: catalog.Publication, known: tuple[int, str, int],
               served: identity.VersionFacts | None, versions: list[identity.VersionFacts],
               curators: tuple[str, ...]) -> tuple[catalog.Outcome, str, bool]:
    """A version stored already (`known`: its id, relation, whether this site held it), published again: what
    the publication adds to it (a declaration, the .torrent, checksums). The outcome, why, whether it is a new
    version."""
    version_id, relation, held = known
    outcome = catalog.Outcome.of(None, bool(held))
    why, new_version = "", False
    if pub.declared and relation != identity.Relation.NEW_VERSION.value:
        # The site now says what it holds is the dataset's new version.
        if served is not None and served.order != version_id:
            _may_replace(conn, pub, served, next(v for v in versions if v.order == version_id).catalog_confirmed,
                         curators)
        conn.execute("UPDATE versions SET relation = ? WHERE id = ?",
                     (identity.Relation.NEW_VERSION.value, version_id))
        why = f"declared a new version by {pub.site}"
        new_version = True
    # Same info dict, but what lies outside it (the announce URL) may have
    # moved with the tracker: the newest publication's .torrent is served.
    conn.execute("UPDATE versions SET torrent = ?, magnet = ? WHERE id = ? AND torrent != ?",
                 (pub.torrent, pub.meta.magnet(), version_id, pub.torrent))
    # A site that checked the catalog (or summed the files) tells what an earlier one could not.
    # Updated by primary key: `lfn` has no index, and a WHERE on it scanned the version's
    # files once per file (docs/benchmarks.md "cost").
    index = dict(conn.execute("SELECT lfn, idx FROM files WHERE version_id = ?", (version_id,)))
    conn.executemany("""UPDATE files SET adler32 = coalesce(adler32, ?), xxh3 = coalesce(xxh3, ?)
                        WHERE version_id = ? AND idx = ?""",
                     [(f.adler32, pub.xxh3.get(f.lfn), version_id, index[f.lfn]) for f in pub.dataset.files
                      if (f.adler32 is not None or f.lfn in pub.xxh3) and f.lfn in index])
    return outcome, why, new_version


def _record_publication(conn: sqlite3.Connection, pub: catalog.Publication, version_id: int, site_id: int,
                        dataset_id: int, now: str) -> None:
    """The site holds this version (its left-out files and web seeds as it says now), and no other of the
    dataset."""
    left_out = json.dumps({"count": pub.left_out_count, "entries": pub.left_out}) if pub.left_out_count else None
    web_seeds = json.dumps(list(pub.web_seeds)) if pub.web_seeds else None
    conn.execute(
        """INSERT INTO publications (version_id, site_id, first_published, last_published, left_out, web_seeds)
           VALUES (?, ?, ?, ?, ?, ?)
           ON CONFLICT (version_id, site_id) DO UPDATE SET last_published = excluded.last_published,
                                                           left_out = excluded.left_out,
                                                           web_seeds = excluded.web_seeds""",
        (version_id, site_id, now, now, left_out, web_seeds))
    # A site holds one version of a dataset (its directory or manifest as it is
    # now): publishing this one means it no longer holds the others.
    conn.execute("""DELETE FROM publications WHERE site_id = ? AND version_id != ?
                    AND version_id IN (SELECT id FROM versions WHERE dataset_id = ?)""",
                 (site_id, version_id, dataset_id))


def _may_replace(conn: sqlite3.Connection, pub: catalog.Publication, served: identity.VersionFacts,
                 confirmed: bool, curators: tuple[str, ...], adds_only: bool = False) -> None:
    """Refuse (403) a new version that `pub`'s site may not publish over the `served` one."""
    keepers = {r[0] for r in conn.execute("""SELECT s.name FROM keepers k JOIN sites s ON s.id = k.site_id
                                             JOIN versions v ON v.dataset_id = k.dataset_id WHERE v.id = ?""",
                                          (served.order,))}
    if why_not := rights.refusal_of_new_version(pub.site, served=served, confirmed=confirmed, keepers=keepers,
                                                curators=curators, adds_only=adds_only):
        raise Forbidden(f"publish {pub.name}", why_not)


def _facts(conn: sqlite3.Connection, dataset_id: int) -> list[identity.VersionFacts]:
    """Every version of a dataset as identity's rules see it; `order` is the version's id."""
    files: dict[int, dict[str, identity.FileFacts]] = {}
    for vid, lfn, size, adler, xxh in conn.execute(
            """SELECT f.version_id, f.lfn, f.size, f.adler32, f.xxh3 FROM files f JOIN versions v ON v.id = f.version_id
               WHERE v.dataset_id = ?""", (dataset_id,)):
        files.setdefault(vid, {})[lfn] = identity.FileFacts(size, adler, xxh)
    holders: dict[int, set[str]] = {}
    t3: dict[int, set[str]] = {}
    for vid, site, kind in conn.execute("""SELECT p.version_id, s.name, s.kind FROM publications p
                                           JOIN sites s ON s.id = p.site_id JOIN versions v ON v.id = p.version_id
                                           WHERE v.dataset_id = ?""", (dataset_id,)):
        holders.setdefault(vid, set()).add(site)
        if kind == T3:
            t3.setdefault(vid, set()).add(site)
    rows = conn.execute("""SELECT v.id, v.info_hash, v.relation, b.info_hash, v.piece_length FROM versions v
                           LEFT JOIN versions b ON b.id = v.base_version_id WHERE v.dataset_id = ? ORDER BY v.id""",
                        (dataset_id,)).fetchall()
    return [identity.VersionFacts(h, vid, files.get(vid, {}), frozenset(holders.get(vid, ())),
                                  identity.Relation(rel), base, plen, frozenset(t3.get(vid, ())))
            for vid, h, rel, base, plen in rows]


def _decide(conn: sqlite3.Connection, dataset_id: int, now: str, who: str, why: str) -> identity.Decision:
    """Decide the version to serve from the stored facts; store the decision and re-index.

    A change of the served version is recorded (`who` caused it, `why`); the T2 sites holding the
    version served, unless it is disputed, become its keepers (btrepo/rights.py)."""
    before, pinned = conn.execute("""SELECT d.current_version_id, v.info_hash FROM datasets d
                                     LEFT JOIN versions v ON v.id = d.pinned_version_id WHERE d.id = ?""",
                                  (dataset_id,)).fetchone()
    versions = _facts(conn, dataset_id)
    decision = identity.decide(versions, pinned)
    current_id = next(v.order for v in versions if v.info_hash == decision.current)
    conn.execute("UPDATE datasets SET current_version_id = ?, decision = ? WHERE id = ?",
                 (current_id, json.dumps(decision.to_json(), separators=(",", ":")), dataset_id))
    if current_id != before:
        conn.execute("""INSERT INTO served_history (dataset_id, at, version_id, previous_version_id, who, why,
                                                    decided_by) VALUES (?, ?, ?, ?, ?, ?, ?)""",
                     (dataset_id, now, current_id, before, who, why, decision.decided_by.value))
        name = conn.execute("SELECT name FROM datasets WHERE id = ?", (dataset_id,)).fetchone()[0]
        log.info("%s: serving %s (%s; by %s; %s)", name, decision.current, why, who, decision.decided_by.value)
    if not decision.disputed:
        conn.execute("""INSERT OR IGNORE INTO keepers (dataset_id, site_id, since)
                        SELECT ?, p.site_id, ? FROM publications p JOIN sites s ON s.id = p.site_id
                        WHERE p.version_id = ? AND s.kind = ?""", (dataset_id, now, current_id, T2))
    _index(conn, dataset_id)
    return decision


def _choose(conn: sqlite3.Connection, name: str, info_hash: str | None) -> identity.Decision:
    row = conn.execute("SELECT id FROM datasets WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise NotFound(name, "no such dataset")
    version_id = None
    if info_hash is not None:
        found = conn.execute("SELECT id FROM versions WHERE dataset_id = ? AND info_hash = ?",
                             (row[0], info_hash.lower())).fetchone()
        if found is None:
            raise NotFound(f"{name} {info_hash}", "no such version of the dataset")
        version_id = found[0]
    conn.execute("UPDATE datasets SET pinned_version_id = ? WHERE id = ?", (version_id, row[0]))
    why = ("operator decision (bt-repo choose)" if info_hash is not None
           else "operator: the rules decide again (bt-repo choose --rules)")
    decision = _decide(conn, row[0], utcnow(), rights.OPERATOR, why)
    if info_hash is not None and decision.current != info_hash.lower():
        raise Conflict(f"{name} {info_hash}", "its bytes contradict the catalog's checksums; it cannot "
                                                      "be served")
    return decision


def _conflicts(conn: sqlite3.Connection) -> tuple[int, int]:
    conflict = disputed = 0
    for (text,) in conn.execute("SELECT decision FROM datasets"):
        doc = json.loads(text or "{}")
        conflict += bool(doc.get("conflict"))
        disputed += bool(doc.get("disputed"))
    return conflict, disputed


def _site_id(conn: sqlite3.Connection, site: str, now: str, kind: str = "T2") -> int:
    conn.execute("INSERT INTO sites (name, first_seen, kind) VALUES (?, ?, ?) "
                 "ON CONFLICT (name) DO UPDATE SET kind = excluded.kind", (site, now, kind))
    return conn.execute("SELECT id FROM sites WHERE name = ?", (site,)).fetchone()[0]


def _index(conn: sqlite3.Connection, dataset_id: int) -> None:
    """(Re)index a dataset's name, current file names and description for search."""
    name, description, version_id = conn.execute(
        "SELECT name, description, current_version_id FROM datasets WHERE id = ?", (dataset_id,)).fetchone()
    lfns = " ".join(r[0] for r in conn.execute("SELECT lfn FROM files WHERE version_id = ? ORDER BY idx",
                                               (version_id,)))
    conn.execute("DELETE FROM datasets_fts WHERE rowid = ?", (dataset_id,))
    conn.execute("INSERT INTO datasets_fts (rowid, name, files, description) VALUES (?, ?, ?, ?)",
                 (dataset_id, name, lfns, description))
    conn.execute("DELETE FROM datasets_tri WHERE rowid = ?", (dataset_id,))
    conn.execute("INSERT INTO datasets_tri (rowid, name) VALUES (?, ?)", (dataset_id, name))


def _search(conn: sqlite3.Connection, params: catalog.SearchParams) -> tuple[int, list[Summary]]:
    match = catalog.fts_query(params.q)
    joins, where, args = "", [], []
    join_args: list[str] = []
    for term in catalog.search_terms(params.q):
        tokens = "d.id IN (SELECT rowid FROM datasets_fts WHERE datasets_fts MATCH ?)"
        if term.substring is None:
            where.append(tokens)
            args.append(term.phrase)
        else:
            where.append(f"({tokens} OR d.id IN (SELECT rowid FROM datasets_tri WHERE datasets_tri MATCH ?))")
            args += [term.phrase, term.substring]
    if match:
        # bm25 for the order: the datasets whose tokens match rank by it, the others after.
        any_word = " OR ".join(t.phrase for t in catalog.search_terms(params.q))
        joins = ("LEFT JOIN (SELECT rowid AS id, " + _BM25 + " AS rank FROM datasets_fts "
                 "WHERE datasets_fts MATCH ?) r ON r.id = d.id")
        join_args.append(any_word)
    if params.site:
        where.append("""EXISTS (SELECT 1 FROM publications p JOIN sites s ON s.id = p.site_id
                                WHERE p.version_id = v.id AND s.name = ?)""")
        args.append(params.site)
    if params.scope:
        where.append("d.did_scope = ?")
        args.append(params.scope)
    if params.hidden:
        shown = " OR ".join(["d.name GLOB ?"] * len(params.granted))
        where.append(f"NOT ({' OR '.join(['d.name GLOB ?'] * len(params.hidden))})" +
                     (f" OR ({shown})" if shown else ""))
        where[-1] = f"({where[-1]})"
        args += [*params.hidden, *params.granted]
    base = f"FROM datasets d JOIN versions v ON v.id = d.current_version_id {joins}"
    if where:
        base += " WHERE " + " AND ".join(where)
    total = conn.execute(f"SELECT count(*) {base}", [*join_args, *args]).fetchone()[0]
    order = {
        "name": "d.name COLLATE NOCASE, d.name",
        "size": "v.total_size DESC, d.name",
        "date": "d.last_published DESC, d.id DESC",
        # An exact name ranks first whatever bm25 thinks, then the best matches.
        "relevance": "(d.name = ? COLLATE NOCASE) DESC, r.rank IS NULL, r.rank, d.name" if match
                     else "d.last_published DESC",
    }[params.sort]
    order_args = [params.q] if params.sort == "relevance" and match else []
    rows = conn.execute(f"SELECT {_SUMMARY_COLUMNS} {base} ORDER BY {order} LIMIT ? OFFSET ?",
                        [*join_args, *args, *order_args, params.per_page, params.offset]).fetchall()
    return total, _summaries(conn, rows)


def _summaries(conn: sqlite3.Connection, rows: list[tuple]) -> list[Summary]:
    sites = _version_sites(conn, [r[5] for r in rows])
    t3 = _version_sites(conn, [r[5] for r in rows], kind="T3")
    return [Summary(name=r[1], info_hash=r[6], total_size=r[7], file_count=r[8], sites=sites.get(r[5], ()),
                    description=r[2], first_published=r[3], last_published=r[4],
                    replicas=replicas_state(_decision(r[9])), did=(r[10], r[11]) if r[10] is not None else None,
                    t3_sites=t3.get(r[5], ())) for r in rows]


def _decision(text: str | None) -> identity.Decision:
    doc = json.loads(text or "{}")
    if not doc:  # stored before decisions were: the one version everyone holds
        return identity.Decision(None, identity.DecidedBy.ONLY, False, (), ())
    return identity.Decision.from_json(doc)


def _version_sites(conn: sqlite3.Connection, version_ids: list[int], kind: str | None = None
                   ) -> dict[int, tuple[str, ...]]:
    """Version id → the sites holding it (of one kind, T2 or T3, when `kind` is given)."""
    if not version_ids:
        return {}
    marks = ",".join("?" * len(version_ids))
    only = " AND s.kind = ?" if kind else ""
    out: dict[int, list[str]] = {}
    for vid, site in conn.execute(f"""SELECT p.version_id, s.name FROM publications p JOIN sites s ON s.id = p.site_id
                                      WHERE p.version_id IN ({marks}){only} ORDER BY s.name""",
                                  [*version_ids, *([kind] if kind else [])]):
        out.setdefault(vid, []).append(site)
    return {k: tuple(v) for k, v in out.items()}


def _detail(conn: sqlite3.Connection, name: str) -> Detail | None:
    row = conn.execute(f"""SELECT {_SUMMARY_COLUMNS}, v.magnet, v.piece_length, p.info_hash FROM datasets d
                           JOIN versions v ON v.id = d.current_version_id
                           LEFT JOIN versions p ON p.id = d.pinned_version_id WHERE d.name = ?""", (name,)).fetchone()
    if row is None:
        return None
    summary = _summaries(conn, [row[:_SUMMARY_WIDTH]])[0]
    files = tuple(FileRow(*r) for r in conn.execute(
        "SELECT lfn, size, adler32, symlink FROM files WHERE version_id = ? ORDER BY idx", (row[5],)))
    vrows = conn.execute("""SELECT id, info_hash, first_published, total_size, file_count, relation FROM versions
                            WHERE dataset_id = ? ORDER BY id DESC""", (row[0],)).fetchall()
    vsites = _version_sites(conn, [r[0] for r in vrows])
    versions = tuple(Version(r[1], r[2], r[3], r[4], vsites.get(r[0], ()), r[5]) for r in vrows)
    left_out = {site: json.loads(text) for site, text in conn.execute(
        """SELECT s.name, p.left_out FROM publications p JOIN sites s ON s.id = p.site_id
           JOIN versions v ON v.id = p.version_id WHERE v.dataset_id = ? AND p.left_out IS NOT NULL
           ORDER BY s.name""", (row[0],))}
    history = tuple(rights.Change(iso(at), h, prev, who, why, identity.DecidedBy(by)) for at, h, prev, who, why, by
                    in conn.execute("""SELECT e.at, v.info_hash, p.info_hash, e.who, e.why, e.decided_by
                                       FROM served_history e LEFT JOIN versions v ON v.id = e.version_id
                                       LEFT JOIN versions p ON p.id = e.previous_version_id
                                       WHERE e.dataset_id = ? ORDER BY e.id DESC LIMIT ?""", (row[0], MAX_HISTORY)))
    return Detail(summary=summary, files=files, versions=versions, magnet=row[_SUMMARY_WIDTH],
                  piece_length=row[_SUMMARY_WIDTH + 1],
                  decision=_decision(row[9]), pinned=row[_SUMMARY_WIDTH + 2], left_out=left_out, history=history)


def _torrent(conn: sqlite3.Connection, name: str, info_hash: str | None) -> TorrentFile | None:
    if info_hash:
        row = conn.execute("""SELECT v.torrent, v.info_hash, d.decision FROM versions v
                              JOIN datasets d ON d.id = v.dataset_id
                              WHERE d.name = ? AND v.info_hash = ?""", (name, info_hash.lower())).fetchone()
    else:
        row = conn.execute("""SELECT v.torrent, v.info_hash, d.decision FROM datasets d
                              JOIN versions v ON v.id = d.current_version_id WHERE d.name = ?""", (name,)).fetchone()
    return TorrentFile(bytes(row[0]), row[1], _decision(row[2])) if row else None


def _web_seeds(conn: sqlite3.Connection, info_hash: str) -> list[tuple[str, str]]:
    rows = conn.execute("""SELECT s.name, p.web_seeds FROM publications p JOIN sites s ON s.id = p.site_id
                           JOIN versions v ON v.id = p.version_id
                           WHERE v.info_hash = ? AND p.web_seeds IS NOT NULL ORDER BY s.name""",
                        (info_hash.lower(),)).fetchall()
    return [(site, url) for site, text in rows for url in json.loads(text)]


def _sites(conn: sqlite3.Connection, name: str | None = None) -> list[SiteRow]:
    """Every site, or the one named."""
    # A site holds a dataset when it published the dataset's current version.
    rows = conn.execute(f"""
        SELECT s.name,
               count(DISTINCT CASE WHEN d.current_version_id = p.version_id THEN d.id END),
               max(p.last_published), s.kind
        FROM sites s
        LEFT JOIN publications p ON p.site_id = s.id
        LEFT JOIN versions v ON v.id = p.version_id
        LEFT JOIN datasets d ON d.id = v.dataset_id
        {"" if name is None else "WHERE s.name = ?"}
        GROUP BY s.id ORDER BY s.name""", () if name is None else (name,)).fetchall()
    return [SiteRow(*r) for r in rows]


def _record_swarms(conn: sqlite3.Connection, at: float, swarms: Sequence[SwarmRow],
                   sites: Sequence[tuple[str, int]], forget_before: float) -> int:
    known = {r[0] for r in conn.execute("SELECT info_hash FROM versions")}
    rows = [(h, at, seeds, leechers, completed, json.dumps(dict(by_site)))
            for h, seeds, leechers, completed, by_site in swarms if h in known]
    conn.executemany("INSERT OR REPLACE INTO swarm_samples (info_hash, at, seeds, leechers, completed, "
                     "uploaded_by_site) VALUES (?, ?, ?, ?, ?, ?)", rows)
    conn.execute("DELETE FROM swarm_samples WHERE at < ?", (forget_before,))
    listed = {r[0] for r in conn.execute("SELECT name FROM sites")}
    conn.executemany("INSERT OR REPLACE INTO site_samples (site, at, uploaded) VALUES (?, ?, ?)",
                     [(site, at, uploaded) for site, uploaded in sites if site in listed])
    conn.execute("DELETE FROM site_samples WHERE at < ?", (forget_before,))
    return len(rows)
