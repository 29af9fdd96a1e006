"""When a swarm can never start, bt-get says so at once with the tracker's words (exit 1), and
output-directory or repository-URL mistakes are one line naming the problem."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import start_federation
from tests.support import command, wait_for
from torrents import sample
from torrents.build import build_torrent

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("refusals")
    fed = start_federation(tmp, "--sites", "1", "--sample-files", "3", "--sample-size", "2M", "--heartbeat", "1s")
    yield fed
    assert fed.stop(timeout=30) == 0, fed.log()[-3000:]


def bt_get(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([command("bt-get"), *args], capture_output=True, text=True, timeout=timeout)


def test_an_unpublished_torrent_ends_at_once_with_the_trackers_words(fed, tmp_path):
    root = sample.generate(tmp_path / "data", name="never.published", files=2, total_size=100_000)
    data, _ = build_torrent(root.name, [(p.name, p) for p in sorted(root.iterdir())], announce=fed.announce)
    torrent = tmp_path / "never.torrent"
    torrent.write_bytes(data)
    started = time.monotonic()
    out = bt_get(str(torrent), "-o", str(tmp_path / "out"))
    elapsed = time.monotonic() - started
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        f"bt-get: error: never.published: tracker {fed.announce}: unknown info_hash: not published in this "
        "federation")
    assert f"bt-get: warning: tracker {fed.announce}: unknown info_hash" in out.stderr
    assert elapsed < 30, elapsed  # not its 300 s stall timeout


def test_an_output_directory_that_cannot_be_written_is_one_line(fed, tmp_path):
    name = fed.dataset
    not_dir = tmp_path / "a-file"
    not_dir.write_text("x")
    out = bt_get(name, "--repo", fed.repo, "-o", str(not_dir))
    assert (out.returncode, out.stderr.strip().splitlines()) == (1, [f"bt-get: error: {not_dir}: not a directory"])
    ro = tmp_path / "ro"
    ro.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"needs root to mount a read-only tmpfs: {mounted.stderr.decode().strip()}")
    try:
        out = bt_get(name, "--repo", fed.repo, "-o", str(ro))
        assert (out.returncode, out.stderr.strip().splitlines()) == (
            1, [f"bt-get: error: {ro}: cannot write here (Read-only file system)"])
    finally:
        subprocess.run(["umount", "-l", str(ro)], check=False)


@pytest.mark.parametrize("repo, message", [
    ("htp://127.0.0.1:1", "bt-get: error: --repo: 'htp://127.0.0.1:1' is not an http(s) URL"),
    ("127.0.0.1:50087", "bt-get: error: --repo: '127.0.0.1:50087' is not an http(s) URL (write http://127.0.0.1:50087)"),
])
def test_a_malformed_repository_url_is_a_usage_error(repo, message, tmp_path):
    out = bt_get("some.dataset", "--repo", repo, "-o", str(tmp_path))
    assert (out.returncode, out.stderr.strip().splitlines()[-1]) == (2, message)


def test_a_closed_port_asks_whether_bt_repo_runs_there(tmp_path):
    from tests.support import free_port
    url = f"http://127.0.0.1:{free_port()}"
    out = bt_get("some.dataset", "--repo", url, "-o", str(tmp_path))
    assert (out.returncode, out.stderr.strip().splitlines()[-1]) == (
        1, f"bt-get: error: {url}: connection refused: is bt-repo running at this URL?")


def test_no_repository_named_says_how_to_name_one(tmp_path, monkeypatch):
    import os
    env = {k: v for k, v in os.environ.items() if not k.startswith("BTSWARM_")}
    env["HOME"] = str(tmp_path)  # no user config file
    out = subprocess.run([command("bt-get"), "some.dataset", "-o", str(tmp_path)], capture_output=True, text=True,
                         timeout=60, env=env)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1].endswith(
        "(no repository was named: set one with --repo URL, $BTSWARM_GET_REPO or [get] repo in the config file)")


def test_a_url_that_is_not_a_repository_says_so(fed, tmp_path):
    out = bt_get(fed.dataset, "--repo", f"{fed.repo}/api", "-o", str(tmp_path))
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1].startswith(f"bt-get: error: {fed.repo}/api: not a btswarm repository")


def test_a_dataset_page_pasted_from_the_browser_downloads_its_dataset(fed, tmp_path):
    page = f"{fed.repo}/datasets/{fed.dataset}"
    out = bt_get(page, "-o", str(tmp_path / "out"), "--json")
    assert out.returncode == 0, out.stderr
    assert {p.name: p.read_bytes() for p in (tmp_path / "out" / fed.dataset).iterdir() if p.is_file()} == \
        {p.name: p.read_bytes() for p in fed.source.iterdir()}


def test_targets_that_are_not_torrents_say_what_they_are(fed, tmp_path):
    home = bt_get(f"{fed.repo}/", "-o", str(tmp_path))
    assert (home.returncode, home.stderr.strip().splitlines()[-1]) == (
        1, f"bt-get: error: {fed.repo}/: an HTML page, not a .torrent")
    text = tmp_path / "list.torrent"
    text.write_text("user.jdoe.a\nuser.jdoe.b\n")
    out = bt_get(str(text), "-o", str(tmp_path))
    assert (out.returncode, out.stderr.strip().splitlines()[-1]) == (
        1, f"bt-get: error: {text}: not a .torrent (a text file starting 'user.jdoe.a')")


def test_more_workers_than_the_host_can_run_are_capped_and_said(fed, tmp_path):
    out = bt_get(fed.dataset, "--repo", fed.repo, "-o", str(tmp_path), "--workers", "500")
    cores = os.cpu_count() or 1
    assert out.returncode == 0, out.stderr
    started = min(2 * cores, 3)  # the sample has 3 files
    assert f"bt-get: warning: --workers 500: this host has {cores} cores; starting {started} (at most 2 per core)" \
        in out.stderr


def forged(fed, tmp_path, query: str = "") -> tuple[Path, str]:
    """The repository's .torrent of the dataset with one byte of its info dict changed (the name's last
    character): a dataset the federation never published, with the sites' web seeds in its url-list as the
    repository serves it, which answer 404 for every file of it. The path and the forged name."""
    from btswarm.federation import get_bytes
    from torrents import bencoding, urls

    def served() -> dict | None:
        top = bencoding.decode(get_bytes(f"{fed.repo}{urls.dataset_torrent(fed.dataset)}{query}"))
        return top if query or top.get(b"url-list") else None  # the site's web seed listed once it is up

    top = wait_for(served, 20, "the repository to list the site's web seed")
    name = top[b"info"][b"name"]
    top[b"info"][b"name"] = name[:-1] + (b"x" if name[-1:] != b"x" else b"y")
    path = tmp_path / "forged.torrent"
    path.write_bytes(bencoding.encode(top))
    return path, top[b"info"][b"name"].decode()


@pytest.mark.parametrize("query, args, web_seeds", [
    ("", (), True),  # as the repository serves it: the sites' web seeds in url-list
    ("", ("--no-web-seeds",), True),
    ("?web_seeds=0", (), False),
], ids=["url-list", "no-web-seeds", "without-url-list"])
def test_a_forged_torrent_ends_with_the_trackers_words_not_the_sites(fed, tmp_path, query, args, web_seeds):
    torrent, name = forged(fed, tmp_path, query)
    from torrents import metainfo
    assert bool(metainfo.parse(torrent.read_bytes()).url_list) is web_seeds
    # Generous: the run must end (it waited 30 s and blamed the sites, or never ended); the words decide.
    out = bt_get(str(torrent), "-o", str(tmp_path / "out"), *args, timeout=90)
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        f"bt-get: error: {name}: tracker {fed.announce}: unknown info_hash: not published in this "
        "federation"), out.stderr
    assert "the sites may be unable" not in out.stderr
