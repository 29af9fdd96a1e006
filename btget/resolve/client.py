"""HTTP to the repository and the tracker (aiohttp): records, .torrents, search, site names.

bt-get talks to the services only over HTTP (docs/contracts.md); it never
imports them. Every call has a deadline; a 404 for a dataset becomes
NotFound with close names from the repository's search, so a typo in a
60-character dataset name gets a "did you mean".
"""

from __future__ import annotations

import asyncio

import difflib
import json
import re
from dataclasses import dataclass
from typing import Any, Sequence
from urllib.parse import quote, urlsplit, urlunsplit

import aiohttp

from torrents import urls
from torrents.errors import MetainfoError, NotFound, TokenRefused
from torrents.servicekit import tls

from btget.errors import RepoError, ReplicaConflict
from btget.resolve import bearer
from btget.resolve.target import not_a_torrent, torrent_link

TIMEOUT = aiohttp.ClientTimeout(total=30, connect=5)
SITES_TIMEOUT = aiohttp.ClientTimeout(total=3, connect=2)  # site names are for the summary only
MAX_TORRENT = 64 * 1024 * 1024
MAX_JSON = 16 * 1024 * 1024
MAX_SEARCHES = 4  # queries spent looking for close names


@dataclass(frozen=True)
class Resolved:
    torrent: bytes
    record: dict[str, Any] | None  # the repository's dataset record, when there is one

    def __repr__(self) -> str:
        # Short: asyncio (3.11) reprs the result of the task asyncio.run ran, and a
        # 100,000-file torrent and record took a quarter of a second to print in full.
        return f"Resolved({len(self.torrent)} bytes of torrent, {'a' if self.record else 'no'} record)"


