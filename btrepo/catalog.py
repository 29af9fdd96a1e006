"""The repository's rules, as pure functions: what a publish means, what a search asks.

No I/O here. `parse_publish` turns a signed PUT body into a checked
`Publication` (the .torrent parsed by torrents.metainfo, the record checked
against it); what a publication does to the versions already known is
btrepo.identity's to decide; `parse_search` and `fts_query` turn query
parameters into a search.
The database applies the decisions (db.py); the HTTP layer maps errors to
statuses in one place (torrents.servicekit.web.error_middleware).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from torrents import did as dids
from torrents import metainfo
from torrents.dataset import Dataset, DatasetFile
from torrents.errors import AuthError, BtswarmError, Conflict, DatasetError, Forbidden, MetainfoError
from torrents.sitekinds import SITE_KINDS, T2, claim_problem

from btrepo import identity

MAX_DESCRIPTION = 64 * 1024
MAX_PER_PAGE = 200
DEFAULT_PER_PAGE = 50
SORTS = ("relevance", "name", "size", "date")


@dataclass(frozen=True)
class Publication:
    """A checked publish request: the torrent and the record agree, the site signed it."""

    site: str
    dataset: Dataset  # name, description and files (LFN, size, adler32) from the record
    meta: metainfo.Metainfo
    torrent: bytes
    xxh3: Mapping[str, str] = field(default_factory=dict)  # LFN → the replica's content sum
    declared: bool = False  # the site declares this a new version of the dataset
    left_out: tuple[tuple[str, str], ...] = ()  # what the site left out of its replica (path, why)
    left_out_count: int = 0
    kind: str = T2  # the publishing site's kind, as [repo] site_kinds gives it (btrepo/rights.py)
    web_seeds: tuple[str, ...] = ()  # BEP 19 base URLs where the site serves the dataset over HTTP

    @property
    def name(self) -> str:
        return self.dataset.name

    @property
    def info_hash(self) -> str:
        return self.meta.info_hash

    def facts(self) -> dict[str, identity.FileFacts]:
        return {f.lfn: identity.FileFacts(f.size, f.adler32, self.xxh3.get(f.lfn)) for f in self.dataset.files}


class Outcome(enum.Enum):
    """What a publication did; the value is the `result` label in answers and metrics."""

    CREATED = "created"  # a dataset never seen before
    NEW_VERSION = "new_version"  # a new info-hash that replaces the served version
    CONFLICT = "conflict"  # a new info-hash whose bytes or files disagree with the served version
    PARTIAL = "partial"  # a new info-hash holding part of the served version's files
    SITE_ADDED = "site_added"  # a known version, now also held by this site
    UNCHANGED = "unchanged"  # this site had already published this version

    @property
    def status(self) -> int:
        return 200 if self in (Outcome.SITE_ADDED, Outcome.UNCHANGED) else 201

    @classmethod
    def of(cls, relation: identity.Relation | None, held_by_site: bool) -> "Outcome":
        """A new version's relation to the served one, or (None) a known version's publication."""
        if relation is None:
            return cls.UNCHANGED if held_by_site else cls.SITE_ADDED
        return cls(relation.value)


def parse_publish(body: Any, path_name: str, signer: str, kind: str = T2) -> Publication:
    """Check a publish body `{"site", "kind"?, "torrent": base64, "record": {...}}` for dataset `path_name`.

    The signing site is authoritative; a body naming another site is refused.
    `kind` is the signer's kind as the repository's configuration gives it: a
    body that claims another is refused. Raises MetainfoError/DatasetError (400)
    when the torrent is unsafe or the record does not describe it, Conflict
    (409) when the path names another dataset, AuthError (401) when the body
    claims another site, Forbidden (403) when it claims another kind.
    """
    subject = f"publish {path_name}"
    body = _signed_body(body, subject, signer, "site, torrent and record")
    claimed_kind = body.get("kind")
    if claimed_kind is not None and claimed_kind not in SITE_KINDS:
        raise BtswarmError(subject, f"kind must be one of {', '.join(SITE_KINDS)}, got {str(claimed_kind)[:20]!r}")
    if problem := claim_problem(signer, claimed_kind, kind, "[repo] site_kinds"):
        raise Forbidden(signer, problem)
    text = body.get("torrent")
    if not isinstance(text, str) or not text:
        raise MetainfoError(subject, "torrent (base64 of the .torrent bytes) is missing")
    record = body.get("record")
    if not isinstance(record, dict):
        raise DatasetError(subject, "record is missing or not an object")
    torrent = metainfo.from_base64(text, subject=f"{subject}: torrent")
    meta = metainfo.parse(torrent, subject=f"{subject}: torrent")
    dataset = _record_dataset(record, subject)
    check_record_matches(dataset, record, meta)
    if path_name != dataset.name:
        raise Conflict(path_name, f"the path names this dataset but the record and torrent name {dataset.name!r}")
    declared = record.get("new_version", False)
    if not isinstance(declared, bool):
        raise DatasetError(subject, f"record new_version must be true or false, got {declared!r}")
    left_out, count = _record_left_out(record, subject)
    return Publication(site=signer, dataset=dataset, meta=meta, torrent=torrent, xxh3=_record_sums(record, subject),
                       declared=declared, left_out=left_out, left_out_count=count, kind=kind,
                       web_seeds=_record_web_seeds(record, subject))


MAX_WEB_SEEDS = 16
MAX_URL = 2048


def _record_web_seeds(record: Mapping[str, Any], subject: str) -> tuple[str, ...]:
    """The site's BEP 19 base URLs: http(s), printable, each ending in '/' (the client appends NAME/LFN)."""
    value = record.get("web_seeds", [])
    if not isinstance(value, list) or len(value) > MAX_WEB_SEEDS:
        raise DatasetError(subject, f"record web_seeds must be a list of at most {MAX_WEB_SEEDS} URLs")
    for url in value:
        if (not isinstance(url, str) or not url.startswith(("http://", "https://")) or not url.endswith("/")
                or len(url) > MAX_URL or not url.isprintable() or " " in url):
            raise DatasetError(subject, f"record web_seeds: {str(url)[:80]!r} is not an http(s) URL ending in '/'")
    return tuple(dict.fromkeys(value))


