"""The ready document: what `btswarm up` writes is what every reader reads back; a bad one is named."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from btswarm import shaping, topology
from btswarm.ready import MembersInfo, Ready, RseInfo, SiteInfo, T3Info
from torrents.errors import BtswarmError


def layout(tmp_path: Path) -> topology.Layout:
    sites = tuple(topology.Site(topology.site_name(i), topology.site_ip(i), 7010 + 2 * i, 7011 + 2 * i, f"s{i}", 7520 + i)
                  for i in range(2))
    t3 = topology.Site(topology.T3_NAME, topology.T3_IP, 7100, 7101, "t")
    rucio = topology.RucioPlan(url="http://127.0.0.1:7200", root=tmp_path / "rucio", password_file=tmp_path / "pw",
                           scope="demo", rses=(("site1", "SITE1_X", tmp_path / "rse1"),
                                               ("site2", "SITE2_X", tmp_path / "rse2")))
    return topology.Layout(state=tmp_path / "state", data=tmp_path / "data", tracker_port=7000, repo_port=7001,
                       sites=sites, more_tracker_ports=(7002,), redis_port=7009, rucio=rucio, t3=t3)


def test_what_up_writes_reads_back_whole(tmp_path):
    links = (shaping.Link("127.0.0.2", 10_000_000, "site1"), shaping.Link("127.0.0.101", 5_000_000, "client 127.0.0.101"))
    doc = topology.ready_document(layout(tmp_path), ["demo:ds"], netns="btswarm-x", links=links)
    path = tmp_path / "ready.json"
    doc.write(path)
    assert Ready.read(path) == doc
    assert not list(tmp_path.glob("*.tmp"))
    back = Ready.read(path)
    assert back.site("site2") == SiteInfo("site2", "127.0.0.3:7013", "http://127.0.0.3:7012", "http://127.0.0.3:7521")
    assert back.t3 == T3Info("t3", "127.0.0.100:7101", "http://127.0.0.100:7100", tmp_path / "state/config/t3.toml")
    assert back.rucio.rses["site1"] == RseInfo("SITE1_X", tmp_path / "rse1")
    assert back.links == links and back.netns == "btswarm-x"
    with pytest.raises(KeyError):
        back.site("site9")


def test_a_restricted_federation_s_members_read_back(tmp_path):
    pki = tmp_path / "pki"
    members = topology.Members(("atlas", "cms:Run2018*"), "https://btswarm.test", pki / "ca.pem", pki / "ca.key", {})
    fed = dataclasses.replace(layout(tmp_path), members=members, issuer_port=7770)
    path = tmp_path / "ready.json"
    topology.ready_document(fed, ["atlas:ds"]).write(path)
    assert Ready.read(path).members == MembersInfo("https://127.0.0.1:7770", pki / "ca.pem",
                                                   tmp_path / "state/config/get.toml", ("atlas", "cms:Run2018*"))
    assert Ready.read(path).repo == "https://127.0.0.1:7001"


def test_the_json_keeps_its_shape(tmp_path):
    """`btswarm run`, scripts and users outside Python read these keys: the shape on disk stays."""
    fed = dataclasses.replace(layout(tmp_path), rucio=None, t3=None)
    doc = json.loads(topology.ready_document(fed, ["ds"]).to_json())
    assert sorted(doc) == sorted(["netns", "links", "tracker", "tracker_url", "trackers", "tracker_urls", "redis",
                                  "repo", "sites", "t3", "datasets", "state", "data"])
    assert doc["tracker"] == "http://127.0.0.1:7000/announce"
    assert doc["tracker_urls"] == ["http://127.0.0.1:7000", "http://127.0.0.1:7002"]
    assert doc["sites"][0] == {"name": "site1", "peer": "127.0.0.2:7011", "control_url": "http://127.0.0.2:7010",
                               "web_url": "http://127.0.0.2:7520"}
    assert (doc["t3"], doc["netns"], doc["links"], doc["datasets"]) == (None, None, [], ["ds"])
    assert doc["state"] == str(tmp_path / "state")
    rucio = json.loads(topology.ready_document(layout(tmp_path), ["ds"]).to_json())["rucio"]
    assert rucio == {"url": "http://127.0.0.1:7200", "dir": str(tmp_path / "rucio"), "scope": "demo",
                     "rses": {"site1": {"rse": "SITE1_X", "prefix": str(tmp_path / "rse1")},
                              "site2": {"rse": "SITE2_X", "prefix": str(tmp_path / "rse2")}}}


@pytest.mark.parametrize("change, problem", [
    (lambda d: d.pop("repo"), "key repo: missing"),
    (lambda d: d.update(datasets="ds"), "key datasets: str where list belongs"),
    (lambda d: d["sites"][1].pop("peer"), "key sites[1].peer: missing"),
    (lambda d: d["sites"].__setitem__(0, "site1"), "key sites[0]: not an object"),
    (lambda d: d["links"].append({"address": "127.0.0.2", "rate": "10mbit", "label": "site1"}),
     "key links[0].rate: str where int belongs"),
    (lambda d: d["rucio"]["rses"]["site2"].pop("rse"), "key rucio.rses.site2.rse: missing"),
])
def test_a_malformed_or_older_document_names_the_file_and_the_key(tmp_path, change, problem):
    doc = json.loads(topology.ready_document(layout(tmp_path), ["ds"]).to_json())
    change(doc)
    path = tmp_path / "ready.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(BtswarmError) as info:
        Ready.read(path)
    assert info.value.subject == str(path)
    assert info.value.problem.startswith(problem)


def test_not_json_at_all_is_named_too(tmp_path):
    path = tmp_path / "ready.json"
    path.write_text('{"repo": ')
    with pytest.raises(BtswarmError, match="unreadable ready document") as info:
        Ready.read(path)
    assert info.value.subject == str(path)
    path.write_text("[]")
    with pytest.raises(BtswarmError, match="not a ready document"):
        Ready.read(path)