class Client:
    def __init__(self, repo: str, session: aiohttp.ClientSession, *, hint: str = "",
                 token: bearer.TokenSource | None = None) -> None:
        self.repo = repo.rstrip("/")
        self.session = session
        self.hint = hint  # said after a repository error: how to name another one
        self.token = token  # the user's bearer token (btget/resolve/bearer.py), sent to the repository only (https/loopback)

    async def _get(self, url: str, limit: int, what: str) -> tuple[int, bytes]:
        mine = self.token and _base(url) == _base(self.repo) and bearer.carries_token(url)
        headers = self.token.header() if mine else {}  # type: ignore[union-attr]
        try:
            async with self.session.get(url, timeout=TIMEOUT, headers=headers) as resp:
                # read(n) returns what is buffered (up to n), not the whole
                # body: a large answer (a 10,000-file record) arrives in pieces.
                # Gathered in a bytearray: `bytes +=` copied the whole body for every
                # chunk (a 10 MB record in 64 KiB chunks: 800 MB of copying).
                body = bytearray()
                while len(body) <= limit:
                    chunk = await resp.content.read(limit + 1 - len(body))
                    if not chunk:
                        break
                    body += chunk
                if len(body) > limit:
                    raise RepoError(url, f"{what} larger than {limit} bytes")
                if resp.status in (401, 403) and "WWW-Authenticate" in resp.headers:
                    raise self._refused(resp.status, bytes(body), resp.headers["WWW-Authenticate"])
                return resp.status, bytes(body)
        except aiohttp.ClientConnectorCertificateError as exc:  # before its base class: not a closed port
            raise RepoError(_base(url), tls.certificate_problem(exc, tls.FLAG_HINT) or str(exc)) from None
        except aiohttp.ClientConnectorError as exc:
            why = "connection refused" if isinstance(exc.os_error, ConnectionRefusedError) else \
                (exc.os_error.strerror or str(exc.os_error)).lower()
            raise RepoError(_base(url), f"{why}: is bt-repo running at this URL?{self.hint}") from None
        except aiohttp.ClientError as exc:
            raise RepoError(_base(url), f"cannot reach ({exc.__class__.__name__}: {exc}){self.hint}") from None
        except TimeoutError:
            raise RepoError(_base(url), f"no answer in time{self.hint}") from None

    def _refused(self, status: int, body: bytes, challenge: str) -> TokenRefused:
        """A members-only refusal (RFC 6750) as one line: the repository's reason, and the token's origin."""
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        said = doc.get("error") if isinstance(doc, dict) and isinstance(doc.get("error"), str) else None
        if said is None:
            described = re.search(r'error_description="([^"]*)"', challenge)
            said = f"token: {described.group(1)}" if described else f"{self.repo}: HTTP {status} (a token is needed)"
        subject, _, problem = said.partition(": ")
        withheld = self.repo if self.token and not bearer.carries_token(self.repo) else None
        return TokenRefused(subject, bearer.refused_text(problem, self.token, withheld_from=withheld), status=status)

    async def _api(self, path: str) -> tuple[int, Any]:
        """GET the repository's JSON API at `path`; an answer that is not JSON is no repository."""
        status, body = await self._get(f"{self.repo}{path}", MAX_JSON, "answer")
        try:
            return status, json.loads(body) if body else None
        except ValueError:
            raise RepoError(self.repo, f"not a btswarm repository (its answer is not the JSON API){self.hint}") \
                from None

    async def dataset(self, name: str) -> dict[str, Any]:
        """GET /api/datasets/{name}; NotFound with suggestions on 404."""
        status, doc = await self._api(urls.dataset_api(name))
        if status == 404:
            if not (isinstance(doc, dict) and str(doc.get("error", "")).endswith("no such dataset")):
                raise RepoError(self.repo, f"not a btswarm repository (GET {urls.dataset_api(name)} answered 404 "
                                           f"{_error_text(doc).strip() or 'without saying why'}){self.hint}")
            raise NotFound(name, _not_found_text(self.repo, await self.close_names(name)))
        if status != 200 or not isinstance(doc, dict):
            raise RepoError(self.repo, f"GET /api/datasets/{name}: HTTP {status}{_error_text(doc)}")
        return doc

    async def did(self, did: str) -> dict[str, Any] | None:
        """GET /api/dids/{did}: what a Rucio DID names here (a dataset, a container's datasets, the datasets
        holding a file), or None when the repository knows no such DID."""
        status, doc = await self._api(f"/api/dids/{quote(did, safe='')}")
        if status == 404:
            return None
        if status != 200 or not isinstance(doc, dict) or not isinstance(doc.get("datasets"), list):
            raise RepoError(self.repo, f"GET /api/dids/{did}: HTTP {status}{_error_text(doc)}")
        return doc

    async def torrent(self, name: str, info_hash: str | None = None) -> bytes:
        """GET /datasets/{name}.torrent (the newest version, or `info_hash`'s)."""
        url = f"{self.repo}{urls.dataset_torrent(name)}"
        if info_hash:
            url += f"?info_hash={info_hash}"
        status, body = await self._get(url, MAX_TORRENT, ".torrent")
        if status == 404:
            raise NotFound(name, _not_found_text(self.repo, await self.close_names(name)))
        if status == 409:
            raise ReplicaConflict(f"{name} {info_hash}" if info_hash else name,
                                  "the repository does not serve this version (its replicas disagree, or its bytes "
                                  f"contradict the catalog); see {self.repo}{urls.dataset_page(name)}")
        if status != 200:
            raise RepoError(self.repo, f"GET /datasets/{name}.torrent: HTTP {status}")
        return body

    async def search(self, query: str) -> list[str]:
        status, doc = await self._api(f"/api/datasets?q={quote(query, safe='')}&per_page=100")
        if status != 200 or not isinstance(doc, dict):
            return []
        return [d["name"] for d in doc.get("datasets", []) if isinstance(d, dict) and isinstance(d.get("name"), str)]

    async def search_page(self, query: str, page: int = 1, per_page: int = 200, *, sort: str = "name",
                          swarm: bool = True) -> dict[str, Any]:
        """One page of GET /api/datasets (with each row's live swarm when `swarm`): the answer as is."""
        path = (f"/api/datasets?q={quote(query, safe='')}&page={page}&per_page={per_page}&sort={sort}"
                + ("&swarm=1" if swarm else ""))
        status, doc = await self._api(path)
        if status != 200 or not isinstance(doc, dict) or not isinstance(doc.get("datasets"), list):
            if status == 404:
                raise RepoError(self.repo, f"not a btswarm repository (GET /api/datasets answered 404){self.hint}")
            raise RepoError(self.repo, f"GET /api/datasets: HTTP {status}{_error_text(doc)}")
        return doc

    async def search_all(self, query: str, limit: int) -> tuple[int, list[dict[str, Any]]]:
        """(how many match, the first `limit` rows by name), a page of 200 at a time."""
        rows: list[dict[str, Any]] = []
        total = 0
        page = 1
        while len(rows) < limit:
            doc = await self.search_page(query, page, min(200, limit))
            total = doc.get("total") if isinstance(doc.get("total"), int) else len(doc["datasets"])
            rows += [d for d in doc["datasets"] if isinstance(d, dict)]
            if not doc["datasets"] or len(rows) >= total:
                break
            page += 1
        return total, rows[:limit]

    async def close_names(self, name: str) -> list[str]:
        """Names in the repository close to `name`, best first (a few searches, difflib)."""
        seen: list[str] = []
        for query in search_queries(name)[:MAX_SEARCHES]:
            try:
                for found in await self.search(query):
                    if found not in seen:
                        seen.append(found)
            except RepoError:
                break
        return suggest(name, seen)

    async def resolve(self, name: str, info_hash: str | None = None) -> Resolved:
        # Both at once: on a 10,000-file dataset each answer is a few hundred kB.
        record, torrent = await asyncio.gather(self.dataset(name), self.torrent(name, info_hash),
                                               return_exceptions=True)
        if isinstance(record, BaseException):  # the record's error first: it carries the suggestions
            raise record
        if info_hash is None and record.get("servable") is False:
            # The repository could not decide which replica is the dataset: never guess.
            raise ReplicaConflict(name, _conflict_text(record))
        if isinstance(torrent, BaseException):
            raise torrent
        return Resolved(torrent, checksums_only(record))

    async def fetch(self, url: str) -> bytes:
        """The .torrent at URL; a repository's dataset page (pasted from the browser) leads to its own."""
        body = await self._fetch_one(url)
        why = not_a_torrent(body)
        if why == "an HTML page, not a .torrent" and (link := torrent_link(body, url)):
            body = await self._fetch_one(link)  # once: a page naming a page is not followed further
            why = not_a_torrent(body)
            url = link
        if why:
            raise MetainfoError(url, why)
        return body

    async def _fetch_one(self, url: str) -> bytes:
        status, body = await self._get(url, MAX_TORRENT, ".torrent")
        if status == 404:
            raise NotFound(url, "HTTP 404")
        if status != 200:
            try:
                doc = json.loads(body)
            except ValueError:
                doc = None
            raise RepoError(url, f"HTTP {status}{_error_text(doc)}")
        return body

    async def site_names(self, announce: str | Sequence[str]) -> dict[str, str]:
        """Peer endpoint 'ip:port' → site name, from a tracker's GET /api/sites (best effort).

        Every tracker of the torrent is asked at once and the first answer
        wins: one that hangs (a stopped host) costs nothing, and none costs
        at most SITES_TIMEOUT before the download starts anyway.
        """
        urls = [u for u in (tracker_api(a, "/api/sites") for a in ([announce] if isinstance(announce, str)
                                                                     else announce)) if u]
        pending = {asyncio.ensure_future(self._sites_doc(u)) for u in dict.fromkeys(urls)}
        try:
            deadline = asyncio.get_running_loop().time() + SITES_TIMEOUT.total
            while pending:
                done, pending = await asyncio.wait(pending, timeout=deadline - asyncio.get_running_loop().time(),
                                                   return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    break
                for task in done:
                    doc = task.result()
                    if doc is not None:
                        return _names(doc)
            return {}
        finally:
            for task in pending:
                task.cancel()

    async def _sites_doc(self, url: str) -> dict | None:
        try:
            async with self.session.get(url, timeout=SITES_TIMEOUT) as resp:
                if resp.status != 200:
                    return None
                doc = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None
        return doc if isinstance(doc, dict) else None


def _names(doc: dict) -> dict[str, str]:
    names: dict[str, str] = {}
    for site in doc.get("sites", []):
        if isinstance(site, dict) and isinstance(site.get("name"), str):
            # A restricted dataset's seeds are at the site's SSL sockets: named the same.
            for peer in [*(site.get("peers", []) or []), *(site.get("ssl_peers", []) or [])]:
                if isinstance(peer, str):
                    names[peer] = site["name"]
    return names


# --- pure helpers -------------------------------------------------------------------------

def checksums_only(record: dict[str, Any]) -> dict[str, Any]:
    """The record with its file list cut to what bt-get uses of it, the catalog's adler32s:
    the whole list is the torrent's over again (30 MB of objects for 100,000 files, held by
    the parent and, by fork, counted in every worker)."""
    files = record.get("files")
    if not isinstance(files, list):
        return record
    return {**record, "files": [{"lfn": f["lfn"], "adler32": f["adler32"]} for f in files
                                if isinstance(f, dict) and isinstance(f.get("adler32"), str)
                                and isinstance(f.get("lfn"), str)]}


def search_queries(name: str) -> list[str]:
    """The name itself, then its longest distinctive tokens (full-text search matches words)."""
    tokens = [t for t in re.split(r"[._\-]+", name) if len(t) >= 3]
    tokens.sort(key=len, reverse=True)
    return [name] + [t for t in dict.fromkeys(tokens)]


def suggest(name: str, candidates: list[str], n: int = 3) -> list[str]:
    return difflib.get_close_matches(name, candidates, n=n, cutoff=0.6)


def _conflict_text(record: dict[str, Any]) -> str:
    """Why the repository serves no version by name, and what can be done."""
    problem = record.get("problem") or "the sites' replicas disagree"
    problem = problem.split(": ", 1)[1] if problem.startswith(f"{record.get('name')}: ") else problem
    versions = [v.get("info_hash") for v in record.get("versions", []) if isinstance(v, dict) and v.get("sites")]
    hint = (f"; to fetch one version anyway: --info-hash {' or '.join(versions[:3])}" if len(versions) > 1
            else "")
    return f"{problem}{hint}"


def _not_found_text(repo: str, close: list[str]) -> str:
    text = f"no such dataset in {repo}"
    if close:
        text += "; did you mean: " + ", ".join(close)
    return text


def _error_text(doc: Any) -> str:
    if isinstance(doc, dict) and isinstance(doc.get("error"), str):
        return f" ({doc['error']})"
    return ""


def _base(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def tracker_api(announce: str | None, path: str) -> str | None:
    """The tracker's API URL: the announce URL with /announce replaced (docs/contracts.md)."""
    if not announce or not announce.startswith(("http://", "https://")):
        return None
    parts = urlsplit(announce)
    base = parts.path[: -len("/announce")] if parts.path.endswith("/announce") else parts.path.rsplit("/", 1)[0]
    return urlunsplit((parts.scheme, parts.netloc, base + path, "", ""))
