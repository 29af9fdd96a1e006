"""bt-get paths beyond a plain download: magnets, web seeds, --check, seeding, the display, --nrandom.

Every test runs the real bt-get console script against real seeds (and a
real nginx for the web seeds) on loopback, on the small 4 MiB dataset.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time
import zlib
from pathlib import Path

import pytest

from btget.resolve import plan
from tests.btget.conftest import SampleDataset, next_ip, start_seed
from tests.btget.getsupport import bt_get, bt_get_async, bt_get_json, same_bytes
from tests.btget.repo_standin import create_app
from tests.support import command, stop, wait_for
from torrents import build

pytestmark = pytest.mark.slow


def assert_identical(ds: SampleDataset, out: Path, lfns=None) -> None:
    for f in ds.meta.files:
        if lfns is None or f.lfn in lfns:
            assert same_bytes(ds.root / f.lfn, out / ds.name / f.lfn), f.lfn


def publish(directory: Path, ds: SampleDataset) -> None:
    """NAME.json (with adler32s) and NAME.torrent, as the repository serves them."""
    files = [{"lfn": f.lfn, "size": f.length, "adler32": f"{zlib.adler32((ds.root / f.lfn).read_bytes()):08x}"}
             for f in ds.meta.files]
    (directory / f"{ds.name}.json").write_text(json.dumps(
        {"name": ds.name, "info_hash": ds.meta.info_hash, "total_size": ds.meta.total_size,
         "file_count": len(files), "sites": [], "files": files}))
    (directory / f"{ds.name}.torrent").write_bytes(ds.torrent.read_bytes())


class Background:
    """A bt-get running in the background in its own process group; stdout and stderr in files."""

    def __init__(self, args: list[str], tmp: Path, label: str) -> None:
        self.out_path, self.err_path = tmp / f"{label}.out", tmp / f"{label}.err"
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.popen = subprocess.Popen([command("bt-get"), *args], stdout=out, stderr=err,
                                          stdin=subprocess.DEVNULL, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def stdout(self) -> str:
        return self.out_path.read_text(errors="replace")

    def wait(self, timeout: float) -> int:
        return self.popen.wait(timeout)

    def stop(self) -> None:
        # The group is this bt-get and its workers (start_new_session): its PGID is its PID.
        stop(self.popen, 15, whole_group=True)


@pytest.fixture
def background(tmp_path):
    """background(label, *args) → a running bt-get; every one is stopped by PID at teardown."""
    started: list[Background] = []

    def start(label: str, *args: str) -> Background:
        b = Background(list(args), tmp_path, label)
        started.append(b)
        return b

    yield start
    for b in reversed(started):
        b.stop()


LISTENING = re.compile(r"worker 1 listening on (\S+:\d+)")


# --- 1. magnets ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def public_dataset(small_dataset, tmp_path_factory) -> SampleDataset:
    """The small dataset in a torrent that is not private: peers share its metadata (BEP 9)."""
    ds = small_dataset
    data, meta = build.build_torrent(ds.name, [(p.name, p) for p in sorted(ds.root.iterdir())], private=False)
    torrent = tmp_path_factory.mktemp("public") / f"{ds.name}.torrent"
    torrent.write_bytes(data)
    return SampleDataset(ds.root, torrent, meta)


@pytest.fixture
def public_seed(procs, public_dataset):
    return lambda: start_seed(procs, public_dataset)


async def test_magnet_unknown_to_the_repository_takes_the_metadata_from_a_peer(
        aiohttp_server, public_dataset, public_seed, tmp_path):
    ds = public_dataset
    (tmp_path / "empty-repo").mkdir()
    server = await aiohttp_server(create_app(tmp_path / "empty-repo"), host="127.0.0.1")
    peer = public_seed()
    magnet = f"magnet:?xt=urn:btih:{ds.meta.info_hash}&dn={ds.name}&x.pe={peer}"
    code, out, err = await bt_get_async(magnet, "--repo", str(server.make_url("")), "-o", str(tmp_path / "out"),
                                        "--json", "--timeout", "30")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["info_hash"] == ds.meta.info_hash and doc["dataset"] == ds.name
    assert {f["status"] for f in doc["files"]} == {"complete"}  # no record: nothing to verify against
    assert_identical(ds, tmp_path / "out")


def test_magnet_without_name_with_peer_option(public_dataset, public_seed, tmp_path):
    ds = public_dataset
    result, doc = bt_get_json(f"magnet:?xt=urn:btih:{ds.meta.info_hash}", "-o", str(tmp_path),
                              "--peer", public_seed(), "--timeout", "30")
    assert result.returncode == 0, result.stderr
    assert doc["dataset"] == ds.name
    assert_identical(ds, tmp_path)


def test_magnet_of_a_private_torrent_cannot_come_from_peers(small_dataset, small_seed, tmp_path):
    # libtorrent sends no private torrent's metadata (BEP 27): exit 4 with a hint, not a silent wait.
    ds = small_dataset
    assert ds.meta.private
    result = bt_get(f"magnet:?xt=urn:btih:{ds.meta.info_hash}", "-o", str(tmp_path), "--peer", small_seed(),
                    "--timeout", "2", timeout=30)
    assert result.returncode == 4, result.stderr
    assert result.stderr.strip() == ("bt-get: error: magnet: no peer sent the metadata within 2 s (peers do not "
                                     "share a private torrent's metadata: use the dataset name or its .torrent)")
    assert result.stdout == ""


async def test_magnet_known_to_the_repository_uses_its_torrent(aiohttp_server, small_dataset, small_seed, tmp_path):
    ds = small_dataset
    (tmp_path / "repo").mkdir()
    publish(tmp_path / "repo", ds)
    server = await aiohttp_server(create_app(tmp_path / "repo"), host="127.0.0.1")
    # No x.pe: the metadata cannot come from a peer; the record's adler32s show it came from the repository.
    code, out, err = await bt_get_async(f"magnet:?xt=urn:btih:{ds.meta.info_hash}&dn={ds.name}",
                                        "--repo", str(server.make_url("")), "-o", str(tmp_path / "out"),
                                        "--peer", small_seed(), "--json", "--timeout", "30")
    assert code == 0, err
    assert {f["status"] for f in json.loads(out)["files"]} == {"verified"}
    assert_identical(ds, tmp_path / "out")


async def test_magnet_whose_hash_differs_from_the_repository_torrent_exits_1(aiohttp_server, small_dataset,
                                                                              tmp_path):
    ds = small_dataset
    (tmp_path / "repo").mkdir()
    publish(tmp_path / "repo", ds)
    server = await aiohttp_server(create_app(tmp_path / "repo"), host="127.0.0.1")
    other = "0123456789abcdef0123456789abcdef01234567"
    magnet = f"magnet:?xt=urn:btih:{other}&dn={ds.name}"
    code, out, err = await bt_get_async(magnet, "--repo", str(server.make_url("")), "-o", str(tmp_path / "out"),
                                        timeout=30)
    assert code == 1, err
    assert out == ""
    assert err.strip() == (f"bt-get: error: {magnet}: the repository's torrent has info-hash "
                           f"{ds.meta.info_hash}, not the magnet's {other}")


# --- 2. web seeds ------------------------------------------------------------------------------------

def test_web_seed_alone_completes(small_dataset, nginx, tmp_path):
    ds = small_dataset
    url = nginx(ds.data)  # serves DATA/: URL + NAME + '/' + LFN is each file (BEP 19, multi-file)
    result, doc = bt_get_json(str(ds.torrent), "-o", str(tmp_path), "--web-seed", url, "--timeout", "30")
    assert result.returncode == 0, result.stderr
    assert doc["bytes_downloaded"] >= ds.meta.total_size
    # named as a web seed, not taken for a sibling worker on the same 127.0.0.1
    assert doc["sources"] == {f"web seed {url[len('http://'):-1]}": doc["bytes_downloaded"]}
    assert_identical(ds, tmp_path)


def test_torrent_url_list_is_honoured(small_dataset, nginx, tmp_path):
    ds = small_dataset
    url = nginx(ds.data)
    data, meta = build.build_torrent(ds.name, [(p.name, p) for p in sorted(ds.root.iterdir())], url_list=[url])
    assert meta.info_hash == ds.meta.info_hash  # url-list is outside the info dict
    torrent = tmp_path / "with-url-list.torrent"
    torrent.write_bytes(data)
    result, doc = bt_get_json(str(torrent), "-o", str(tmp_path / "out"), "--timeout", "30")
    assert result.returncode == 0, result.stderr
    assert_identical(ds, tmp_path / "out")


# --- 3. --check --------------------------------------------------------------------------------------

def test_check_refetches_a_piece_corrupted_on_disk(small_dataset, small_seed, tmp_path):
    ds = small_dataset
    peer = small_seed()
    first, _ = bt_get_json(str(ds.torrent), "-o", str(tmp_path), "--peer", peer, "--timeout", "30")
    assert first.returncode == 0, first.stderr
    victim = max(ds.meta.files, key=lambda f: f.length)
    path = tmp_path / ds.name / victim.lfn
    with open(path, "r+b") as f:  # same size, different middle bytes
        f.seek(victim.length // 2)
        chunk = f.read(4096)
        f.seek(victim.length // 2)
        f.write(bytes(b ^ 0xFF for b in chunk))
    assert not same_bytes(ds.root / victim.lfn, path)

    # Without --check the saved resume state is trusted: nothing is re-hashed or fetched, the damage stays.
    trusting, doc = bt_get_json(str(ds.torrent), "-o", str(tmp_path), "--peer", peer, "--timeout", "30")
    assert trusting.returncode == 0, trusting.stderr
    assert doc["bytes_downloaded"] == 0 and doc["hash_failures"] == 0
    assert {f["status"] for f in doc["files"]} == {"complete"}
    assert not same_bytes(ds.root / victim.lfn, path)

    # With --check what is on disk is re-hashed: the corrupt piece(s), and only those, are fetched again.
    checked, doc = bt_get_json(str(ds.torrent), "-o", str(tmp_path), "--peer", peer, "--check", "--timeout", "30")
    assert checked.returncode == 0, checked.stderr
    assert 0 < doc["bytes_downloaded"] <= 2 * ds.meta.piece_length
    assert_identical(ds, tmp_path)


# --- 4. seeding after completion ---------------------------------------------------------------------

def start_seeding_get(background, ds: SampleDataset, out: Path, peer: str, *extra: str) -> tuple[Background, str]:
    """A first bt-get on its own address that seeds after completion; returns it once complete, and its endpoint."""
    first = background("first", str(ds.torrent), "-o", str(out), "--listen", next_ip(),
                       "--peer", peer, "--json", "-v", *extra)
    wait_for(lambda: "complete in" in first.stderr() or first.popen.poll() is not None, timeout=30,
             what="the first bt-get to complete")
    assert first.popen.poll() is None, f"exited {first.popen.returncode} instead of seeding:\n{first.stderr()}"
    assert "; seeding" in first.stderr()
    endpoint = LISTENING.search(first.stderr())
    assert endpoint, first.stderr()
    return first, endpoint.group(1)


def test_seed_time_keeps_serving_a_second_bt_get(small_dataset, small_seed, background, tmp_path):
    ds = small_dataset
    first, endpoint = start_seeding_get(background, ds, tmp_path / "a", small_seed(), "--seed-time", "3")
    completed = time.monotonic()
    # The second knows no seed but the first, and listens on another address.
    second, doc = bt_get_json(str(ds.torrent), "-o", str(tmp_path / "b"), "--peer", endpoint,
                              "--listen", next_ip(), "--timeout", "20")
    assert second.returncode == 0, second.stderr
    assert doc["sources"] == {endpoint: doc["bytes_downloaded"]}
    assert_identical(ds, tmp_path / "b")
    assert first.wait(20) == 0, first.stderr()
    seeded = time.monotonic() - completed
    assert 2.5 < seeded < 15, seeded
    assert json.loads(first.stdout())["workers"][0]["uploaded"] >= ds.meta.total_size


def test_seed_ratio_stops_seeding_once_reached(small_dataset, small_seed, background, tmp_path):
    ds = small_dataset
    first, endpoint = start_seeding_get(background, ds, tmp_path / "a", small_seed(), "--seed-ratio", "1")
    # Nothing uploaded yet: no time limit, so it keeps seeding until someone takes a full copy.
    with pytest.raises(subprocess.TimeoutExpired):
        first.wait(1.0)
    second, _ = bt_get_json(str(ds.torrent), "-o", str(tmp_path / "b"), "--peer", endpoint,
                            "--listen", next_ip(), "--timeout", "20")
    assert second.returncode == 0, second.stderr
    assert_identical(ds, tmp_path / "b")
    assert first.wait(15) == 0, first.stderr()
    doc = json.loads(first.stdout())
    assert doc["exit_status"] == "OK"
    assert doc["workers"][0]["uploaded"] >= ds.meta.total_size


def test_ctrl_c_while_seeding_exits_0_with_the_data(small_dataset, small_seed, background, tmp_path):
    ds = small_dataset
    first, _ = start_seeding_get(background, ds, tmp_path, small_seed(), "--seed-time", "10m")
    os.killpg(first.pid, signal.SIGINT)  # Ctrl-C reaches the terminal's whole process group
    assert first.wait(20) == 0, first.stderr()
    doc = json.loads(first.stdout())
    assert (doc["exit_status"], doc["exit_code"]) == ("OK", 0)
    assert {f["status"] for f in doc["files"]} == {"complete"}
    assert_identical(ds, tmp_path)


# --- 5. the display ----------------------------------------------------------------------------------

ANSI = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-B]|[=>78])")


def run_in_pty(args: list[str], timeout: float, columns: int = 160) -> tuple[int, str, str]:
    """Run bt-get with stderr on a pseudo-terminal; return (exit code, what the terminal showed, stdout)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen([command("bt-get"), *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=slave, start_new_session=True,
                            env={**os.environ, "TERM": "xterm-256color", "COLUMNS": str(columns), "LINES": "40"})
    os.close(slave)
    screen = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer of the terminal has closed it
                    break
                if not chunk:
                    break
                screen += chunk
            elif proc.poll() is not None:
                break
        stdout = proc.stdout.read().decode() if proc.wait(max(1.0, deadline - time.monotonic())) is not None else ""
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        proc.stdout.close()
        os.close(master)
    return proc.returncode, screen.decode(errors="replace"), stdout


def screen_lines(raw: str) -> list[str]:
    return [line.rstrip() for line in re.split(r"[\r\n]+", ANSI.sub("", raw)) if line.strip()]


def test_display_on_a_terminal_shows_workers_and_total(small_dataset, small_seed, tmp_path):
    ds = small_dataset
    peer = small_seed(upload_rate=1536 * 1024)  # ~3 s for the whole: several redraws mid-way
    code, raw, stdout = run_in_pty([str(ds.torrent), "-o", str(tmp_path), "--peer", peer, "--workers", "2",
                                    "--timeout", "30"], timeout=45)
    assert code == 0, raw
    lines = screen_lines(raw)
    row = (r"^\s*{name} .*\s\d+\.\d%\s+[\d.]+/[\d.]+ MiB\s+([\d.]+ (?:B|KiB|MiB)/s|--|)\s.*"
           r"\s(\d+) peers\s+(\d+) seeds$")
    for name in ("worker 1", "worker 2", "total"):
        rows = [m for m in (re.match(row.format(name=name), line) for line in lines) if m]
        assert rows, f"no {name} row on the screen:\n" + "\n".join(lines[-20:])
        # mid-way: a rate in binary units and the seed counted
        assert any(m.group(1).endswith(("KiB/s", "MiB/s")) and int(m.group(3)) >= 1 for m in rows), \
            f"no {name} row with a rate and a seed:\n" + "\n".join(m.group(0) for m in rows)
    final = [line for line in lines if line.lstrip().startswith("total")][-1]
    assert "100.0%" in final, final
    assert "status     ok" in stdout  # the summary still goes to stdout
    assert_identical(ds, tmp_path)


def test_no_display_when_stderr_is_not_a_terminal(small_dataset, small_seed, tmp_path):
    ds = small_dataset
    result = bt_get(str(ds.torrent), "-o", str(tmp_path), "--peer", small_seed(), "--workers", "2",
                    "--timeout", "30")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "status     ok" in result.stdout


# --- 6. --nrandom ------------------------------------------------------------------------------------

def picked(doc: dict) -> set[str]:
    assert {f["status"] for f in doc["files"]} <= {"complete", "skipped"}
    return {f["lfn"] for f in doc["files"] if f["status"] == "complete"}


def test_nrandom_same_seed_same_files_other_seed_others(small_dataset, small_seed, tmp_path):
    ds = small_dataset
    peer = small_seed()
    runs = {}
    for label, seed in (("a", "7"), ("b", "7"), ("c", "8")):
        result, doc = bt_get_json(str(ds.torrent), "-o", str(tmp_path / label), "--peer", peer,
                                  "--nrandom", "2", "--seed", seed, "--timeout", "30")
        assert result.returncode == 0, result.stderr
        runs[label] = picked(doc)
        assert len(runs[label]) == 2
        assert doc["bytes_total"] == sum(f.length for f in ds.meta.files if f.lfn in runs[label])
        assert_identical(ds, tmp_path / label, runs[label])
    assert runs["a"] == runs["b"]
    assert runs["c"] != runs["a"]
    # the pure choice bt-get made is plan.sample's, in any process
    files = [plan.PlanFile(i, f.lfn, f.length) for i, f in enumerate(ds.meta.files)]
    assert runs["a"] == {f.lfn for f in plan.sample(files, 2, "7")}


def test_nrandom_larger_than_the_dataset_takes_every_file(small_dataset, small_seed, tmp_path):
    ds = small_dataset
    result, doc = bt_get_json(str(ds.torrent), "-o", str(tmp_path), "--peer", small_seed(),
                              "--nrandom", str(len(ds.meta.files) + 5), "--seed", "1", "--timeout", "30")
    assert result.returncode == 0, result.stderr
    assert picked(doc) == {f.lfn for f in ds.meta.files}
    assert_identical(ds, tmp_path)


@pytest.mark.parametrize("args, message", [
    (["--nrandom", "0"], "bt-get: error: --nrandom: must be at least 1, got 0"),
    (["--seed", "3"], "bt-get: error: --seed: only makes sense with --nrandom"),
])
def test_nrandom_bad_usage_exits_2(small_dataset, tmp_path, args, message):
    result = bt_get(str(small_dataset.torrent), "-o", str(tmp_path), *args, timeout=30)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == message
