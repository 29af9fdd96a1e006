"""A T3's shares (btserver/sharelist.py), read by the real Inventory; `bt-server share`'s verdict (pure)."""

from __future__ import annotations

import json

import pytest

from btserver import sharecommand, sharelist
from btserver.config import ServerConfig
from btserver.heartbeat import heartbeat_body
from btserver.inventory import Inventory
from torrents import metainfo
from torrents.errors import BtswarmError, ConfigError
from torrents.sample import generate

NAME = "data08_cos.00091949.physics_IDCosmic.merge.DPD_IDCOMM.o4_r653_p26_tid051203"


def test_add_load_and_replace(tmp_path):
    one = generate(tmp_path / "dl", name=NAME, files=2, total_size=40_000)
    assert sharelist.load(tmp_path / "state") == []
    first = sharelist.Share(NAME, str(one), "ab" * 20)
    assert sharelist.add(tmp_path / "state", first) == [first]
    newer = sharelist.Share(NAME, str(one), "cd" * 20)
    assert sharelist.add(tmp_path / "state", newer) == [newer]  # one share per name: the newest fetch
    assert sharelist.load(tmp_path / "state") == [newer]


@pytest.mark.parametrize("doc, problem", [
    ([], 'expected {"shares": [{"name", "path", "info_hash"}, ...]}'),
    ({"shares": [{"name": NAME}]}, "share 0: expected an object with name and path"),
    ({"shares": [{"name": NAME, "path": "rel/x"}]}, "share 0: path 'rel/x' is not absolute"),
    ({"shares": [{"name": NAME, "path": "/x", "info_hash": "xyz"}]}, "share 0: info_hash 'xyz' is not 40 hex "
                                                                     "characters"),
])
def test_a_damaged_list_is_named(tmp_path, doc, problem):
    (tmp_path / sharelist.FILE).write_text(json.dumps(doc))
    with pytest.raises(BtswarmError) as err:
        sharelist.load(tmp_path)
    assert str(err.value) == f"{tmp_path / sharelist.FILE}: {problem}"


def test_only_a_dataset_directory_is_shared(tmp_path):
    with pytest.raises(BtswarmError) as err:
        sharelist.add(tmp_path / "state", sharelist.Share(NAME, str(tmp_path / "missing")))
    assert str(err.value) == f"{tmp_path / 'missing'}: no such directory"
    with pytest.raises(BtswarmError) as err:
        sharelist.add(tmp_path / "state", sharelist.Share(".bt-get", str(tmp_path)))
    assert str(err.value).startswith(f"{tmp_path}: not a dataset directory (")


def test_the_inventory_prepares_shares_and_refuses_another_info_hash(tmp_path):
    fetched = generate(tmp_path / "dl", name=NAME, files=3, total_size=60_000)
    (fetched / ".bt-get").mkdir()  # bt-get's own state beside the files: never part of the dataset
    (fetched / ".bt-get" / "resume").write_bytes(b"x" * 100)
    partial = generate(tmp_path / "dl", name="still.arriving", files=2, total_size=10_000)
    cfg = ServerConfig(kind="T3", site="t3", state=str(tmp_path / "state"), tracker="", repo="")
    sharelist.add(cfg.state, sharelist.Share(NAME, str(fetched), None))
    report = Inventory(cfg).prepare()
    assert [p.name for p in report.prepared] == [NAME]  # what was shared, not the rest of the directory
    assert partial.name not in {p.name for p in report.prepared}
    [prepared] = report.prepared
    shared_files = metainfo.parse(prepared.torrent_path.read_bytes()).data_files
    assert sorted(f.lfn for f in shared_files) == sorted(p.name for p in fetched.iterdir() if p.is_file())
    good = prepared.info_hash

    sharelist.add(cfg.state, sharelist.Share(NAME, str(fetched), "0" * 40))
    report = Inventory(cfg).prepare()
    assert report.prepared == []
    assert [str(p) for p in report.problems] == [
        f"{NAME}: hashed here as {good}, but fetched as {'0' * 40}: this site builds torrents with other settings "
        "([server] private, hybrid) than the sites it fetched from, or the directory changed since; not shared"]


def test_kind_is_said_and_checked():
    assert heartbeat_body("t3", "http://127.0.0.100:1", [], [], [], 5, "T3")["kind"] == "T3"
    with pytest.raises(ConfigError) as err:
        ServerConfig(kind="T1")
    assert str(err.value) == "kind: must be one of T2, T3, got 'T1'"


H = "ab" * 20


@pytest.mark.parametrize("status, expected", [
    ({"datasets": [{"name": NAME, "info_hash": H, "repository": None}]}, ("wait", "not yet published")),
    ({"datasets": [{"name": NAME, "info_hash": H, "repository": {"published": True, "result": "site_added"}}]},
     ("done", {"name": NAME, "info_hash": H, "repository": {"published": True, "result": "site_added"}})),
    ({"datasets": [{"name": NAME, "info_hash": H,
                    "repository": {"published": False, "problem": "HTTP 401: unknown site t3"}}]},
     ("fail", "the repository refused it: HTTP 401: unknown site t3")),
    ({"datasets": [], "problems": [f"{NAME}: hashed here as x", "other: y"]}, ("fail", "hashed here as x")),
    ({"datasets": [], "problems": []}, ("fail", "the site did not prepare it (see bt-server status)")),
    ({"datasets": [{"name": NAME, "info_hash": "cd" * 20}]}, ("fail", f"the site serves {'cd' * 20}, not the {H} "
                                                                     "fetched")),
    ({"error": "preparing datasets failed: OSError: x"}, ("fail", "preparing datasets failed: OSError: x")),
])
def test_verdict(status, expected):
    assert sharecommand.verdict(status, NAME, H) == expected
