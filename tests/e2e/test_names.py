"""A dataset name with `#`, `?`, `%`, a space and non-ASCII goes through every part: bt-server
publishes it, the repository serves its page, its API record and its .torrent, bt-get fetches it."""

from __future__ import annotations

import json
import subprocess
import urllib.request

import pytest

from btswarm.trees import compare_trees
from tests.e2e.conftest import start_federation
from tests.support import command
from torrents import sample, urls

pytestmark = pytest.mark.slow

NAME = "odd #1? 50% of ünïcødé"


def test_a_name_url_syntax_would_break_goes_through_every_part(tmp_path):
    data = tmp_path / "data"
    sample.generate(data, name=NAME, files=3, total_size=300_000)
    fed = start_federation(tmp_path, "--sites", "1", "--data", str(data), "--heartbeat", "1s")
    try:
        assert fed.datasets == (NAME,)
        record = json.load(urllib.request.urlopen(fed.repo + urls.dataset_api(NAME), timeout=5))
        assert record["name"] == NAME and record["sites"] == ["site1"]
        page = urllib.request.urlopen(fed.repo + urls.dataset_page(NAME), timeout=5).read().decode()
        assert "odd #1? 50% of ünïcødé" in page
        search = json.load(urllib.request.urlopen(fed.repo + "/api/datasets?q=" + urls.quoted("ünïcødé"), timeout=5))
        assert [d["name"] for d in search["datasets"]] == [NAME]
        out = subprocess.run([command("bt-get"), NAME, "--repo", fed.repo, "-o", str(tmp_path / "out"), "--json"],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["dataset"] == NAME
        assert compare_trees(data / NAME, tmp_path / "out" / NAME) == []
    finally:
        assert fed.stop(timeout=30) == 0, fed.log()[-3000:]
