"""What each worker of a run is given (btget.transfer.download.worker_specs, pure but for the run's random id)."""

from __future__ import annotations

from btget.resolve import plan
from btget.transfer.download import Job, state_dir, worker_specs
from torrents import build, peerid


def job_of(tmp_path, shares: int, pick: slice = slice(None), **kw) -> Job:
    src = tmp_path / "src"
    src.mkdir()
    sizes = {"a": 3000, "b": 1000, "c": 2000}
    for name, size in sizes.items():
        (src / name).write_bytes(b"x" * size)
    built = build.build_dataset("ds", [(n, src / n) for n in sizes], piece_length=16384)
    files = [plan.PlanFile(i, f.lfn, f.length) for i, f in enumerate(built.meta.files)][pick]
    return Job(meta=built.meta, torrent=built.torrent, directory=tmp_path / "out",
               shares=tuple(tuple(s) for s in plan.split(files, shares)), selected=tuple(files), **kw)


def test_two_workers_share_one_run_each_with_its_part_and_its_part_of_the_cap(tmp_path):
    job = job_of(tmp_path, 2, max_rate=6000, max_upload_rate=1000)
    specs = worker_specs(job, state_dir(job))
    assert [s.index for s in specs] == [1, 2]
    assert [s.wanted for s in specs] == [(0,), (1, 2)]  # largest first, by bytes: a | b + c
    assert len({s.peer_prefix for s in specs}) == 1 and specs[0].peer_prefix.startswith(peerid.PART)
    assert [s.part for s in specs] == [peerid.part_tag([0]), peerid.part_tag([1, 2])]
    assert [s.rates for s in specs] == [(3000, 500), (3000, 500)]  # the download cap by bytes left, uploads evenly
    assert {s.state_dir for s in specs} == {str(tmp_path / "out" / "ds" / ".bt-get")}
    assert specs[0].key != specs[1].key


def test_one_worker_for_every_file_wants_the_whole_dataset(tmp_path):
    job = job_of(tmp_path, 1)
    (spec,) = worker_specs(job, state_dir(job))
    assert spec.wanted == (0, 1, 2) and spec.part == "" and spec.peer_prefix.startswith(peerid.WHOLE)
    assert spec.rates == (0, 0)


def test_one_worker_for_some_files_says_which_part(tmp_path):
    job = job_of(tmp_path, 1, slice(1, 3))
    (spec,) = worker_specs(job, state_dir(job))
    assert spec.wanted == (1, 2) and spec.part == peerid.part_tag([1, 2])
    assert spec.peer_prefix.startswith(peerid.PART)
