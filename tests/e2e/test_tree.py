"""Every file of a real tree arrives: case-only twins, dotfiles, empty files, links inside the
dataset (file and directory), non-ASCII and spaced names, deep nesting, paths near PATH_MAX; a link
leaving the storage roots is refused and said; a seed that cannot read a file says so and the
client moves on. Checked as a user would: `diff -r --no-dereference` of the source and the download.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest

from btswarm.federation import LaunchError, WaitTimeout, get_json
from tests.e2e.conftest import start_federation
from tests.faults.conftest import service_pid
from tests.support import command, wait_for

pytestmark = pytest.mark.slow

NAME = "user.physicist.linux-like.tree"
LONG = "/".join(["d" * 200] * 17) + "/leaf.txt"  # 3,425 characters, 18 levels of 200


def build_tree(root: Path, outside: Path) -> None:
    rng = random.Random(7)

    def put(lfn: str, size: int) -> None:
        path = root / lfn
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rng.randbytes(size))

    put("net/netfilter/xt_TCPMSS.c", 40_000)
    put("net/netfilter/xt_tcpmss.c", 30_000)  # differs from the one above in case only
    put("include/uapi/linux/netfilter/xt_TCPMSS.h", 500)
    put("include/uapi/linux/netfilter/xt_tcpmss.h", 700)
    put(".clang-format", 1_200)
    put(".github/workflows/ci.yml", 300)
    put("Documentation/.gitignore", 20)
    (root / "empty").write_bytes(b"")
    put("scripts/empty dir is not empty/ünïcødé name — 日本語.txt", 2_000)
    put("arch/arm/boot/dts/board.dts", 900_000)
    put("drivers/gpu/big.bin", 3_000_000)
    put(LONG, 100)
    put("/".join(f"level{i}" for i in range(60)) + "/deep.c", 10)
    os.makedirs(root / "arch/arm64/boot/dts")
    os.symlink("../../../arm/boot/dts", root / "arch/arm64/boot/dts/arm")  # a directory link inside
    os.symlink("xt_TCPMSS.c", root / "net/netfilter/alias.c")  # a file link inside
    # written as the Linux tree's asm-compat.h is (`../.././../…`): arrives as written, not normalised
    os.symlink("./../netfilter/./xt_tcpmss.c", root / "net/netfilter/odd-form.c")
    os.symlink("../missing/file.c", root / "net/dangling.c")  # to nothing: a torrent cannot carry it
    outside.write_bytes(b"not for the swarm")
    os.symlink(outside, root / "escape")  # leaves the storage roots: refused, said


def diff(source: Path, copy: Path, *exclude: str) -> str:
    out = subprocess.run(["diff", "-r", "--no-dereference", *[f"--exclude={x}" for x in exclude],
                          str(source), str(copy)], capture_output=True, text=True)
    return out.stdout + out.stderr


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tree")
    data = tmp / "data"
    build_tree(data / NAME, tmp / "outside-secret")
    fed = start_federation(tmp, "--sites", "2", "--data", str(data), "--heartbeat", "1s", "--idle-ttl", "2s")
    yield fed
    assert fed.stop(timeout=30) == 0, fed.log()[-3000:]


def test_every_file_of_the_tree_arrives_exactly(tree, tmp_path):
    out = subprocess.run([command("bt-get"), NAME, "--repo", tree.repo, "-o", str(tmp_path), "--workers", "2",
                          "--json", "--timeout", "120"], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert {f["status"] for f in doc["files"]} == {"complete"}
    assert diff(tree.source, tmp_path / NAME, "escape", "dangling.c", ".bt-get") == ""
    assert os.readlink(tmp_path / NAME / "arch/arm64/boot/dts/arm") == "../../../arm/boot/dts"
    assert os.readlink(tmp_path / NAME / "net/netfilter/odd-form.c") == "./../netfilter/./xt_tcpmss.c"
    assert (tmp_path / NAME / "net/netfilter/xt_tcpmss.c").read_bytes() == \
        (tree.source / "net/netfilter/xt_tcpmss.c").read_bytes()


def test_what_is_refused_is_counted_and_listed(tree):
    status = tree.site_status("site1")
    ds = next(d for d in status["datasets"] if d["name"] == NAME)
    assert any(r.endswith("escape: link to " + str(Path(tree.source).parent.parent / "outside-secret")
                          + " leaves the storage roots; refused") for r in ds["refused"]), ds["refused"]
    record = json.load(urllib.request.urlopen(f"{tree.repo}/api/datasets/{NAME}", timeout=5))
    assert any(r.endswith("dangling.c: link to missing/file.c, which the dataset does not carry (missing, "
                          "excluded or refused); refused") for r in ds["refused"]), ds["refused"]
    assert record["left_out"]["site1"]["count"] == 2
    assert {f["lfn"]: f.get("symlink") for f in record["files"] if f.get("symlink")} == {
        "arch/arm64/boot/dts/arm": "arch/arm/boot/dts", "net/netfilter/alias.c": "net/netfilter/xt_TCPMSS.c",
        "net/netfilter/odd-form.c": "net/netfilter/xt_tcpmss.c"}
    page = urllib.request.urlopen(f"{tree.repo}/datasets/{NAME}", timeout=5).read().decode()
    assert "Left out by sites" in page and "leaves the storage roots" in page
    scan = subprocess.run([command("bt-server"), "scan", "--config", str(tree.state / "config" / "site1.toml")],
                          capture_output=True, text=True, timeout=120)
    assert "escape: link to" in scan.stderr and scan.returncode == 8  # PROBLEMS


def idle(fed) -> None:
    """No seed running: the next ones open their files afresh (a running seed keeps them open); and both
    sites hold the dataset at the tracker again (a test before may have made one drop it, then rescan)."""
    try:
        wait_for(lambda: fed.seeding() == {"site1": 0, "site2": 0}, timeout=30, interval=0.2,
                 what="idle seeds to stop")
    except WaitTimeout:  # once in a full run (not reproduced alone): say who kept them busy
        seeds = {s.name: fed.site_status(s.name)["seeds"] for s in fed.sites}
        with open(fed.state / "logs" / "tracker.log") as log:
            raise AssertionError(f"seeds still running after 30 s: {seeds}; tracker: {log.read()[-2000:]}") from None
    swarm = f"{fed.tracker_url}/api/swarms/{fed.info_hash(NAME)}"

    def holders() -> list[str]:
        try:
            return sorted(get_json(swarm).get("holders") or [])
        except OSError:  # 404 before the first announce
            return []
    wait_for(lambda: holders() == ["site1", "site2"], timeout=30, interval=0.2,
             what="both sites to hold the dataset at the tracker")


def test_a_file_a_site_cannot_read_stops_its_seed_and_the_client_finishes_from_the_other(tree, tmp_path):
    """The big file vanishes at site1 (a disk pool gone): site1 says so and stops offering the
    dataset; the client completes from site2."""
    idle(tree)
    site1 = tree.site_status("site1")
    farm = Path(tree.state / "sites" / "site1" / "farm" / NAME / "drivers/gpu/big.bin")
    assert farm.is_symlink()
    # Only site1's view: its farm link now points at nothing (site2 keeps its own farm).
    target = os.readlink(farm)
    os.unlink(farm)
    os.symlink(str(tmp_path / "gone"), farm)
    try:
        out = subprocess.run([command("bt-get"), NAME, "--repo", tree.repo, "-o", str(tmp_path / "out"),
                              "--json", "--timeout", "120"], capture_output=True, text=True, timeout=180,
                             env={**os.environ, "BTSWARM_GET_BLOCKED_AFTER": "20s"})
        assert out.returncode == 0, out.stderr
        assert diff(tree.source, tmp_path / "out" / NAME, "escape", "dangling.c", ".bt-get") == ""
        status = tree.site_status("site1")
        if status["read_errors"]:  # site1 was asked for the file's pieces (else site2 sent them all)
            assert any("cannot read" in p for p in status["problems"]), status["problems"]
            assert all(d["name"] != NAME or not d["seeding"] for d in status["datasets"])
    finally:
        os.unlink(farm)
        os.symlink(target, farm)
        os.kill(service_pid(tree, "site1"), signal.SIGHUP)
    assert site1["hash_failures"] == 0


def test_a_file_no_site_can_read_is_named_within_the_blocked_time(tree, tmp_path):
    idle(tree)
    farms = [Path(tree.state / "sites" / s / "farm" / NAME / "arch/arm/boot/dts/board.dts") for s in ("site1", "site2")]
    targets = [os.readlink(f) for f in farms]
    for f in farms:
        os.unlink(f)
        os.symlink(str(tmp_path / "gone"), f)
    try:
        out = subprocess.run([command("bt-get"), NAME, "--repo", tree.repo, "-o", str(tmp_path / "out"),
                              "--timeout", "120"], capture_output=True, text=True, timeout=180,
                             env={**os.environ, "BTSWARM_GET_BLOCKED_AFTER": "10s"})
        assert out.returncode == 7, out.stderr
        line = out.stderr.strip().splitlines()[-1]
        assert line.startswith(f"bt-get: error: {NAME}: ") and "arch/arm/boot/dts/board.dts" in line, line
        wait_for(lambda: all(tree.site_status(s)["read_errors"] for s in ("site1", "site2")), timeout=30,
                 what="both sites to count the read error")
    finally:
        for f, t in zip(farms, targets):
            os.unlink(f)
            os.symlink(t, f)
        for s in ("site1", "site2"):
            os.kill(service_pid(tree, s), signal.SIGHUP)


def test_up_fails_at_once_when_a_dataset_it_was_given_cannot_be_served(tmp_path):
    data = tmp_path / "data"
    (data / "only.links").mkdir(parents=True)
    (tmp_path / "elsewhere").write_bytes(b"x")
    os.symlink(tmp_path / "elsewhere", data / "only.links" / "escape")
    with pytest.raises(LaunchError) as info:
        start_federation(tmp_path, "--sites", "1", "--data", str(data), "--heartbeat", "1s")
    text = str(info.value)
    assert "site1 cannot serve only.links" in text and "leaves the storage roots" in text
