"""deploy/grafana/btswarm.json against the metrics the services really expose.

A federation runs on loopback (tracker, repository, two sites) and a real
bt-get downloads through it, so publishes, heartbeats, seed starts and
uploads have happened; then every service's /metrics is scraped. Every
metric a panel's PromQL names must be a sample some service exposes, and
every label a panel groups or selects by must be one of that metric's: a
renamed metric or label fails here instead of leaving a panel empty.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.deploy.deployment import Deployment
from tests.support import command, wait_for
from torrents import sample

pytestmark = pytest.mark.slow

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "btswarm.json"
METRIC = re.compile(r"\b(btswarm_[a-z0-9_]+)\b")
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="')
# Labels Prometheus adds to every series it scrapes, and the histogram's own.
TARGET_LABELS = {"instance", "job", "le"}


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def queries(doc: dict) -> list[tuple[str, str]]:
    """(panel title, expr) of every query of every panel, rows' panels included."""
    out = []
    for panel in doc["panels"]:
        for p in [panel, *panel.get("panels", [])]:
            out += [(p["title"], t["expr"]) for t in p.get("targets", [])]
    return out


def exposition(text: str) -> dict[str, set[str]]:
    """Sample name → the label names it has, from Prometheus text."""
    out: dict[str, set[str]] = {}
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m:
            out.setdefault(m.group(1), set()).update(LABEL.findall(m.group(2) or ""))
    return out


@pytest.fixture(scope="module")
def exposed(tmp_path_factory) -> dict[str, set[str]]:
    tmp = tmp_path_factory.mktemp("dash")
    sample.generate(tmp / "data", files=8, total_size=16 * 2**20)
    with Deployment(tmp / "fed", tmp / "data", sites=2) as fed:
        fed.published(1)
        got = subprocess.run([command("bt-get"), sample.SAMPLE_NAME, "--repo", fed.repo_url, "-o", str(tmp / "dl"),
                              "--json"], capture_output=True, text=True, timeout=120)
        assert got.returncode == 0, got.stderr
        # A seed's bytes are counted from libtorrent's next status update (every 0.5 s at most):
        # a 0.1 s download can be over before it.
        wait_for(lambda: sum(json.loads(fed.get(f"{fed.control_url(s)}/api/status"))["uploaded_total"]
                             for s in fed.sites) > 0, timeout=10, what="the sites to count their uploads")
        fed.get(f"{fed.repo_url}/datasets/{sample.SAMPLE_NAME}.torrent")
        fed.get(f"{fed.tracker_url}/scrape")
        names: dict[str, set[str]] = {}
        for url in [fed.tracker_url, fed.repo_url, *(fed.control_url(s) for s in fed.sites)]:
            for name, labels in exposition(fed.get(f"{url}/metrics").decode()).items():
                names.setdefault(name, set()).update(labels)
    return names


def test_the_dashboard_is_a_grafana_dashboard_over_one_prometheus_source():
    doc = dashboard()
    assert doc["uid"] and doc["title"] and doc["schemaVersion"] >= 36
    [var] = [v for v in doc["templating"]["list"] if v["type"] == "datasource"]
    assert var["query"] == "prometheus"
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    for title, expr in queries(doc):
        assert METRIC.search(expr), (title, expr)
    for panel in doc["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
            assert {"h", "w", "x", "y"} <= set(panel["gridPos"]), panel["title"]


def test_every_metric_the_dashboard_asks_for_is_exposed(exposed):
    missing = sorted({(title, name) for title, expr in queries(dashboard()) for name in METRIC.findall(expr)
                      if name not in exposed})
    assert missing == [], f"not exposed by any service: {missing}"


def test_every_label_a_panel_groups_or_selects_by_exists(exposed):
    problems = []
    for title, expr in queries(dashboard()):
        names = set(METRIC.findall(expr))
        have = set().union(*(exposed.get(n, set()) for n in names)) | TARGET_LABELS
        grouped = {label.strip() for group in re.findall(r"\b(?:by|on|group_left)\s*\(([^)]*)\)", expr)
                   for label in group.split(",") if label.strip()}
        selected = set(re.findall(r"\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=", expr))
        for label in sorted((grouped | selected) - have):
            problems.append((title, label))
    assert problems == []


def test_the_names_follow_prometheus_conventions(exposed):
    """btswarm_<part>_<thing>: counters end in _total, histograms in _seconds, sizes in _bytes."""
    ours = {n for n in exposed if n.startswith("btswarm_")}
    assert {n.split("_")[1] for n in ours} == {"tracker", "server", "repo"}
    text_types = {}
    for name in ours:
        base = re.sub(r"_(bucket|sum|count|created|total)$", "", name)
        text_types.setdefault(base, set()).add(name)
    for base, names in text_types.items():
        if f"{base}_bucket" in names:
            assert base.endswith("_seconds"), base
        if "bytes" in base:
            assert base.endswith("_bytes"), base
    assert "btswarm_server_uploaded_bytes_total" in ours
    assert not [n for n in exposed if n.startswith("btserver_")]