def _signed_body(body: Any, subject: str, signer: str, fields: str) -> dict:
    """A signed request's JSON object; the signing site is authoritative, a body naming another is refused."""
    if not isinstance(body, dict):
        raise BtswarmError(subject, f"body must be a JSON object with {fields}")
    claimed = body.get("site", signer)
    if claimed != signer:
        raise AuthError(signer, f"signed as {signer!r} but the body says site {claimed!r}")
    return body


MAX_CONTAINER = 100_000  # datasets a site may list for one container


@dataclass(frozen=True)
class Membership:
    """A checked container request: the datasets a site read from Rucio for one container."""

    site: str
    container: str
    datasets: tuple[str, ...]


def parse_container(body: Any, path_name: str, signer: str, kind: str = T2) -> Membership:
    """Check `{"site", "datasets": ["scope:name", ...]}` for container `path_name` (a DID).

    Only a storage site (T2) reads Rucio: a T3 shares what it fetched, never a
    catalog's word (Forbidden). An empty list withdraws the site's word."""
    subject = f"container {path_name}"
    container = str(dids.parse_did(path_name))
    if kind != T2:
        raise Forbidden(signer, f"a {kind} site does not publish Rucio containers (only a T2 reads Rucio)")
    body = _signed_body(body, subject, signer, "site and datasets")
    datasets = body.get("datasets")
    if not isinstance(datasets, list) or len(datasets) > MAX_CONTAINER:
        raise DatasetError(subject, f"datasets must be a list of at most {MAX_CONTAINER} DIDs")
    names = []
    for value in datasets:
        if not isinstance(value, str):
            raise DatasetError(subject, f"datasets: {value!r} is not a DID")
        names.append(str(dids.parse_did(value)))
    if container in names:
        raise DatasetError(subject, "a container cannot hold itself")
    return Membership(signer, container, tuple(dict.fromkeys(names)))


MAX_LEFT_OUT = 1000


