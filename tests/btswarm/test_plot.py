"""`btswarm plot RESULT.json`: a bt-get --json result drawn as SVG bands, one per source."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from btswarm import plot
from btswarm.cli import cli
from torrents.errors import BtswarmError

SVG = "{http://www.w3.org/2000/svg}"


def result(sources_over_time, **changes) -> dict:
    last = sources_over_time[-1]["sources"]
    return {"dataset": "data08_cos.00091949.physics_IDCosmic", "sources": last, "seconds": sources_over_time[-1]["t"],
            "bytes_downloaded": sum(last.values()), "exit_status": "OK", "web_seed_switches": [],
            "sources_over_time": sources_over_time, **changes}


RUN = [{"t": 0.5, "sources": {}}, {"t": 1.5, "sources": {"site1": 40 << 20, "site2": 10 << 20}},
       {"t": 3.0, "sources": {"site1": 90 << 20, "site2": 60 << 20, "web seed site3": 1 << 20}}]


def test_a_band_per_source_largest_first_with_its_share_in_the_legend():
    svg = ET.fromstring(plot.render(result(RUN)))
    assert [p.get("data-name") for p in svg.iter(SVG + "polygon")] == ["site1", "site2", "web seed site3"]
    legend = [t.text for t in svg.iter(SVG + "text") if t.get("class") == "legend"]
    assert legend == ["site1  90.0 MiB (60%)", "site2  60.0 MiB (40%)", "web seed site3  1.0 MiB (1%)"]
    texts = [t.text for t in svg.iter(SVG + "text")]
    assert "received, MiB" in texts and "seconds since the download started" in texts
    assert any(t.startswith("151.0 MiB in 3.0 s") for t in texts)


def test_the_web_seed_switches_are_marked_and_many_small_sources_share_a_band():
    many = [{"t": 0.0, "sources": {}}, {"t": 2.0, "sources": {f"127.0.0.{100 + i}:6881": 1000 + i for i in range(12)}}]
    doc = result(many, web_seed_switches=[{"after_s": 1.6, "to": "web seeds", "why": "..."}])
    svg = ET.fromstring(plot.render(doc))
    bands = [p.get("data-name") for p in svg.iter(SVG + "polygon")]
    assert len(bands) == 9 and bands[-1] == "4 others" and bands[0] == "127.0.0.111:6881"
    assert len([e for e in svg.iter(SVG + "line") if e.get("class") == "mark"]) == 1
    assert "to web seeds" in [t.text for t in svg.iter(SVG + "text")]


def test_names_are_text_never_markup():
    doc = result([{"t": 1.0, "sources": {"<script>alert(1)</script>": 5}}], dataset='"><svg onload=alert(1)>')
    text = plot.render(doc)
    svg = ET.fromstring(text)  # still one well-formed document
    assert "<script>" not in text and "<svg onload" not in text
    assert [p.get("data-name") for p in svg.iter(SVG + "polygon")] == ["<script>alert(1)</script>"]


@pytest.mark.parametrize("doc, problem", [
    ({"files": []}, "not a bt-get --json result (no dataset and sources)"),
    ({"dataset": "x", "sources": {}}, "has no sources_over_time"),
    ({"dataset": "x", "sources": {}, "sources_over_time": [{"t": "soon"}]}, "sources_over_time: each sample"),
])
def test_what_is_not_a_result_is_said_so(doc, problem):
    with pytest.raises(BtswarmError, match="^" + re.escape("r.json: " + problem)):
        plot.render(doc, "r.json")


def test_the_command_writes_the_svg_beside_the_result_and_says_where(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(result(RUN)))
    out = CliRunner().invoke(cli, ["plot", str(path)])
    assert out.exit_code == 0, out.output
    assert out.output.strip() == str(tmp_path / "run.svg")
    assert ET.parse(tmp_path / "run.svg").getroot().tag == SVG + "svg"
    (tmp_path / "bad.json").write_text("{not json")
    out = CliRunner().invoke(cli, ["plot", str(tmp_path / "bad.json"), "-o", str(tmp_path / "x.svg")])
    assert out.exit_code != 0 and f"{tmp_path / 'bad.json'}: not JSON" in str(out.exception or out.output)
