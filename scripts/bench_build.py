#!/usr/bin/env python3
"""Benchmark the torrent builder against mktorrent, libtorrent, sha1sum and the machine's SHA1 limit.

Two generated datasets under /tmp, page cache warm (each read once first):
a large one (default ~4 GiB in 29 files, torrents.sample.generate) and a
small-file one (default 20,000 files of 1-50 KB). Every tool builds or
hashes each set `--runs` times, the tools taking turns so that noise from
other work on the machine spreads over all of them; the median of each is
reported, with ratios between medians of this one run.

    .venv/bin/python scripts/bench_build.py --large-size 2G --runs 3

Prints a table and writes bench-results/build.json. Data is deleted after
unless --keep.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from torrents import build, metainfo, sample
from torrents.units import parse_size

ANNOUNCE = "http://127.0.0.1:1/announce"
Entries = list[tuple[str, Path]]


def generate_small(dest: Path, count: int, low: int, high: int, seed: int = 20000) -> Path:
    """`count` files of `low`..`high` bytes (deterministic); existing files of the right size are kept."""
    rng = random.Random(seed)
    root = dest / f"small.{count}"
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        size = rng.randint(low, high)
        path = root / f"NTUP.{seed}._{i:06d}.root.1"
        if path.is_file() and path.stat().st_size == size:
            continue
        path.write_bytes(random.Random(seed * 7919 + i).randbytes(size))
    return root


def entries_of(root: Path) -> Entries:
    return sorted((p.relative_to(root).as_posix(), p) for p in root.rglob("*") if p.is_file())


def warm(entries: Entries) -> None:
    """Read every byte once so that every tool then reads from the page cache."""
    buf = bytearray(1 << 20)
    for _, path in entries:
        with open(path, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass


def run_ours(root: Path, entries: Entries, piece_length: int, threads: int) -> str:
    _, meta = build.build_torrent(root.name, entries, announce=ANNOUNCE, piece_length=piece_length,
                                  threads=threads)
    return meta.info_hash


def run_mktorrent(root: Path, piece_length: int, threads: int, scratch: Path) -> bytes:
    out = scratch / f"mk.{time.monotonic_ns()}.torrent"  # mktorrent refuses to overwrite
    exponent = piece_length.bit_length() - 1
    subprocess.run(["mktorrent", "-t", str(threads), "-l", str(exponent), "-p", "-a", ANNOUNCE,
                    "-o", str(out), str(root)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    data = out.read_bytes()
    out.unlink()
    return data  # parsed by measure(), outside the timing


def run_libtorrent(root: Path, entries: Entries, piece_length: int) -> str:
    import libtorrent as lt

    files = [lt.create_file_entry(f"{root.name}/{lfn}", path.stat().st_size) for lfn, path in entries]
    ct = lt.create_torrent(files, piece_length, lt.create_torrent.v1_only)
    ct.set_priv(True)
    lt.set_piece_hashes(ct, str(root.parent))
    return str(lt.torrent_info(ct.generate()).info_hashes().v1)


def run_sha1sum(entries: Entries, scratch: Path) -> str:
    """One sha1sum process (via xargs: 20,000 names do not fit on one command line)."""
    listing = scratch / "files.list"
    listing.write_bytes(b"\0".join(os.fsencode(p) for _, p in entries))
    with open(listing, "rb") as names:
        subprocess.run(["xargs", "-0", "sha1sum"], stdin=names, check=True, stdout=subprocess.DEVNULL)
    return ""


def memory_limit(total: int, piece_length: int, threads: int) -> Callable[[], str]:
    """A tool hashing `total` bytes already in memory, in pieces, on `threads` threads: no reading at all."""
    block = memoryview(random.Random(1).randbytes(max(piece_length, 64 << 20)))  # made once, outside the timing
    per_thread = total // threads

    def work() -> None:
        left, off = per_thread, 0
        while left > 0:
            n = min(piece_length, left, len(block) - off)
            hashlib.sha1(block[off:off + n]).digest()
            left -= n
            off = (off + n) % len(block)

    def run() -> str:
        workers = [threading.Thread(target=work) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return ""

    return run


def cpu_seconds() -> float:
    """User + system CPU time of this process (all threads) and its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def measure(tools: dict[str, Callable[[], str | bytes]], runs: int) -> tuple[dict, dict, dict[str, str]]:
    """Run each tool `runs` times, taking turns; return wall and CPU seconds per tool and the hash each gave.

    A tool returns its info-hash, or the .torrent it wrote (parsed here,
    untimed: metainfo.parse takes 0.3 s on 20,000 files), or "" if it
    makes no torrent.

    CPU seconds say what a tool costs even when other work on the machine
    stretches its wall time.
    """
    wall: dict[str, list[float]] = {name: [] for name in tools}
    cpu: dict[str, list[float]] = {name: [] for name in tools}
    hashes: dict[str, str] = {}
    for _ in range(runs):
        for name, tool in tools.items():
            start, start_cpu = time.perf_counter(), cpu_seconds()
            result = tool()
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(cpu_seconds() - start_cpu)
            if result:
                hashes[name] = result if isinstance(result, str) else metainfo.parse(result).info_hash
    return wall, cpu, hashes


