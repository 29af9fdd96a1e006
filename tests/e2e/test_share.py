"""A T3 shares what it fetched (`bt-get --share`), then serves the federation alone.

In a whole local federation (`btswarm up`: tracker, repository, two T2 sites, and the T3
config it writes with a secret both services hold), a T3's bt-get fetches a dataset and
shares it: its bt-server, started by the share and detached, publishes it as held by a T3
and seeds it on demand. The T2 sites are then stopped by PID, and a second bt-get fetches
the whole dataset from the T3 alone; its bytes are compared with the source's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from btswarm.federation import wait_for
from btswarm.trees import compare_trees
from tests.e2e.conftest import get_json, start_federation
from tests.support import alive, command
from torrents.procs import running

pytestmark = pytest.mark.slow


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("share")
    fed = start_federation(tmp, "--sites", "2", "--sample-files", "10", "--sample-size", "20M",
                           "--idle-ttl", "5s", "--heartbeat", "1s")
    pid_file = fed.ready.t3.config.parents[1] / "t3" / "bt-server.pid"
    try:
        yield fed
    finally:
        os.kill(fed.proc.pid, signal.SIGCONT)  # a test may leave the supervisor frozen
        # The T3's daemon is not a child of btswarm up (bt-get --share started it): stopped by its PID here.
        if pid_file.exists():
            pid = int(pid_file.read_text())
            if alive(pid):
                os.kill(pid, signal.SIGTERM)
                wait_for(lambda: not alive(pid), timeout=30, what="the T3's bt-server to stop")
        assert fed.stop(timeout=30) == 0, fed.log()[-3000:]


def test_a_t3_shares_and_then_serves_the_dataset_alone(fed, tmp_path):
    name, t3 = fed.dataset, fed.ready.t3
    config = str(t3.config)
    # The T3 user: fetch, verify, share (the config's [get] names the repository, [server] the T3).
    got = run(command("bt-get"), name, "--share", "--config", config, "-o", str(tmp_path / "t3"), "--json",
              timeout=180)
    assert got.returncode == 0, got.stderr
    doc = json.loads(got.stdout)
    assert doc["exit_status"] == "OK"
    share = doc["share"]
    assert (share["name"], share["info_hash"], share["site"], share["kind"], share["started"]) == (
        name, fed.info_hash(name), "t3", "T3", True)
    assert share["repository"]["published"] is True and share["repository"]["state"] == "current"
    daemon = share["pid"]
    assert alive(daemon)
    assert t3.config.parents[1].joinpath("t3", "bt-server.pid").read_text().strip() == str(daemon)

    # The repository lists the T3 apart from the T2s: API, dataset page, sites, and bt-get --search.
    record = get_json(f"{fed.repo}/api/datasets/{name}")
    assert (record["t2_sites"], record["t3_sites"]) == (["site1", "site2"], ["t3"])
    kinds = {s["name"]: s["kind"] for s in get_json(f"{fed.repo}/api/sites")["sites"]}
    assert kinds == {"site1": "T2", "site2": "T2", "t3": "T3"}
    page = subprocess.run(["curl", "-sf", f"{fed.repo}/datasets/{name}"], capture_output=True, text=True,
                          timeout=10).stdout
    assert '<ul class="sites t3"><li><a href="/search?site=t3">t3</a> <span class="kind">T3</span></li></ul>' in page
    found = run(command("bt-get"), "--search", "cosmic", "--repo", fed.repo)
    assert found.returncode == 0, found.stderr
    assert found.stdout.splitlines()[1].split()[-3:] == ["site1,site2", "t3", name]
    # The tracker knows the T3 as a site that can seed it (its heartbeat).
    tracker_sites = {s["name"]: s for s in get_json(f"{fed.tracker_url}/api/sites")["sites"]}
    assert tracker_sites["t3"]["up"] and tracker_sites["t3"]["can_seed"] == 1

    # The T2s go away (the supervisor frozen, so it does not restart them); the T3 is the only holder.
    os.kill(fed.proc.pid, signal.SIGSTOP)
    try:
        sites = fed.site_pids()
        for pid in sites.values():
            os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not any(running(p) for p in sites.values()), timeout=30, what="the T2 sites to stop")
        # Its own seed idle-stopped by now or not: the tracker starts one on demand.
        second = run(command("bt-get"), name, "--repo", fed.repo, "-o", str(tmp_path / "second"), "--json",
                     "--timeout", "90s", timeout=150)
        assert second.returncode == 0, second.stderr
        result = json.loads(second.stdout)
        assert compare_trees(fed.source, tmp_path / "second" / name) == []
        assert set(result["sources"]) == {"t3"}, result["sources"]
        assert result["sources"]["t3"] >= result["bytes_total"]
    finally:
        os.kill(fed.proc.pid, signal.SIGCONT)
    wait_for(lambda: all(s in fed.site_pids() for s in ("site1", "site2")), timeout=30,
             what="the supervisor to restart the T2 sites")


def test_share_refusals(fed, tmp_path):
    name, t3 = fed.dataset, fed.ready.t3
    # Only a whole dataset: a part would be another info-hash.
    part = run(command("bt-get"), name, "--share", "--files", "*_00001*", "--config", str(t3.config), "-o",
               str(tmp_path / "part"))
    assert (part.returncode, part.stderr.strip()) == (2, "bt-get: error: --share: not with --files: only a whole "
                                                         "dataset can be shared (the same info-hash as its sites')")
    # A T2's config is not a T3's.
    site1 = t3.config.with_name("site1.toml")
    t2 = run(command("bt-server"), "share", str(fed.source), "--config", str(site1))
    assert (t2.returncode, t2.stderr.strip()) == (2, 'bt-server: error: [server] kind: is T2: a site sharing what '
                                                     'its users fetched is a T3 (set kind = "T3" in this site\'s '
                                                     '[server] section)')
    # Bytes the site hashes to another info-hash than the one fetched are not published.
    copy = tmp_path / "changed" / name
    copy.mkdir(parents=True)
    for f in sorted(fed.source.iterdir()):
        copy.joinpath(f.name).write_bytes(f.read_bytes())
    copy.joinpath(sorted(p.name for p in copy.iterdir())[0]).write_bytes(b"changed since it was fetched")
    wrong = run(command("bt-server"), "share", str(copy), "--info-hash", fed.info_hash(name), "--config",
                str(t3.config), "--wait", "60s", timeout=90)
    assert wrong.returncode == 1, wrong.stderr
    message = wrong.stderr.strip().splitlines()[-1]
    assert message.startswith(f"bt-server: error: {name}: hashed here as "), message
    assert message.endswith(f", but fetched as {fed.info_hash(name)}: this site builds torrents with other "
                            "settings ([server] private, hybrid) than the sites it fetched from, or the directory "
                            "changed since; not shared"), message
    assert get_json(f"{fed.repo}/api/datasets/{name}")["info_hash"] == fed.info_hash(name)
