"""btget/transfer/sitechoice.py: the sites the user prefers and leaves out, by name, as addresses."""

import pytest

from btget.transfer import webseeds
from btget.transfer.sitechoice import SiteChoice, addresses, web_sources
from torrents.errors import UsageError

SITES = {"127.0.0.2:6881": "site1", "127.0.0.3:6881": "site2", "127.0.0.3:6882": "site2", "[::1]:6883": "site3"}


def test_names_become_the_addresses_of_the_sites_seeds():
    assert addresses(SiteChoice(prefer=("site1",), exclude=("site2", "site3")), SITES) == (
        ("127.0.0.2",), ("127.0.0.3", "::1"))
    assert addresses(SiteChoice(), {}) == ((), ())


@pytest.mark.parametrize("choice, sites, says", [
    (SiteChoice(exclude=("site9",)), SITES, "no site is named site9 (the sites: site1, site2, site3)"),
    (SiteChoice(prefer=("site1",), exclude=("site1",)), SITES, "site1: both preferred and left out"),
    (SiteChoice(exclude=("site1",)), {}, "the tracker named no site"),
])
def test_a_choice_that_cannot_be_held_is_an_error_naming_it(choice, sites, says):
    with pytest.raises(UsageError) as err:
        addresses(choice, sites)
    assert says in str(err.value)


def test_the_web_seeds_of_a_site_left_out_are_dropped_and_the_preferred_ones_come_first():
    sources = [webseeds.Source("http://a/", "site1"), webseeds.Source("http://b/", "site2"),
               webseeds.Source("http://c/", None)]
    assert [s.url for s in web_sources(sources, SiteChoice(prefer=("site2",), exclude=("site1",)))] == [
        "http://b/", "http://c/"]
