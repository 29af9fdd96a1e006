"""Bytes served from the sampled counters (btrepo/served.py) and their pictures (btrepo/swarmchart.py), pure."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from btrepo import served, swarmchart

SVG = "{http://www.w3.org/2000/svg}"
NOW = 1_800_000_000.0
GB = 10**9


def legend(svg: str) -> list[str]:
    return [t.text or "" for t in ET.fromstring(svg).iter(SVG + "text") if t.get("class") == "legend"]


def test_a_counter_that_went_down_was_restarted_and_its_new_value_is_what_it_grew_by():
    assert [served.grown(a, b) for a, b in ((5, 9), (9, 9), (9, 4), (0, 0))] == [4, 0, 4, 0]
    assert served.increments([0, 10, 25, 3, 8]) == [10, 15, 3, 5]
    assert served.increments([7]) == []


def test_each_site_is_counted_against_its_own_last_count():
    samples = [{"site1": 100, "site2": 0},
               {"site1": 150, "site2": 40},  # both sent
               {"site1": 20, "site2": 40},  # site1 restarted and sent 20 since
               {"site2": 90},  # site1 not heard (a tracker restart): says nothing
               {"site1": 70, "site2": 90},  # site1 against its last count, 20
               {"site1": 70, "site2": 90, "site3": 5}]  # site3 is new: its first count is where it starts
    assert served.sites_sent(samples) == [0, 90, 20, 50, 50, 0]


def test_the_t3s_are_what_completions_took_beyond_the_sites_never_below_zero():
    size = 10 * GB
    samples = [(0.0, 4, {"site1": 0}),
               (300.0, 4, {"site1": 6 * GB}),  # a download under way: 6 GB from the site, nothing complete
               (600.0, 5, {"site1": 10 * GB}),  # it completes: all 10 GB were the site's, none a T3's
               (900.0, 7, {"site1": 12 * GB}),  # two more with 2 GB from the site: 18 GB from T3s
               (1200.0, 7, {"site1": 15 * GB}),  # the site sends to one not complete yet: the T3s' stays
               (1500.0, 2, {"site1": 15 * GB})]  # the tracker restarted, 2 completions since
    assert served.bytes_served(samples, size) == [
        (0.0, 0, 0), (300.0, 6 * GB, 0), (600.0, 10 * GB, 0), (900.0, 12 * GB, 18 * GB), (1200.0, 15 * GB, 18 * GB),
        (1500.0, 15 * GB, 35 * GB)]
    # More from the sites than the completions took (partial downloads): 0, not negative.
    assert served.bytes_served([(0.0, 0, {"s": 0}), (60.0, 1, {"s": 3 * size})], size)[-1] == (60.0, 3 * size, 0)


def test_egress_is_bytes_per_second_between_samples_a_restart_counted_from_zero():
    assert served.egress([(0.0, 0), (100.0, 50_000_000), (300.0, 150_000_000), (400.0, 10_000_000)]) == [
        (100.0, 500_000.0), (300.0, 500_000.0), (400.0, 100_000.0)]
    assert served.egress([(0.0, 5)]) == []


def test_no_picture_from_fewer_than_two_samples_or_without_the_sites_counts():
    assert swarmchart.render_bytes_served([(NOW - 60, 1, {"site1": 5})], GB, NOW, "ds") is None
    assert swarmchart.render_bytes_served([(NOW - 600, 1, {}), (NOW - 60, 3, {})], GB, NOW, "ds") is None
    assert swarmchart.render_egress([(NOW - 60, 5)], NOW, "site1") is None
    assert swarmchart.render_egress([], NOW, "site1") is None


def test_the_bytes_picture_stacks_sites_then_t3s_and_says_the_t3s_are_estimated():
    svg = swarmchart.render_bytes_served([(NOW - 7200, 0, {"site1": 0, "site2": 0}),
                                          (NOW - 3600, 3, {"site1": GB, "site2": GB})], GB, NOW, "ds")
    assert svg is not None
    root = ET.fromstring(svg)
    assert [p.get("data-name") for p in root.iter(SVG + "polygon")] == ["by sites", "by T3s"]
    assert legend(svg) == ["by sites  1.9 GiB", "by T3s  953.7 MiB, estimated from completions"]
    texts = [t.text for t in root.iter(SVG + "text")]
    assert "Bytes served over the last 24 hours" in texts and "served, GiB" in texts and "now" in texts


def test_the_egress_picture_is_in_mb_per_second():
    svg = swarmchart.render_egress([(NOW - 7200, 0), (NOW - 3600, 3_600_000_000), (NOW - 60, 3_600_000)], NOW,
                                   "<site>")
    assert svg is not None
    assert legend(svg) == ["egress  now 0.00102 MB/s, most 1 MB/s; 3.4 GiB in 2.0 h"]
    texts = [t.text for t in ET.fromstring(svg).iter(SVG + "text")]
    assert "Egress over the last 24 hours" in texts and "<site>" in texts and "MB/s" in texts  # escaped, parsed back
