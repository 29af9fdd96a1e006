"""`bt-get --search QUERY` and `bt-get TARGET --list-files`: ask the repository, print the tables.

The physicist's view of the catalog from the shell, with the one command a
T3 has installed (like `rucio list-dids` and `rucio list-files`). The
repository is asked through btget.resolve.client, the same client that resolves a
name for a download; the tables are btget.display.tables's. Results on stdout
(one JSON document with --json), notes on stderr.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any, Sequence

import click

from torrents import metainfo
from torrents.errors import NotFound
from torrents.proxyenv import NONE, Proxies

from torrents.servicekit.httpclient import client_session

from btget.display import tables
from btget.resolve import plan
from btget.resolve.bearer import TokenSource
from btget.resolve.client import Client

MAX_LISTED = 2000  # datasets shown by one search (10 pages of the repository's largest)


class NoMatch(NotFound):
    """A search that found nothing (exit 3, like a name that is not there)."""


def _dump(doc: dict[str, Any]) -> None:
    click.echo(json.dumps(doc, indent=2 if sys.stdout.isatty() else None))


async def _search(repo: str, query: str, hint: str, limit: int, token: TokenSource | None, ca: str,
                  proxies: Proxies) -> tuple[int, list[dict[str, Any]]]:
    async with client_session(ca, proxies=proxies) as session:
        return await Client(repo, session, hint=hint, token=token).search_all(query, limit)


def search(repo: str, query: str, *, json_output: bool, hint: str = "", limit: int = MAX_LISTED,
           token: TokenSource | None = None, ca: str = "", proxies: Proxies = NONE) -> int:
    """Print the datasets matching `query` (every word, any part of the name, any case); NoMatch if none.
    Members-only datasets are listed only when `token` may read them (the repository leaves them out)."""
    total, docs = asyncio.run(_search(repo, query, hint, limit, token, ca, proxies))

    rows = [tables.dataset_row(d) for d in docs]
    if json_output:
        _dump(tables.search_document(query, repo, total, rows))
    else:
        for line in tables.search_table(rows) if rows else ():
            click.echo(line)
        if total > len(rows):
            click.echo(f"bt-get: note: {total} datasets match; the first {len(rows)} by name are shown "
                       f"(add words to the query to narrow it)", err=True)
        if rows and any(r.seeds is None for r in rows):
            click.echo(f"bt-get: note: seeds '{tables.UNKNOWN}': the repository could not ask the tracker",
                       err=True)
    if not rows:
        if query.strip():
            raise NoMatch(query, f"no dataset matches in {repo} (any part of a name matches: try fewer or "
                                 f"shorter words)")
        raise NoMatch(repo, "the repository holds no dataset yet")
    return 0


def list_files(meta: metainfo.Metainfo, record: dict[str, Any] | None, chosen: Sequence[plan.PlanFile], *,
               json_output: bool) -> int:
    """Print the file table of the files `chosen` (all of them, or what --files/--nrandom/--shard pick)."""
    picked = {f.index for f in chosen}
    entries = [(f.lfn, f.length, f.target) for i, f in enumerate(meta.files) if not f.pad and i in picked]
    rows = tables.file_rows(entries, record)
    of = len(meta.data_files)
    if json_output:
        _dump(tables.files_document(meta.name, meta.info_hash, rows, of))
        return 0
    click.echo(f"{meta.name}  {meta.info_hash}" + (f"  ({len(rows)} of {of} files chosen)" if len(rows) != of
                                                   else ""))
    for line in tables.files_table(rows):
        click.echo(line)
    return 0
