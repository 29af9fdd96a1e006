"""The repository's pure rules: what a publish means, what a search asks."""

from __future__ import annotations

import pytest

from torrents.errors import BtswarmError
from btrepo.catalog import Outcome, fts_query, parse_search
from btrepo.identity import Relation


def test_publication_outcomes():
    assert Outcome.of(Relation.CREATED, False) is Outcome.CREATED
    assert Outcome.of(Relation.NEW_VERSION, False) is Outcome.NEW_VERSION
    assert Outcome.of(Relation.CONFLICT, False) is Outcome.CONFLICT
    assert Outcome.of(Relation.PARTIAL, False) is Outcome.PARTIAL
    assert Outcome.of(None, False) is Outcome.SITE_ADDED
    assert Outcome.of(None, True) is Outcome.UNCHANGED
    # a new version stored answers 201, a known one 200
    assert [o.status for o in Outcome] == [201, 201, 201, 201, 200, 200]


@pytest.mark.parametrize("text, query", [
    ("IDCosmic", '"IDCosmic"*'),
    ("DPD_IDCOMM", '"DPD IDCOMM"*'),
    ("physics_IDCosmic.merge  o4", '"physics IDCosmic merge"* "o4"*'),
    ('x" OR y*', '"x"* "OR"* "y"*'),
    ("... ___", None),
    ("", None),
])
def test_fts_query_is_words_never_syntax(text, query):
    assert fts_query(text) == query


def test_parse_search_defaults_and_errors():
    p = parse_search({})
    assert (p.q, p.page, p.per_page, p.sort, p.offset) == ("", 1, 50, "date", 0)
    p = parse_search({"q": "IDCosmic", "page": "3", "per_page": "20"})
    assert (p.sort, p.offset, p.pages(41)) == ("relevance", 40, 3)
    assert parse_search({"sort": "relevance"}).sort == "date"  # no words to rank by
    with pytest.raises(BtswarmError, match=r"^per_page=201: must be at most 200$"):
        parse_search({"per_page": "201"})
    with pytest.raises(BtswarmError, match=r"^page=1\.5: must be a whole number of at least 1$"):
        parse_search({"page": "1.5"})
