"""A worker's cost per file stays flat as the file count grows: what it does is counted, not timed.

A real worker (btget/worker/process.py, its libtorrent session in this process) fetches N and then 4N small files
from a real seed. Counted for each fetch, per file:

- walks of the wanted list: every element the worker reads of it, through iteration or a membership test
  (the wanted files are given as a tuple that counts what is read of it, as a tuple's own lookup would scan
  it). One lookup in it per file of the torrent is quadratic: the regression that made a 78,579-file Linux
  tree take 53 s instead of 9 (a lookup per file in `_held_bytes`, on every run's first report);
- alerts handled, resume states written, events sent to the parent.

Each must cost no more per file at 4N than twice what it cost at N: work that grows with the number of
files fails, whatever the machine's load. The wanted list may also be read only a few times over.
"""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path

import pytest

from btget import events
from btget.worker.process import Worker
from btget.worker.spec import WorkerSpec
from tests.btget.conftest import make_dataset, next_ip, start_seed
from tests.support import wait_for

pytestmark = pytest.mark.slow

SMALL = 2000  # files in the first fetch; the second has four times as many
MEAN = 3 * 1024  # bytes per file: small files, so that per-file work dominates the fetch
WALKS = 12  # reads of each wanted file index a whole fetch may cost (about 6 today: set-up, check, reports)


class CountingTuple(tuple):
    """A tuple that counts the elements read of it; `x in t` reads them in order up to `x`, as a tuple does."""

    def __new__(cls, items):
        self = super().__new__(cls, items)
        self.reads = 0
        return self

    def __iter__(self):
        for item in super().__iter__():
            self.reads += 1
            yield item

    def __contains__(self, value):
        for item in super().__iter__():
            self.reads += 1
            if item == value:
                return True
        return False

    def __getitem__(self, index):
        self.reads += 1
        return super().__getitem__(index)


def fetch_counted(procs, base: Path, files: int) -> dict[str, float]:
    """One whole fetch of `files` files by a real worker; what it did, per file."""
    ds = make_dataset(base, files, files * MEAN)
    host, port = start_seed(procs, ds).rsplit(":", 1)
    out = base / "out"
    wanted = CountingTuple(range(len(ds.meta.files)))
    spec = WorkerSpec(index=1, torrent=ds.torrent.read_bytes(), save_path=str(out),
                      state_dir=str(out / ds.name / ".bt-get"), key="all", wanted=wanted, listen_ip=next_ip(),
                      peers=((host, int(port)),), report_interval=0.2, resume_interval=0.2)
    parent, child = multiprocessing.Pipe()
    stop: dict = {"signal": None}
    worker = Worker(spec, child, stop)
    loop = threading.Thread(target=worker.loop, daemon=True)
    loop.start()
    sent: list = []

    def finished() -> bool:
        while parent.poll():
            sent.append(parent.recv())
        return any(getattr(e, "phase", None) is events.Phase.FINISHED for e in sent)

    try:
        wait_for(finished, timeout=240, what=f"the worker to fetch {files} files")
    finally:
        stop["signal"] = "stop"
        loop.join(timeout=60)
    while parent.poll():
        sent.append(parent.recv())
    assert not loop.is_alive(), "the worker did not stop"
    last = sent[-1]
    assert last.phase is events.Phase.STOPPED and sum(last.files.values()) == sum(f.length for f in ds.meta.files)
    assert [p.read_bytes() for p in sorted((out / ds.name).glob("*.root.1"))] == \
        [p.read_bytes() for p in sorted(ds.root.glob("*.root.1"))]
    handled = worker.alerts.handled
    return {"wanted reads": wanted.reads / files, "alerts handled": sum(handled.values()) / files,
            "resume states written": handled.get("save_resume_data_alert", 0) / files,
            "events sent": len(sent) / files}


def test_a_workers_work_per_file_does_not_grow_with_the_file_count(procs, tmp_path):
    few = fetch_counted(procs, tmp_path / "few", SMALL)
    many = fetch_counted(procs, tmp_path / "many", 4 * SMALL)
    grown = {what: many[what] / few[what] for what in few if few[what]}
    assert all(ratio <= 2 for ratio in grown.values()), (grown, few, many)
    assert many["wanted reads"] <= WALKS, many
