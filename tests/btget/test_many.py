"""bt-get with many targets (`bt-get A B C`, `-i LIST`) against real seeds and a repository stand-in:
the bytes of each on disk, one exit status (the worst), the summary and the --json document."""

from __future__ import annotations

import signal
import subprocess

import pytest

from tests.btget.conftest import SampleDataset, start_seed
from tests.btget.getsupport import bt_get, bt_get_async, bt_get_json, same_bytes
from tests.btget.repo_standin import create_app
from tests.btget.test_repo import publish
from tests.support import command, wait_for
from btget.resolve import plan
from torrents import build, sample

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def second(tmp_path_factory) -> SampleDataset:
    """Another dataset (5 files, about 2 MiB) beside the session's `dataset`, of its own name."""
    base = tmp_path_factory.mktemp("second")
    root = sample.generate(base / "data", name="user.jdoe.second.v1", files=5, total_size=2 * 2**20, seed=7)
    data, meta = build.build_torrent(root.name, [(p.name, p) for p in sorted(root.iterdir())])
    torrent = base / f"{root.name}.torrent"
    torrent.write_bytes(data)
    return SampleDataset(root, torrent, meta)


def on_disk(out, ds: SampleDataset, lfns=None) -> list[str]:
    """The dataset's files under out/NAME/ with the source's bytes (all must be: asserted)."""
    got = sorted(p.name for p in (out / ds.name).iterdir() if p.is_file())
    for lfn in got:
        assert same_bytes(ds.root / lfn, out / ds.name / lfn), lfn
    return got


def test_three_targets_one_missing_fetch_the_two_and_exit_with_the_worst(procs, dataset, second, tmp_path):
    peers = ["--peer", start_seed(procs, dataset), "--peer", start_seed(procs, second)]
    missing = str(tmp_path / "gone.torrent")
    out = tmp_path / "out"
    result, doc = bt_get_json(str(dataset.torrent), missing, str(second.torrent), "-o", str(out), *peers,
                              "--timeout", "90", timeout=120)
    assert result.returncode == 2, result.stderr  # USAGE: no such .torrent file
    assert result.stderr == f"bt-get: error: {missing}: no such .torrent file\n"
    assert on_disk(out, dataset) == sorted(f.lfn for f in dataset.meta.files)
    assert on_disk(out, second) == sorted(f.lfn for f in second.meta.files)
    assert [(t["target"], t["kind"], t["exit_status"]) for t in doc["targets"]] == [
        (str(dataset.torrent), "torrent", "OK"), (missing, "dataset", "USAGE"), (str(second.torrent), "torrent", "OK")]
    first, gone, last = doc["targets"]
    assert gone["datasets"] == [] and gone["error"] == f"{missing}: no such .torrent file"
    assert [d["dataset"] for d in first["datasets"] + last["datasets"]] == [dataset.name, second.name]
    assert {f["status"] for f in first["datasets"][0]["files"]} == {"complete"}
    size = dataset.meta.total_size + second.meta.total_size
    totals = doc["totals"]
    assert (totals["targets"], totals["datasets"], totals["bytes_total"], totals["bytes_done"]) == (3, 2, size, size)
    assert totals["by_status"] == {"OK": 2, "USAGE": 1}
    assert (doc["exit_status"], doc["exit_code"]) == ("USAGE", 2)


async def test_a_list_with_comments_names_and_a_typo_prints_a_summary_and_exits_3(aiohttp_server, procs, dataset,
                                                                                  second, tmp_path):
    repo_dir = tmp_path / "repo"
    repo_dir.mkdir()
    publish(repo_dir, dataset)
    server = await aiohttp_server(create_app(repo_dir), host="127.0.0.1")
    typo = dataset.name.replace("tid051203", "tid051208")
    listing = tmp_path / "targets.txt"
    listing.write_text(f"# the cosmics of run 91949\n{dataset.name}\n\n   {second.torrent}   # a .torrent\n"
                       f"{typo}\n{dataset.name}\n")  # a name twice is fetched once
    out = tmp_path / "out"
    code, stdout, stderr = await bt_get_async(
        "-i", str(listing), "--repo", str(server.make_url("")), "-o", str(out), "--peer", start_seed(procs, dataset),
        "--peer", start_seed(procs, second), "--timeout", "90", timeout=120)
    assert code == 3, stderr
    assert stderr.strip() == f"bt-get: error: {typo}: no such dataset in {str(server.make_url('')).rstrip('/')}; " \
                             f"did you mean: {dataset.name}"
    assert on_disk(out, dataset) == sorted(f.lfn for f in dataset.meta.files)
    assert on_disk(out, second) == sorted(f.lfn for f in second.meta.files)
    lines = stdout.splitlines()
    assert lines[0] == dataset.name and "  status     ok" in lines  # each dataset's summary as it ends
    assert lines[-5:] == [
        "3 targets",
        f"  ok         {dataset.name}: 24.0 MiB",
        f"  ok         {second.torrent}: 2.0 MiB",
        f"  not_found  {typo}: no such dataset in {str(server.make_url('')).rstrip('/')}; did you mean: "
        f"{dataset.name}",
        "  status not_found (exit 3)",
    ]


