"""Benchmark smallfiles: 20,000 files of 1-50 KB by bt-get through the federation vs `tar c | tar x`.

    .venv/bin/python scripts/bench_smallfiles.py [--out DIR] [--quick] [--keep] [--files 20000]

A real federation (`btswarm up --sites 2`) holding one dataset of small
files (torrents.sample, 1-50 KB each; --quick 5,000 files). A warm-up
bt-get starts the on-demand seeds and, with a first tar, warms the page
cache. Then each run: bt-get (--workers 1 and 2) into a fresh directory vs
`tar cf - -C DATA NAME | tar xf - -C FRESH` of the same directory, wall time
of the whole command, median of the runs. Target: bt-get >= 0.8x tar.
"""

from __future__ import annotations

import sys
from pathlib import Path

import benchlib as bl

TARGET = 0.8
MEAN = 25 * 1024 + 512  # with jitter 0.96: sizes from about 1 KB to 50 KB


def run(work: Path, files: int, runs: int) -> dict:
    from torrents import sample

    data = work / "data"
    root = sample.generate(data, name="bench.smallfiles.dataset", files=files, total_size=files * MEAN,
                           jitter=0.96)
    name, total = root.name, bl.dataset_size(root)
    bl.log(f"dataset {name}: {files} files, {total / 1e6:.0f} MB")
    out = work / "out"
    detail: dict[str, list[dict[str, float]]] = {"bt-get -w1": [], "bt-get -w2": [], "tar c | tar x": []}
    with bl.federation(work, data, sites=2) as fed:
        bl.timed(bl.bt_get_cmd(fed, name, bl.fresh_dir(out), bl.client_ip(0)), 900)
        commands = {
            "bt-get -w1": lambda o: bl.bt_get_cmd(fed, name, o, bl.client_ip(1), "--workers", "1"),
            "bt-get -w2": lambda o: bl.bt_get_cmd(fed, name, o, bl.client_ip(2), "--workers", "2"),
            "tar c | tar x": lambda o: ["sh", "-c", f"tar cf - -C '{data}' '{name}' | tar xf - -C '{o}'"],
        }
        bl.timed(commands["tar c | tar x"](bl.fresh_dir(out)), 900)  # warm the page cache for tar too
        for run_no in range(runs):
            for label, make in commands.items():
                dest = bl.fresh_dir(out)
                t = bl.timed(make(dest), 900)
                got = bl.dataset_size(dest / name)
                if got != total:
                    raise SystemExit(f"{label}: {got} of {total} bytes arrived")
                detail[label].append({"seconds": t.seconds, "cpu_s": t.cpu})
                bl.log(f"run {run_no + 1} {label:14s} {t.seconds:6.2f} s  {files / t.seconds:6.0f} files/s")
        bl.fresh_dir(out)
    med = {k: bl.median([r["seconds"] for r in v]) for k, v in detail.items()}
    base_label = "tar c | tar x"
    base = med[base_label]
    return {"dataset": {"name": name, "files": files, "bytes": total}, "sites": 2, "runs": runs,
            "median": {k: {"seconds": v, "files_per_s": files / v, "mb_s": total / v / 1e6} for k, v in med.items()},
            "ratios": {k: base / v for k, v in med.items() if k.startswith("bt-get")},
            "worst": {k: min(detail[base_label][i]["seconds"] / r["seconds"] for i, r in enumerate(v))
                      for k, v in detail.items() if k.startswith("bt-get")},
            "runs_detail": detail, "target": TARGET}


def main() -> int:
    ap = bl.parser(__doc__)
    ap.add_argument("--files", type=int, default=None, help="number of files (default 20000, --quick 5000)")
    args = ap.parse_args()
    files = args.files or (5000 if args.quick else 20000)
    with bl.workdir("smallfiles", args.keep) as work:
        doc = run(work, files, args.runs or 3)
    bl.write_json(args.out, "smallfiles", doc)
    print(f"smallfiles: {files} files, {doc['dataset']['bytes'] / 1e6:.0f} MB, median of {doc['runs']}")
    print(bl.table(["contender", "seconds", "files/s", "MB/s", "x tar"],
                   [[k, v["seconds"], v["files_per_s"], v["mb_s"], doc["median"]["tar c | tar x"]["seconds"]
                     / v["seconds"]] for k, v in doc["median"].items()]))
    print(bl.runs_table(doc["runs_detail"], "tar c | tar x", files))
    print(f"target: bt-get >= {TARGET}x tar on every run (best median {max(doc['ratios'].values()):.2f}, "
          f"worst run {max(doc['worst'].values()):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