def _record_left_out(record: Mapping[str, Any], subject: str) -> tuple[tuple[tuple[str, str], ...], int]:
    """What the site excluded or refused: at most MAX_LEFT_OUT (path, why), and how many there were."""
    raw = record.get("left_out") or []
    if not isinstance(raw, list) or not all(isinstance(x, dict) and isinstance(x.get("path"), str)
                                            and isinstance(x.get("why"), str) for x in raw):
        raise DatasetError(subject, "record left_out must be a list of {path, why}")
    entries = tuple((x["path"][:4096], x["why"][:1000]) for x in raw[:MAX_LEFT_OUT])
    count = record.get("left_out_count", len(raw))
    if not isinstance(count, int) or isinstance(count, bool) or count < len(entries):
        raise DatasetError(subject, f"record left_out_count {count!r} is not a count of left_out")
    return entries, count


_XXH3 = re.compile(r"^[0-9a-f]{32}$")


def _record_sums(record: Mapping[str, Any], subject: str) -> dict[str, str]:
    """LFN → xxh3 content sum, for the files that carry one."""
    out = {}
    for i, f in enumerate(record.get("files") or ()):
        value = f.get("xxh3") if isinstance(f, dict) else None
        if value is None:
            continue
        if not isinstance(value, str) or not _XXH3.match(value):
            raise DatasetError(subject, f"record file {i} has bad xxh3 {value!r} (32 lowercase hex characters)")
        out[f["lfn"]] = value
    return out


def _record_dataset(record: Mapping[str, Any], subject: str) -> Dataset:
    name = record.get("name")
    description = record.get("description") or ""
    files = record.get("files")
    if not isinstance(description, str):
        raise DatasetError(subject, "record description is not a string")
    if len(description) > MAX_DESCRIPTION:
        raise DatasetError(subject, f"record description is longer than {MAX_DESCRIPTION} characters")
    if not isinstance(files, list):
        raise DatasetError(subject, "record files is missing or not a list")
    entries = []
    for i, f in enumerate(files):
        if not isinstance(f, dict):
            raise DatasetError(subject, f"record file {i} is not an object")
        size = f.get("size")
        if not isinstance(size, int) or isinstance(size, bool):
            raise DatasetError(subject, f"record file {i} has bad size {size!r}")
        adler = f.get("adler32")
        if adler is not None and not isinstance(adler, str):
            raise DatasetError(subject, f"record file {i} has bad adler32 {adler!r}")
        # DatasetFile and Dataset check LFN safety, sizes, checksums, links and duplicates.
        entries.append(DatasetFile(f.get("lfn"), size, adler, symlink=f.get("symlink")))  # type: ignore[arg-type]
    # A dataset from Rucio carries its DID, and is then named by it (torrents.did).
    did = dids.from_record(record.get("did"))
    return Dataset(name, tuple(entries), description, did=did)  # type: ignore[arg-type]


def check_record_matches(dataset: Dataset, record: Mapping[str, Any], meta: metainfo.Metainfo) -> None:
    """The record must describe exactly the torrent: name, info-hash, total size, files and sizes."""
    subject = f"record {dataset.name}"
    if dataset.name != meta.name:
        raise MetainfoError(subject, f"name differs from the torrent's name {meta.name!r}")
    claimed_hash = record.get("info_hash")
    if claimed_hash is not None and str(claimed_hash).lower() != meta.info_hash:
        raise MetainfoError(subject, f"info_hash {claimed_hash} differs from the torrent's {meta.info_hash}")
    torrent_files = sorted((f.lfn, f.length, f.target) for f in meta.data_files)
    record_files = sorted((f.lfn, f.size, f.symlink) for f in dataset.files)
    if len(torrent_files) != len(record_files):
        raise MetainfoError(subject, f"{len(record_files)} files but the torrent has {len(torrent_files)}")
    for (t_lfn, t_size, t_link), (r_lfn, r_size, r_link) in zip(torrent_files, record_files):
        if t_lfn != r_lfn:
            raise MetainfoError(subject, f"file {r_lfn!r} is not in the torrent (it has {t_lfn!r})")
        if t_size != r_size:
            raise MetainfoError(subject, f"file {r_lfn!r} is {r_size} bytes but {t_size} in the torrent")
        if t_link != r_link:
            raise MetainfoError(subject, f"file {r_lfn!r} links to {r_link!r} but to {t_link!r} in the torrent")
    total = record.get("total_size", dataset.total_size)
    if total != meta.total_size or dataset.total_size != meta.total_size:
        raise MetainfoError(subject, f"total size {total} differs from the torrent's {meta.total_size}")


