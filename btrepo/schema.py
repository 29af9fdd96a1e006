"""The catalog's SQLite file: how a connection opens it, its schema, and the migrations.

The schema is versioned with PRAGMA user_version; each migration runs once,
in order, in a transaction of its own.
"""

from __future__ import annotations

import logging
import sqlite3

log = logging.getLogger("btswarm.repo.schema")

# Each entry moves the schema from version i to i + 1. Never edit a shipped
# entry: add another.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE datasets (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        description TEXT NOT NULL DEFAULT '',
        current_version_id INTEGER,
        first_published TEXT NOT NULL,
        last_published TEXT NOT NULL
    );
    CREATE TABLE versions (
        id INTEGER PRIMARY KEY,
        dataset_id INTEGER NOT NULL REFERENCES datasets(id),
        info_hash TEXT NOT NULL UNIQUE,
        total_size INTEGER NOT NULL,
        file_count INTEGER NOT NULL,
        piece_length INTEGER NOT NULL,
        magnet TEXT NOT NULL,
        torrent BLOB NOT NULL,
        first_published TEXT NOT NULL
    );
    CREATE INDEX versions_dataset ON versions(dataset_id);
    CREATE TABLE files (
        version_id INTEGER NOT NULL REFERENCES versions(id),
        idx INTEGER NOT NULL,
        lfn TEXT NOT NULL,
        size INTEGER NOT NULL,
        adler32 TEXT,
        PRIMARY KEY (version_id, idx)
    ) WITHOUT ROWID;
    CREATE TABLE sites (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        first_seen TEXT NOT NULL
    );
    CREATE TABLE publications (
        version_id INTEGER NOT NULL REFERENCES versions(id),
        site_id INTEGER NOT NULL REFERENCES sites(id),
        first_published TEXT NOT NULL,
        last_published TEXT NOT NULL,
        PRIMARY KEY (version_id, site_id)
    ) WITHOUT ROWID;
    CREATE INDEX publications_site ON publications(site_id);
    CREATE INDEX datasets_last ON datasets(last_published);
    -- rowid = datasets.id. unicode61 splits on '.' and '_' (named here so the
    -- intent is visible), so 'IDCosmic' or 'DPD_IDCOMM' find ATLAS-style names.
    CREATE VIRTUAL TABLE datasets_fts USING fts5(
        name, files, description,
        tokenize = "unicode61 separators '._-'"
    );
    """,
    # Replica identity (btrepo/identity.py): each file's content sum as its site hashed it,
    # how each version related to the served one when first published, an operator's choice,
    # and the decision (JSON) taken after every change.
    """
    ALTER TABLE files ADD COLUMN xxh3 TEXT;
    ALTER TABLE files ADD COLUMN symlink TEXT;
    ALTER TABLE versions ADD COLUMN relation TEXT NOT NULL DEFAULT 'new_version';
    ALTER TABLE versions ADD COLUMN base_version_id INTEGER REFERENCES versions(id);
    UPDATE versions SET relation = 'created' WHERE id IN (SELECT min(id) FROM versions GROUP BY dataset_id);
    ALTER TABLE datasets ADD COLUMN pinned_version_id INTEGER REFERENCES versions(id);
    ALTER TABLE datasets ADD COLUMN decision TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE publications ADD COLUMN left_out TEXT;
    """,
    # Any part of a name, in any case: `cosmic` finds `...physics_IDCosmic...` (trigrams).
    """
    CREATE VIRTUAL TABLE datasets_tri USING fts5(name, tokenize = "trigram case_sensitive 0");
    INSERT INTO datasets_tri (rowid, name) SELECT id, name FROM datasets;
    """,
    # The Rucio DID of a dataset read from Rucio (its name is then scope:name).
    """
    ALTER TABLE datasets ADD COLUMN did_scope TEXT;
    ALTER TABLE datasets ADD COLUMN did_name TEXT;
    CREATE INDEX datasets_did_scope ON datasets(did_scope);
    """,
    # Which tier a site is (T2: a storage site; T3: a site sharing what it fetched, bt-get --share),
    # as its latest publication said. Independent of every other migration (it only adds a column).
    """
    ALTER TABLE sites ADD COLUMN kind TEXT NOT NULL DEFAULT 'T2';
    """,
    # Web seeds (BEP 19): where each site serves the version over HTTP, a JSON list of base URLs.
    """
    ALTER TABLE publications ADD COLUMN web_seeds TEXT;
    """,
    # Who may change what is served (btrepo/rights.py): a dataset's keepers, the T2 sites that have held its
    # served version (they may publish a new one), and every change of the served version: who, when, why.
    # A catalog from before starts with the holders of each served version as keepers, and one entry each.
    """
    CREATE TABLE keepers (
        dataset_id INTEGER NOT NULL REFERENCES datasets(id),
        site_id INTEGER NOT NULL REFERENCES sites(id),
        since TEXT NOT NULL,
        PRIMARY KEY (dataset_id, site_id)
    ) WITHOUT ROWID;
    INSERT INTO keepers (dataset_id, site_id, since)
        SELECT d.id, p.site_id, min(p.first_published) FROM datasets d
        JOIN publications p ON p.version_id = d.current_version_id JOIN sites s ON s.id = p.site_id
        WHERE s.kind = 'T2' GROUP BY d.id, p.site_id;
    CREATE TABLE served_history (
        id INTEGER PRIMARY KEY,
        dataset_id INTEGER NOT NULL REFERENCES datasets(id),
        at TEXT NOT NULL,
        version_id INTEGER REFERENCES versions(id),
        previous_version_id INTEGER REFERENCES versions(id),
        who TEXT NOT NULL,
        why TEXT NOT NULL,
        decided_by TEXT NOT NULL
    );
    CREATE INDEX served_history_dataset ON served_history(dataset_id, id);
    INSERT INTO served_history (dataset_id, at, version_id, who, why, decided_by)
        SELECT id, last_published, current_version_id, 'bt-repo', 'served when this history began',
               coalesce(json_extract(decision, '$.decided_by'), 'only')
        FROM datasets WHERE current_version_id IS NOT NULL;
    """,
    # The tracker's swarm of each version, sampled by the repository (btrepo/swarmlog.py) for the
    # dataset page's picture of the last day. Independent of every other migration (a table of its own).
    """
    CREATE TABLE swarm_samples (
        info_hash TEXT NOT NULL,
        at REAL NOT NULL,
        seeds INTEGER NOT NULL,
        leechers INTEGER NOT NULL,
        completed INTEGER NOT NULL,
        PRIMARY KEY (info_hash, at)
    ) WITHOUT ROWID;
    CREATE INDEX swarm_samples_at ON swarm_samples(at);
    """,
    # What the sites say they sent (btrepo/swarmlog.py), for the pictures of bytes served: with each swarm
    # sample the sites' counts of that version (JSON {site: bytes}; NULL from before), and each site's count
    # of every dataset. Each count runs from the site's daemon start: the pages draw what it grew by.
    """
    ALTER TABLE swarm_samples ADD COLUMN uploaded_by_site TEXT;
    CREATE TABLE site_samples (
        site TEXT NOT NULL,
        at REAL NOT NULL,
        uploaded INTEGER NOT NULL,
        PRIMARY KEY (site, at)
    ) WITHOUT ROWID;
    CREATE INDEX site_samples_at ON site_samples(at);
    """,
    # Rucio containers: which datasets each holds, as each site read it from Rucio (PUT /api/containers/...,
    # the site's list replacing its earlier one), and the files' names indexed, so that a file DID finds
    # the dataset holding it (GET /api/dids/...). Independent of every other migration.
    """
    CREATE TABLE container_datasets (
        container TEXT NOT NULL,
        site_id INTEGER NOT NULL REFERENCES sites(id),
        dataset TEXT NOT NULL,
        since TEXT NOT NULL,
        PRIMARY KEY (container, site_id, dataset)
    ) WITHOUT ROWID;
    CREATE INDEX files_lfn ON files(lfn);
    """,
)


def connect(path: str) -> sqlite3.Connection:
    """A connection to the catalog at `path`: WAL (readers beside the writer), foreign keys enforced."""
    # check_same_thread=False only so close() can run from the owning thread
    # at shutdown; each connection is otherwise used by one thread.
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema up to date; return the version now in place."""
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    if current > len(MIGRATIONS):
        raise RuntimeError(f"database schema version {current} is newer than this bt-repo ({len(MIGRATIONS)})")
    for version in range(current, len(MIGRATIONS)):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _statements(MIGRATIONS[version]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        log.info("database schema migrated to version %d", version + 1)
    return len(MIGRATIONS)


def _statements(script: str) -> list[str]:
    # executescript() would COMMIT our transaction; split on complete statements instead.
    out, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    return [s for s in out if s]
