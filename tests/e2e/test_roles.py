"""Operators set roles, not publishers: a T3's secret cannot replace or dispute a dataset (issue 26, 1).

In a whole local federation (`btswarm up`: tracker, repository, one T2 site, and the T3 config it
writes, whose site both services hold as a T3 in their `site_kinds`), the T3 publishes other bytes
under the dataset's name with `bt-server publish`, as a careless or hostile T3 would. Before, with
`--new-version` the repository served the T3's bytes from then on, and without it the dataset became
disputed, so `bt-get NAME` refused (exit 6) everywhere. Now both are refused with the reason, the
dataset stays as it was, and `bt-get NAME` fetches the T2's bytes.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from btswarm.trees import compare_trees
from tests.e2e.conftest import get_json, running_federation
from tests.support import command
from torrents.exitstatus import ExitStatus

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    yield from running_federation(tmp_path_factory, "roles", "--sites", "1", "--sample-files", "6",
                                  "--sample-size", "6M", "--idle-ttl", "5s", "--heartbeat", "1s")


def other_bytes(fed, root: Path, nth: int) -> Path:
    """ROOT/NAME: the dataset with the `nth` file's bytes changed (same names, same sizes)."""
    copy = root / fed.dataset
    shutil.copytree(fed.source, copy)
    changed = sorted(copy.iterdir())[nth]
    data = bytearray(changed.read_bytes())
    data[len(data) // 2] ^= 0xFF
    changed.write_bytes(bytes(data))
    return root


def t3_publish(fed, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([command("bt-server"), "publish", fed.dataset, "--config", str(fed.ready.t3.config),
                           "--attempts", "1", *args], capture_output=True, text=True, timeout=120)


def refusal(got: subprocess.CompletedProcess, name: str) -> str:
    """The reason on bt-server publish's result line `HASH  REFUSED  NAME: HTTP 403: ...`."""
    assert got.returncode == ExitStatus.ERROR, (got.stdout, got.stderr)
    line = got.stdout.strip().splitlines()[-1]
    assert line.split()[1:3] == ["REFUSED", f"{name}:"], line
    return line.split(f"REFUSED  {name}: ", 1)[1]


def test_a_t3_cannot_publish_a_new_version(fed, tmp_path):
    name = fed.dataset
    before = get_json(f"{fed.repo}/api/datasets/{name}")
    got = t3_publish(fed, "--root", str(other_bytes(fed, tmp_path / "other", 0)), "--new-version")
    assert refusal(got, name) == (f"HTTP 403: publish {name}: t3 is a T3: it may not declare a new version (only a "
                                  "storage site holding the dataset may); it may only add itself as a holder of the "
                                  f"served version {before['info_hash']}")
    after = get_json(f"{fed.repo}/api/datasets/{name}")
    assert (after["info_hash"], after["sites"], after["t3_sites"], len(after["versions"])) == (
        before["info_hash"], ["site1"], [], 1)
    assert [c["who"] for c in after["history"]] == ["site1"]  # its first publication, nothing since


def test_a_t3_cannot_dispute_a_dataset_one_t2_holds(fed, tmp_path):
    name = fed.dataset
    before = get_json(f"{fed.repo}/api/datasets/{name}")
    got = t3_publish(fed, "--root", str(other_bytes(fed, tmp_path / "other", 1)))
    reason = refusal(got, name)
    assert reason.startswith(f"HTTP 403: publish {name}: t3 is a T3: it may only add itself as a holder of the "
                             f"served version {before['info_hash']}, not publish "), reason
    after = get_json(f"{fed.repo}/api/datasets/{name}")
    assert (after["info_hash"], after["replicas"], after["servable"], after["sites"], len(after["versions"])) == (
        before["info_hash"], "agree", True, ["site1"], 1)
    fetched = fed.bt_get(tmp_path / "out", "--timeout", "90s", timeout=150)
    assert fetched.returncode == 0, fetched.stderr
    assert compare_trees(fed.source, tmp_path / "out" / name) == []


def test_a_t3_that_says_it_is_a_t2_is_refused(fed, tmp_path):
    # The served bytes themselves: only the claimed kind is wrong.
    text = fed.ready.t3.config.read_text()
    assert 'kind = "T3"' in text
    config = tmp_path / "t3-as-t2.toml"
    config.write_text(text.replace('kind = "T3"', 'kind = "T2"'))
    got = subprocess.run([command("bt-server"), "publish", fed.dataset, "--config", str(config), "--root",
                          str(fed.data), "--state", str(tmp_path / "state"), "--attempts", "1"],
                         capture_output=True, text=True, timeout=120)
    assert refusal(got, fed.dataset) == ('HTTP 403: t3: claims to be a T2 site but [repo] site_kinds makes it a T3: '
                                         'set [server] kind = "T3" at t3, or ask the federation\'s operators to '
                                         'change [repo] site_kinds')
    assert get_json(f"{fed.repo}/api/datasets/{fed.dataset}")["t3_sites"] == []
