"""bt-get --shard under a real SLURM: `sbatch --array=1-4`, one share per task, into one shared directory.

The job script is the one docs/batch.md shows. Each task runs bt-get on its
own 127.0.0.x, so the tasks are distinct peers that can trade the pieces
where two shares meet.
"""

from __future__ import annotations

import json

import pytest

from tests.support import command
from torrents import metainfo

pytestmark = pytest.mark.slow

TASKS = 4
JOB_SCRIPT = """#!/bin/bash
#SBATCH --job-name=bt-get-shards
#SBATCH --array=1-{tasks}
#SBATCH --cpus-per-task=1
#SBATCH --output={logs}/task-%a.log
# One share of the dataset per array task, every task on its own address.
set -euo pipefail
"{bt_get}" "{dataset}" --repo "{repo}" -o "{out}" \\
    --shard "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT" \\
    --listen "127.0.0.$((100 + SLURM_ARRAY_TASK_ID))" \\
    --seed-time 5s --timeout 10m --json > "{logs}/task-$SLURM_ARRAY_TASK_ID.json"
echo "job $SLURM_JOB_ID task $SLURM_ARRAY_TASK_ID done"
"""


def piece_span(meta: metainfo.Metainfo, lfns: set[str]) -> int:
    """Bytes of every piece that holds any byte of these files: a share rounded out to whole pieces."""
    pieces: set[int] = set()
    offset = 0
    for f in meta.files:
        if f.lfn in lfns and f.length:
            pieces.update(range(offset // meta.piece_length, (offset + f.length - 1) // meta.piece_length + 1))
        offset += f.length
    last = meta.num_pieces - 1
    return sum(meta.total_size - last * meta.piece_length if p == last else meta.piece_length for p in pieces)


def test_array_of_shards_fetches_the_whole_dataset_and_trades(slurm, shard_federation, tmp_path):
    fed = shard_federation
    out, logs = tmp_path / "shared", tmp_path / "logs"
    out.mkdir()
    logs.mkdir()
    script = tmp_path / "fetch.sbatch"
    script.write_text(JOB_SCRIPT.format(tasks=TASKS, logs=logs, bt_get=command("bt-get"), dataset=fed.dataset,
                                        repo=fed.repo, out=out))
    array_id = slurm.sbatch(script)
    records = slurm.wait(array_id, timeout=240)
    tasks = slurm.tasks(array_id)
    logs_text = {k: (logs / f"task-{k}.log").read_text(errors="replace") if (logs / f"task-{k}.log").exists()
                 else "(no log)" for k in range(1, TASKS + 1)}
    assert sorted(tasks) == list(range(1, TASKS + 1)), (records, logs_text)

    # sacct: every task COMPLETED with exit code 0.
    job_ids = {k: int(rec["JobId"]) for k, rec in tasks.items()}
    accounted = slurm.accounting(list(job_ids.values()))
    assert {k: accounted.get(j) for k, j in job_ids.items()} == {k: ("COMPLETED", "0:0") for k in job_ids}, \
        (accounted, logs_text)

    docs = {k: json.loads((logs / f"task-{k}.json").read_text()) for k in job_ids}
    meta = metainfo.parse(fed.torrent(fed.dataset))
    shares = {k: {f["lfn"] for f in d["files"] if f["status"] in ("complete", "verified")} for k, d in docs.items()}

    # The shares are disjoint and together the whole dataset, byte for byte.
    every = {f.lfn for f in meta.data_files}
    assert sum(len(s) for s in shares.values()) == len(every) and set().union(*shares.values()) == every
    for f in meta.data_files:
        assert (out / fed.dataset / f.lfn).read_bytes() == (fed.source / f.lfn).read_bytes(), f.lfn

    # Each task fetched its share and at most the pieces it shares with another task (each byte
    # counted once: a block that arrived twice near the end is in bytes_redundant).
    for k, d in docs.items():
        share_bytes = sum(f.length for f in meta.data_files if f.lfn in shares[k])
        unique = d["bytes_downloaded"] - d["bytes_redundant"]
        assert share_bytes <= unique <= piece_span(meta, shares[k]), (k, d["bytes_downloaded"], d["bytes_redundant"])

    # The tasks traded: some task took bytes from another task's address.
    task_ips = {f"127.0.0.{100 + k}" for k in job_ids}
    from_tasks = {k: sum(n for src, n in d["sources"].items() if src.rsplit(":", 1)[0] in task_ips)
                  for k, d in docs.items()}
    assert sum(from_tasks.values()) > 0, {k: d["sources"] for k, d in docs.items()}