def test_shard_and_files_apply_to_each_dataset(procs, dataset, second, tmp_path):
    peers = ["--peer", start_seed(procs, dataset), "--peer", start_seed(procs, second)]
    out = tmp_path / "out"
    result, doc = bt_get_json(str(dataset.torrent), str(second.torrent), "-o", str(out), *peers, "--shard", "2/3",
                              "--timeout", "90", timeout=120)
    assert result.returncode == 0, result.stderr
    for ds in (dataset, second):
        files = [plan.PlanFile(i, f.lfn, f.length) for i, f in enumerate(ds.meta.files)]
        assert on_disk(out, ds) == sorted(f.lfn for f in plan.shard(files, 2, 3))
    assert doc["totals"]["datasets"] == 2
    # --files: a glob that matches in one dataset and not the other says so for that one
    glob = dataset.meta.files[-1].lfn  # the 12th file: the second dataset has 5
    result, doc = bt_get_json(str(dataset.torrent), str(second.torrent), "-o", str(tmp_path / "f"), *peers,
                              "--files", glob, "--timeout", "90", timeout=120)
    assert result.returncode == 2
    assert result.stderr == f"bt-get: error: --files: {glob}: matches none of the {len(second.meta.files)} files\n"
    assert on_disk(tmp_path / "f", dataset) == [glob]
    assert [t["exit_status"] for t in doc["targets"]] == ["OK", "USAGE"]


@pytest.mark.parametrize("args, error", [
    (("A", "B", "--serve"), "--serve: takes one TARGET (2 given): run bt-get once for each"),
    (("A", "B", "--list-files"), "--list-files: takes one TARGET (2 given): run bt-get once for each"),
    (("A", "B", "--share"), "--share: takes one TARGET (2 given): run bt-get once for each"),
    (("A", "B", "--info-hash", "a" * 40), "--info-hash: takes one TARGET (2 given): run bt-get once for each"),
    (("-i", "/nonexistent/list"), "/nonexistent/list: cannot read the target list (No such file or directory)"),
])
def test_what_takes_one_target_says_so(args, error):
    result = bt_get(*args)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", f"bt-get: error: {error}\n")


def test_a_list_of_comments_only_names_no_target(tmp_path):
    listing = tmp_path / "empty.txt"
    listing.write_text("# nothing yet\n\n")
    result = bt_get("-i", str(listing))
    assert (result.returncode, result.stderr) == (2, f"bt-get: error: {listing}: names no TARGET (only comments "
                                                     "or blank lines)\n")


def test_ctrl_c_ends_the_run_the_targets_after_it_untried_exit_130(procs, dataset, second, tmp_path):
    fast, slow = start_seed(procs, second), start_seed(procs, dataset, upload_rate=1_000_000)  # 24 MiB: ~25 s
    out = tmp_path / "out"
    proc = subprocess.Popen([command("bt-get"), str(second.torrent), str(dataset.torrent), str(tmp_path / "x.torrent"),
                             "-o", str(out), "--peer", fast, "--peer", slow], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        # the second target under way: the first is done, some of the second's bytes are on disk
        wait_for(lambda: (out / dataset.name).is_dir() and sum(
            p.stat().st_size for p in (out / dataset.name).iterdir() if p.is_file()) > 0, 60, "the second target")
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr
    assert on_disk(out, second) == sorted(f.lfn for f in second.meta.files)
    assert stdout.splitlines()[-4:] == ["2 targets", f"  ok           {second.torrent}: 2.0 MiB",
                                        f"  interrupted  {dataset.torrent}: {dataset.name}: interrupted; run again to "
                                        "resume", "  status interrupted (exit 130)"]
    assert "x.torrent" not in stdout + stderr  # never tried