def live_web_seeds(published: list[tuple[str, str]], holders: tuple[str, ...] | None) -> list[tuple[str, str]]:
    """The (site, base URL) web seeds to list: those of the sites that hold the version now.

    `published` is what the sites published; `holders` the sites the tracker
    sees up and listing the info-hash in their heartbeat. A site that removed
    the dataset, found its replica damaged or went down is left out. When the
    tracker does not say (down, or too old to know), every published one is
    listed: a client behind a firewall may have nothing else, and a dead web
    seed costs it one failed connection.
    """
    if holders is None:
        return list(published)
    return [(site, url) for site, url in published if site in holders]


@dataclass(frozen=True)
class SearchParams:
    q: str = ""
    site: str = ""
    scope: str = ""  # only datasets with a DID in this Rucio scope
    # Members-only datasets (torrents/access.py), as GLOBs over the name: those matching `hidden` are left out
    # unless they match `granted` too (what the reader's token reads).
    hidden: tuple[str, ...] = ()
    granted: tuple[str, ...] = ()
    page: int = 1
    per_page: int = DEFAULT_PER_PAGE
    sort: str = "date"

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per_page

    def pages(self, total: int) -> int:
        return max(1, -(-total // self.per_page))


def parse_search(query: Mapping[str, str], *, default_per_page: int = DEFAULT_PER_PAGE) -> SearchParams:
    """Query parameters → SearchParams; a bad value is a 400 naming the parameter."""
    q = query.get("q", "").strip()[:500]
    site = query.get("site", "").strip()
    scope = query.get("scope", "").strip()
    page = _positive(query.get("page", ""), "page", 1, None)
    per_page = _positive(query.get("per_page", ""), "per_page", default_per_page, MAX_PER_PAGE)
    sort = query.get("sort", "").strip().lower() or ("relevance" if fts_query(q) else "date")
    if sort not in SORTS:
        raise BtswarmError(f"sort={query.get('sort')}", f"unknown sort order (use one of: {', '.join(SORTS)})")
    if sort == "relevance" and not fts_query(q):
        sort = "date"  # nothing to rank by without words
    return SearchParams(q=q, site=site, scope=scope, page=page, per_page=per_page, sort=sort)


def _positive(text: str, what: str, default: int, maximum: int | None) -> int:
    text = text.strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < 1:
        raise BtswarmError(f"{what}={text}", "must be a whole number of at least 1")
    value = int(text)
    if maximum is not None and value > maximum:
        raise BtswarmError(f"{what}={text}", f"must be at most {maximum}")
    return value


_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Term:
    """One word of a search: its token phrase (FTS5 over names, files, descriptions) and, when it
    is long enough, the substring to find in names (trigrams: `cosmic` in `IDCosmic`)."""

    phrase: str
    substring: str | None


def search_terms(q: str) -> list[Term]:
    """User words → terms; every one must match, by token prefix or as a part of the name.

    Only letters and digits reach the token phrase, and the substring is one
    quoted FTS5 string (quotes doubled), so user text is never FTS5 syntax.
    """
    out = []
    for word in q.split():
        parts = _WORD.findall(word)
        if not parts:
            continue
        substring = '"' + word.replace('"', '""') + '"' if len(word) >= 3 else None
        out.append(Term('"' + " ".join(parts) + '"*', substring))
    return out


def fts_query(q: str) -> str | None:
    """User words → an FTS5 query: every word must match, each as a prefix phrase.

    The index splits names on '.', '_' and other punctuation, so a word like
    `DPD_IDCOMM` becomes the phrase "dpd idcomm" and finds
    `...merge.DPD_IDCOMM.o4...`. Only letters and digits reach FTS5, so user
    text can never be FTS5 syntax. None when there is no word to look for.
    """
    phrases = []
    for word in q.split():
        parts = _WORD.findall(word)
        if parts:
            phrases.append('"' + " ".join(parts) + '"*')
    return " ".join(phrases) if phrases else None
