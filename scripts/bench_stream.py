"""Benchmark stream: reading ROOT files straight from the swarm (bt-get --serve) vs downloading them first.

    .venv/bin/python scripts/bench_stream.py [--out DIR] [--quick] [--keep] [--runs 3]

Data: FILES ROOT files written by uproot (uncompressed, so the branch share
is exact), one TTree `events` of BRANCHES float64 branches each, about 1 GB
in all (--quick: 64 MB), published by a real federation of two sites on
loopback (`btswarm up --data`); the sites' seeds are started before the
runs ("seeds running"). Three measurements, each a median of the runs, each
run with an empty output directory and a server of its own:

1. First event: from uproot.open(URL) to the first entry of one branch in
   hand, through `bt-get NAME --serve --no-prefetch` (uproot's HTTP source),
   vs `bt-get NAME` of the whole dataset and then the same read from disk.
2. One branch of every file (1 of BRANCHES): bytes the server fetched from
   peers (libtorrent's payload counter less what arrived twice), vs the bytes
   uproot asked for rounded out to whole pieces, and vs the dataset.
3. A full sequential read: curl GETs every file, one after the other, through
   a server just started (default: prefetch on; and --no-prefetch), vs
   `bt-get NAME` of the whole dataset (rate = bytes / its --json `seconds`,
   which counts from after the repository lookup; the server's = bytes / the
   time from its listening, also after the lookup, to curl's last byte).

Targets: first event <= 1 s; one branch fetches <= 1.5x the piece-rounded
request and <= 10% of the dataset (the branch is 5% of it); full read
through --serve >= 0.8x bt-get's rate.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import numpy as np

import benchlib as bl

NAME = "user.bench.stream"
TREE = "events"
BRANCHES = 20  # one branch = 5% of the dataset
# A reader of one branch fetches the pieces its baskets touch: on average
# (basket + piece) / basket times the branch. ROOT's default auto-flush (30 MB
# clusters) gives baskets of ~1.5 MB for 20 branches; the pieces of a 1 GB
# dataset are 1 MiB (256 KiB at --quick).
BASKET = 3 * 2**19
TARGETS = {"first_event_s": 1.0, "fetched_over_rounded": 1.5, "fetched_over_dataset": 0.10,
           "serve_over_bt_get_rate": 0.8}


def make_data(root: Path, files: int, file_size: int) -> Path:
    """FILES ROOT files of BRANCHES float64 branches, baskets of BASKET bytes (one per branch per extend)."""
    import uproot

    data = root / "data"
    ds = data / NAME
    ds.mkdir(parents=True, exist_ok=True)
    entries = file_size // (8 * BRANCHES)
    chunk = BASKET // 8  # entries per basket
    rng = np.random.default_rng(17)
    for i in range(files):
        path = ds / f"stream._{i + 1:05d}.root"
        with uproot.recreate(path, compression=None) as f:
            f.mktree(TREE, {f"b{j}": np.float64 for j in range(BRANCHES)})
            for start in range(0, entries, chunk):
                n = min(chunk, entries - start)
                f[TREE].extend({f"b{j}": rng.random(n) for j in range(BRANCHES)})
    return data


class Server:
    """`bt-get NAME --serve 127.0.0.1:0 --json`: started, its URL read, stopped by PID."""

    def __init__(self, procs: bl.Procs, fed: bl.Federation, out: Path, ip: str, log: Path, *extra: str):
        self.proc = procs.start([str(bl.BIN / "bt-get"), NAME, "--repo", fed.repo, "-o", str(out), "--listen", ip,
                                 "--serve", "127.0.0.1:0", "--json", *extra], log, stdout=subprocess.PIPE)
        line: list[bytes] = []
        t = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()), daemon=True)
        t.start()
        t.join(60)
        if not line or not line[0]:
            raise SystemExit(f"bench: bt-get --serve did not start; see {log}")
        self.url = json.loads(line[0])["url"]
        self.base = self.url.rstrip("/").rsplit("/", 1)[0]

    def status(self) -> dict:
        return bl.get_json(self.base + "/")

    def stop(self) -> None:
        bl.Procs.stop(self.proc, 20)
        self.proc.stdout.close()


def wait_seeds(server: Server) -> None:
    bl.wait_for(lambda: server.status()["swarm"]["seeds"] >= 1, 30, "the server to be connected to a seed",
                interval=0.05)


def first_event_stream(procs: bl.Procs, fed: bl.Federation, work: Path, lfn: str, k: int) -> dict:
    import uproot

    out = bl.fresh_dir(work / "serve-out")
    srv = Server(procs, fed, out, bl.client_ip(k), work / "serve.log", "--no-prefetch")
    try:
        wait_seeds(srv)
        t = time.monotonic()
        with uproot.open(srv.url + lfn, handler=uproot.source.http.HTTPSource) as f:
            first = f[TREE]["b0"].array(entry_stop=1, library="np")
        seconds = time.monotonic() - t
        assert len(first) == 1
        return {"first_event_s": seconds, "fetched": _unique(srv.status())}
    finally:
        srv.stop()


def first_event_download(fed: bl.Federation, work: Path, lfn: str, k: int) -> dict:
    import uproot

    out = bl.fresh_dir(work / "get-out")
    t = time.monotonic()
    run = bl.timed(bl.bt_get_cmd(fed, NAME, out, bl.client_ip(k)), 1800)
    with uproot.open(out / NAME / lfn) as f:
        first = f[TREE]["b0"].array(entry_stop=1, library="np")
    seconds = time.monotonic() - t
    assert len(first) == 1
    doc = json.loads(run.stdout)
    return {"first_event_s": seconds, "fetched": doc["bytes_downloaded"] - doc.get("bytes_redundant", 0),
            "rate": doc["bytes_total"] / doc["seconds"], "seconds": doc["seconds"]}


def one_branch(procs: bl.Procs, fed: bl.Federation, work: Path, lfns: list[str], k: int, piece_length: int,
               sizes: dict[str, int]) -> dict:
    import uproot

    out = bl.fresh_dir(work / "serve-out")
    srv = Server(procs, fed, out, bl.client_ip(k), work / "serve.log", "--no-prefetch")
    try:
        wait_seeds(srv)
        t = time.monotonic()
        entries = 0
        for lfn in lfns:
            with uproot.open(srv.url + lfn, handler=uproot.source.http.HTTPSource) as f:
                entries += len(f[TREE]["b0"].array(library="np"))
        seconds = time.monotonic() - t
        st = srv.status()
        return {"seconds": seconds, "entries": entries, "fetched": _unique(st),
                "asked": sum(e - s for _, s, e in st["ranges"]),
                "asked_rounded": _rounded(st["ranges"], lfns, sizes, piece_length)}
    finally:
        srv.stop()


def full_read(procs: bl.Procs, fed: bl.Federation, work: Path, lfns: list[str], k: int, *extra: str) -> dict:
    out = bl.fresh_dir(work / "serve-out")
    # Timed from the moment the server listens, as bt-get's `seconds` count from its start:
    # with prefetch the server fetches from then on, as bt-get would.
    t = time.monotonic()
    srv = Server(procs, fed, out, bl.client_ip(k), work / "serve.log", *extra)
    listening = time.monotonic()
    try:
        args = ["curl", "-sf"]
        for lfn in lfns:
            args += ["-o", "/dev/null", srv.url + lfn]
        run = bl.timed(args, 1800)
        return {"seconds": time.monotonic() - listening, "start_s": listening - t, "curl_s": run.seconds,
                "fetched": _unique(srv.status())}
    finally:
        srv.stop()


def _unique(status: dict) -> int:
    return status["swarm"]["downloaded"] - status["swarm"]["redundant"]


def _rounded(ranges: list, lfns: list[str], sizes: dict[str, int], piece_length: int) -> int:
    """Bytes of the pieces the asked ranges touch (the files laid end to end in LFN order, as built)."""
    offsets, at = {}, 0
    for lfn in sorted(sizes):
        offsets[lfn] = at
        at += sizes[lfn]
    pieces = set()
    for lfn, s, e in ranges:
        base = offsets[lfn]
        pieces.update(range((base + s) // piece_length, (base + e - 1) // piece_length + 1))
    return len(pieces) * piece_length


def main() -> int:
    ap = bl.parser(__doc__)
    args = ap.parse_args()
    runs = args.runs or 3
    files, file_size = (4, 16 * 2**20) if args.quick else (8, 128 * 2**20)
    if shutil.which("curl") is None:
        raise SystemExit("bench: curl is needed for the full sequential read")
    with bl.workdir("stream", args.keep) as work, bl.Procs() as procs:
        t = time.monotonic()
        data = make_data(work, files, file_size)
        sizes = {p.name: p.stat().st_size for p in (data / NAME).iterdir()}
        total = sum(sizes.values())
        bl.log(f"data: {files} ROOT files, {total / 2**20:.0f} MiB, {BRANCHES} branches, in "
               f"{time.monotonic() - t:.1f} s")
        lfns = sorted(sizes)
        with bl.federation(work / "fed", data, sites=2) as fed:
            info_hash = fed.info_hash(NAME)
            piece_length = _piece_length(fed)
            bl.start_seeds(fed, info_hash)
            rows: dict[str, list[dict]] = {"stream_first": [], "download_first": [], "branch": [],
                                           "full_serve": [], "full_serve_noprefetch": []}
            for r in range(runs):
                rows["stream_first"].append(first_event_stream(procs, fed, work, lfns[0], 0))
                rows["download_first"].append(first_event_download(fed, work, lfns[0], 1))
                rows["branch"].append(one_branch(procs, fed, work, lfns, 2, piece_length, sizes))
                rows["full_serve"].append(full_read(procs, fed, work, lfns, 3))
                rows["full_serve_noprefetch"].append(full_read(procs, fed, work, lfns, 4, "--no-prefetch"))
                bl.log(f"run {r + 1}: first event {rows['stream_first'][-1]['first_event_s']:.3f} s streamed, "
                       f"{rows['download_first'][-1]['first_event_s']:.2f} s downloaded first; branch fetched "
                       f"{rows['branch'][-1]['fetched'] / 2**20:.1f} MiB; full read "
                       f"{rows['full_serve'][-1]['seconds']:.2f} s served, "
                       f"{rows['download_first'][-1]['seconds']:.2f} s bt-get")

    med = lambda key, field: bl.median([r[field] for r in rows[key]])  # noqa: E731
    branch_fetched, branch_rounded = med("branch", "fetched"), med("branch", "asked_rounded")
    bt_get_rate = total / med("download_first", "seconds")
    serve_rate = total / med("full_serve", "seconds")
    serve_np_rate = total / med("full_serve_noprefetch", "seconds")
    figures = {
        "dataset_bytes": total, "files": files, "branches": BRANCHES, "piece_length": piece_length, "runs": runs,
        "first_event_s": med("stream_first", "first_event_s"),
        "first_event_fetched": med("stream_first", "fetched"),
        "first_event_after_download_s": med("download_first", "first_event_s"),
        "branch_seconds": med("branch", "seconds"),
        "branch_asked": med("branch", "asked"), "branch_asked_rounded": branch_rounded,
        "branch_fetched": branch_fetched,
        "fetched_over_rounded": branch_fetched / branch_rounded,
        "fetched_over_dataset": branch_fetched / total,
        "bt_get_rate": bt_get_rate, "serve_rate": serve_rate, "serve_noprefetch_rate": serve_np_rate,
        "serve_over_bt_get_rate": serve_rate / bt_get_rate,
        "serve_noprefetch_over_bt_get_rate": serve_np_rate / bt_get_rate,
    }
    bl.write_json(args.out, "stream", {"figures": figures, "targets": TARGETS, "runs": rows})
    mib = 2**20
    print(bl.table(["measure", "--serve", "download first", "ratio", "target"], [
        ["first event s", figures["first_event_s"], figures["first_event_after_download_s"],
         figures["first_event_s"] / figures["first_event_after_download_s"], "<= 1 s"],
        ["one branch: MiB fetched", branch_fetched / mib, total / mib, figures["fetched_over_dataset"], "<= 0.10"],
        ["one branch: / asked, piece-rounded", branch_fetched / mib, branch_rounded / mib,
         figures["fetched_over_rounded"], "<= 1.5"],
        ["full read MiB/s (prefetch)", serve_rate / mib, bt_get_rate / mib, figures["serve_over_bt_get_rate"],
         ">= 0.8"],
        ["full read MiB/s (--no-prefetch)", serve_np_rate / mib, bt_get_rate / mib,
         figures["serve_noprefetch_over_bt_get_rate"], ""],
    ]))
    return 0


def _piece_length(fed: bl.Federation) -> int:
    from torrents import metainfo

    return metainfo.parse(fed.torrent(NAME)).piece_length


if __name__ == "__main__":
    raise SystemExit(main())