def bench_set(label: str, root: Path, runs: int, threads: int, scratch: Path) -> dict:
    entries = entries_of(root)
    total = sum(p.stat().st_size for _, p in entries)
    plen = metainfo.piece_length_for(total)
    warm(entries)
    tools: dict[str, Callable[[], str | bytes]] = {
        "btswarm": lambda: run_ours(root, entries, plen, threads),
        f"mktorrent -t {threads}": lambda: run_mktorrent(root, plen, threads, scratch),
        "libtorrent v1": lambda: run_libtorrent(root, entries, plen),
        "sha1sum": lambda: run_sha1sum(entries, scratch),
        f"memory limit ({threads} threads)": memory_limit(total, plen, threads),
    }
    seconds, cpu, hashes = measure(tools, runs)
    if len(set(hashes.values())) != 1:
        raise SystemExit(f"bench_build: {label}: the builders disagree on the info-hash: {hashes}")
    mb_s = {name: total / statistics.median(s) / 1e6 for name, s in seconds.items()}
    # The best run is the one least disturbed by other work on a shared machine.
    best_mb_s = {name: total / min(s) / 1e6 for name, s in seconds.items()}
    ours = mb_s["btswarm"]
    return {
        "set": label, "files": len(entries), "bytes": total, "piece_length": plen, "runs": runs,
        "info_hash": hashes["btswarm"],
        "seconds": seconds,
        "cpu_seconds": cpu,
        "median_cpu_s_per_gb": {name: statistics.median(c) / (total / 1e9) for name, c in cpu.items()},
        "median_mb_s": mb_s,
        "best_mb_s": best_mb_s,
        "ratio_btswarm_to": {name: ours / rate for name, rate in mb_s.items() if name != "btswarm"}
        | {f"sha1sum x {threads}": ours / (mb_s["sha1sum"] * threads)},
        "best_ratio_btswarm_to": {name: best_mb_s["btswarm"] / rate for name, rate in best_mb_s.items()
                                  if name != "btswarm"},
    }


def report(result: dict) -> str:
    lines = [f"{result['set']}: {result['files']} files, {result['bytes'] / 1e9:.2f} GB, "
             f"piece {result['piece_length'] // 1024} KiB, median of {result['runs']}"]
    lines.append(f"  {'':28s} {'median':>8s} {'best':>8s}")
    for name, rate in result["median_mb_s"].items():
        runs = " ".join(f"{s:.2f}" for s in result["seconds"][name])
        cpu = result["median_cpu_s_per_gb"][name]
        lines.append(f"  {name:28s} {rate:8.0f} {result['best_mb_s'][name]:8.0f} MB/s {cpu:6.2f} CPU-s/GB"
                     f"   ({runs} s)")
    for name, ratio in result["ratio_btswarm_to"].items():
        best = result["best_ratio_btswarm_to"].get(name)
        lines.append(f"  btswarm / {name:26s} {ratio:5.2f}x" + (f" {best:5.2f}x" if best else ""))
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--large-size", default="4G", help="total size of the large set (default 4G)")
    p.add_argument("--large-files", type=int, default=29, help="files in the large set (default 29)")
    p.add_argument("--small-files", type=int, default=20000, help="files in the small set (default 20000; 0 skips)")
    p.add_argument("--small-min", default="1K", help="smallest small file (default 1K)")
    p.add_argument("--small-max", default="50K", help="largest small file (default 50K)")
    p.add_argument("--runs", type=int, default=3, help="runs of each tool per set; the median is reported")
    p.add_argument("--threads", type=int, default=0, help="threads for btswarm, mktorrent, the limit (0: cores)")
    p.add_argument("--dir", type=Path, default=None, help="where to generate data (default: a new dir in /tmp)")
    p.add_argument("--keep", action="store_true", help="keep the generated data")
    p.add_argument("--out", type=Path, default=Path("bench-results/build.json"), help="JSON results")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    threads = args.threads or build.default_threads()
    work = args.dir or Path(tempfile.mkdtemp(prefix="btswarm-bench-build-", dir="/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="scratch-", dir=work))
    made = [scratch]  # only what this run made is deleted: --dir may hold other things
    results = []
    try:
        print(f"generating data in {work} ...", file=sys.stderr)
        large = sample.generate(work, files=args.large_files, total_size=parse_size(args.large_size))
        made.append(large)
        results.append(bench_set("large", large, args.runs, threads, scratch))
        print(report(results[-1]), flush=True)
        if args.small_files:
            small = generate_small(work, args.small_files, parse_size(args.small_min), parse_size(args.small_max))
            made.append(small)
            results.append(bench_set("small", small, args.runs, threads, scratch))
            print(report(results[-1]), flush=True)
    finally:
        for path in made if not args.keep else [scratch]:
            shutil.rmtree(path, ignore_errors=True)
        if not args.keep and args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    doc = {"command": " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
           "host": {"cpus": os.cpu_count(), "threads": threads, "python": platform.python_version(),
                    "machine": platform.machine()},
           "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "results": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
