"""docs/deploy-site.md's troubleshooting section, reproduced: each case the way an admin meets it, the
exact message our tools print then (the page quotes these, so a change of wording shows here first)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.deploy.deployment import Deployment
from tests.support import command, free_port, wait_for
from torrents import sample
from torrents.exitstatus import ExitStatus

pytestmark = pytest.mark.slow

NAME = sample.SAMPLE_NAME


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    sample.generate(root, files=4, total_size=4 * 2**20)
    return root


def bt_get(fed: Deployment, out, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([command("bt-get"), NAME, "--repo", fed.repo_url, "-o", str(out), *args],
                          capture_output=True, text=True, timeout=120)


def test_a_site_whose_secret_is_not_the_federations(data, tmp_path):
    with Deployment(tmp_path / "fed", data, sites=1, extra={"site1": {"secret": "not-the-one-they-hold"}}) as fed:
        site = fed.procs["site1"]
        heartbeat = (f"heartbeat: tracker {fed.tracker_url} refused our signature (site1: bad signature): is this "
                     "site's secret the one the tracker holds for site1 in [tracker] site_secrets?")
        publish = (f"publish {NAME}: {fed.repo_url} refused our signature (HTTP 401: site1: bad signature): is this "
                   "site's secret the one the repository holds for site1 in [repo] site_secrets?")
        wait_for(lambda: heartbeat in site.log() and publish in site.log(), timeout=30, what="both refusals")
        # ...and for the physicist, the dataset does not exist.
        out = bt_get(fed, tmp_path / "dl")
        assert out.returncode == ExitStatus.NOT_FOUND
        assert out.stderr.strip() == f"bt-get: error: {NAME}: no such dataset in {fed.repo_url}"


def test_a_site_unknown_to_the_tracker(data, tmp_path):
    with Deployment(tmp_path / "fed", data, sites=1, extra={"site1": {"site": "site9"}}) as fed:
        line = (f"heartbeat: tracker {fed.tracker_url} refused our signature (site9: unknown site): is this site's "
                "secret the one the tracker holds for site9 in [tracker] site_secrets?")
        wait_for(lambda: line in fed.procs["site1"].log(), timeout=30, what="the refusal")


def test_a_control_url_nobody_answers_at(data, tmp_path):
    """The tracker cannot reach the site's control API (a closed port, a control_url others cannot reach)."""
    dead = free_port("127.0.0.2")
    with Deployment(tmp_path / "fed", data, sites=1,
                    extra={"site1": {"control_url": f"http://127.0.0.2:{dead}"}}) as fed:
        fed.published(1)
        out = bt_get(fed, tmp_path / "dl", "--stall-timeout", "8")
        assert out.returncode == ExitStatus.INCOMPLETE, out.stderr
        assert out.stderr.strip().splitlines()[-1] == (
            f"bt-get: error: {NAME}: no progress for 8 s (0 peers, 0 seeds); run again to resume")
        assert (f"seed start at site1 failed: ClientConnectorError: Cannot connect to host 127.0.0.2:{dead} "
                f"ssl:default [Connect call failed ('127.0.0.2', {dead})]") in fed.procs["tracker"].log()


def test_a_tracker_that_is_down(data, tmp_path):
    with Deployment(tmp_path / "fed", data, sites=1) as fed:
        fed.published(1)
        fed.procs["tracker"].stop()
        out = bt_get(fed, tmp_path / "dl", "--timeout", "10")
        assert out.returncode == ExitStatus.INCOMPLETE, out.stderr
        assert f"bt-get: warning: tracker {fed.tracker_url}/announce: Connection refused" in out.stderr.splitlines()
        line = f"heartbeat: tracker {fed.tracker_url} not answering (ClientConnectorError: Cannot connect to host "
        wait_for(lambda: line in fed.procs["site1"].log(), timeout=30, what="the site to notice")


def test_a_repository_that_is_down(data, tmp_path):
    fed = Deployment(tmp_path / "fed", data, sites=1)  # configured, never started
    out = bt_get(fed, tmp_path / "dl")
    assert out.returncode == ExitStatus.ERROR
    assert out.stderr.strip() == f"bt-get: error: {fed.repo_url}: connection refused: is bt-repo running at this URL?"


def test_a_site_that_publishes_nothing_says_why(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with Deployment(tmp_path / "fed", empty, sites=1) as fed:
        wait_for(lambda: "site1: 0 datasets ready, 0 gone, 0 problems" in fed.procs["site1"].log(), timeout=30,
                 what="the site's scan")
        scan = subprocess.run([command("bt-server"), "scan", "--config", str(fed.config_path("site1"))],
                              capture_output=True, text=True, timeout=60)
        assert (scan.returncode, scan.stdout) == (0, "")


@pytest.fixture
def open_tmp():
    """A directory others may enter (pytest's are root's only), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="btswarm-state-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: to leave a state directory to root and run as nobody")
def test_a_state_directory_left_to_root_is_one_line_at_start(data, open_tmp):
    tmp_path = open_tmp
    fed = Deployment(tmp_path / "fed", data, sites=1)
    fed.write()
    (tmp_path / "fed" / "repo").mkdir(parents=True)
    (tmp_path / "fed" / "repo" / "repo.sqlite3").touch()  # as a first run by hand as root leaves it
    for p in [tmp_path, *tmp_path.rglob("*")]:
        if p.is_dir():
            p.chmod(0o755)
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
    # The services run from this checkout's venv: in a checkout nobody may enter (a clone under a private
    # directory, as `mktemp -d` makes) they cannot start as nobody at all, whatever their state directory.
    probe = subprocess.run([*as_nobody, fed.argv("site1")[0], "--version"], capture_output=True, text=True,
                           timeout=60, env=env)
    if probe.returncode != 0:
        pytest.skip(f"nobody cannot run {fed.argv('site1')[0]} from this checkout ({probe.stderr.strip()[-200:]}): "
                    "clone it where every user may read it to run this test")
    for label, key, path in (("site1", "[server] state", tmp_path / "fed" / "sites" / "site1"),
                             ("repo", "[repo] state", tmp_path / "fed" / "repo")):
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o755)
        out = subprocess.run([*as_nobody, *fed.argv(label)], capture_output=True, text=True, timeout=60, env=env)
        target = path / "repo.sqlite3" if label == "repo" else path
        if label == "repo":
            path.chmod(0o777)  # the directory is writable: the catalog file left to root still is not
            out = subprocess.run([*as_nobody, *fed.argv(label)], capture_output=True, text=True, timeout=60, env=env)
        prog = "bt-repo" if label == "repo" else "bt-server"
        assert out.returncode == ExitStatus.USAGE, out.stderr
        assert out.stderr.splitlines()[-1] == (
            f"{prog}: error: {key}: {target}: not writable by nobody (owner root); give the state directory to the "
            f"user the service runs as (chown -R nobody {path})")
