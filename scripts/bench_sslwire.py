"""Benchmark sslwire: the same fetch public and restricted (an SSL torrent of the peer CA), what TLS costs.

    .venv/bin/python scripts/bench_sslwire.py [--out DIR] [--quick] [--keep] [--runs 3] [--size 1G]

One seed and one T3, each a libtorrent session (torrents.servicekit.ltsession's settings) in a process of
its own on its own 127.0.0.x, the seed in seed mode (each piece SHA1-checked as it is first sent, as a
site's seed is). Each run fetches the whole dataset (torrents.sample, --size) into a fresh directory; the
two contenders alternate within a run (plain first on odd runs, restricted first on even ones). Figures
(medians): wall time from the T3's connect to its completion, and CPU seconds per GB of the seed process
and of the T3 process (every thread: libtorrent's network, disk and hashing threads). The restricted
contender is TLS 1.3 (AES-GCM) on the sites' SSL socket with EC P-256 certificates (torrents.peerca).
No link shaping: the fetch is CPU-bound on loopback, which is where encryption's cost shows.
"""

from __future__ import annotations

import datetime as dt
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

import benchlib as bl

SEED_IP, T3_IP = "127.0.0.61", "127.0.0.62"


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def seed_proc(conn, torrent: bytes, save: str, pki: dict | None) -> None:
    import libtorrent as lt

    from torrents.servicekit import ltsession

    ses = lt.session(ltsession.settings(SEED_IP, 0, seeding=True, ssl_port=0 if pki else None))
    atp = ltsession.torrent_params(ltsession.torrent_info(torrent), save, {})
    atp.flags |= lt.torrent_flags.seed_mode
    certs = ltsession.PeerCerts(pki["ca"], lambda: (pki["seed_cert"], pki["seed_key"])) if pki else None
    if certs:
        certs.add(atp)
    ses.add_torrent(atp)
    while not (ses.listen_port() and (not pki or ses.ssl_listen_port())):
        ses.wait_for_alert(50)
        for a in ses.pop_alerts():
            if certs and isinstance(a, lt.torrent_need_cert_alert):
                certs.on_need_cert(a)
    start = _cpu()
    conn.send(ses.ssl_listen_port() if pki else ses.listen_port())
    while not conn.poll():
        ses.wait_for_alert(100)
        for a in ses.pop_alerts():
            if certs and isinstance(a, lt.torrent_need_cert_alert):
                certs.on_need_cert(a)
    conn.recv()
    conn.send(_cpu() - start)


def t3_proc(conn, torrent: bytes, save: str, pki: dict | None, port: int) -> None:
    import libtorrent as lt

    from torrents.servicekit import ltsession

    ses = lt.session(ltsession.settings(T3_IP, 0, ssl_port=0 if pki else None))
    atp = ltsession.torrent_params(ltsession.torrent_info(torrent), save, {})
    certs = ltsession.PeerCerts(pki["ca"], lambda: (pki["t3_cert"], pki["t3_key"])) if pki else None
    if certs:
        certs.add(atp)
    h = ses.add_torrent(atp)
    start_cpu, t0 = _cpu(), time.monotonic()
    h.connect_peer((SEED_IP, port))
    deadline = t0 + 600
    while not h.status().is_seeding:
        if time.monotonic() > deadline:
            conn.send(None)
            return
        ses.wait_for_alert(50)
        for a in ses.pop_alerts():
            if certs and isinstance(a, lt.torrent_need_cert_alert):
                certs.on_need_cert(a)
    conn.send((time.monotonic() - t0, _cpu() - start_cpu, h.status().total_payload_download))


def one_fetch(torrent: bytes, data: Path, out: Path, pki: dict | None) -> dict:
    ctx = mp.get_context("spawn")
    seed_end, seed_here = ctx.Pipe()
    seed = ctx.Process(target=seed_proc, args=(seed_end, torrent, str(data), pki))
    seed.start()
    try:
        if not seed_here.poll(60):
            raise SystemExit("seed did not start listening in 60 s")
        port = seed_here.recv()
        t3_end, t3_here = ctx.Pipe()
        t3 = ctx.Process(target=t3_proc, args=(t3_end, torrent, str(bl.fresh_dir(out)), pki, port))
        t3.start()
        if not t3_here.poll(660):
            raise SystemExit("T3 gave no answer in 660 s")
        result = t3_here.recv()
        t3.join(30)
        if result is None:
            raise SystemExit("T3 did not complete in 600 s")
        seed_here.send("stop")
        seed_cpu = seed_here.recv() if seed_here.poll(30) else float("nan")
    finally:
        seed.join(10)
        if seed.is_alive():
            seed.kill()
    seconds, t3_cpu, got = result
    gb = got / 1e9
    return {"seconds": seconds, "t3_cpu_s_per_gb": t3_cpu / gb, "seed_cpu_s_per_gb": seed_cpu / gb, "bytes": got}


def main() -> int:
    ap = bl.parser(__doc__)
    ap.add_argument("--size", default=None, help="dataset size (default 1G; --quick 256M)")
    args = ap.parse_args()
    runs = args.runs or 3
    from torrents import peerca, sample
    from torrents.build import build_torrent
    from torrents.units import parse_size

    size = parse_size(args.size or ("256M" if args.quick else "1G"))
    with bl.workdir("sslwire", args.keep) as work:
        data = work / "data"
        sample.generate(data, files=8, total_size=size)
        name = sorted(p.name for p in data.iterdir() if p.is_dir())[0]
        entries = [(str(p.relative_to(data / name)), p) for p in sorted((data / name).rglob("*")) if p.is_file()]
        torrent, _ = build_torrent(name, entries)
        now = dt.datetime.now(dt.timezone.utc)
        ca_key, ca = peerca.new_ca("bench peer CA", now)
        pki = {"ca": ca}
        for who, names in (("seed", ["*"]), ("t3", [name])):
            key = peerca.new_key()
            pki[f"{who}_key"], pki[f"{who}_cert"] = key, peerca.issue_for_key(ca_key, ca, key, names, now).cert
        results: dict[str, list[dict]] = {"plain": [], "restricted": []}
        for k in range(runs):
            order = ("plain", "restricted") if k % 2 == 0 else ("restricted", "plain")
            for mode in order:
                r = one_fetch(torrent, data, work / "t3", pki if mode == "restricted" else None)
                bl.log(f"run {k + 1} {mode}: {r['seconds']:.2f} s, T3 {r['t3_cpu_s_per_gb']:.2f} CPU-s/GB, "
                       f"seed {r['seed_cpu_s_per_gb']:.2f} CPU-s/GB")
                results[mode].append(r)
    med = {mode: {key: bl.median([r[key] for r in rs]) for key in ("seconds", "t3_cpu_s_per_gb", "seed_cpu_s_per_gb")}
           for mode, rs in results.items()}
    ratio = {key: med["restricted"][key] / med["plain"][key] for key in med["plain"]}
    print(bl.table(["", "wall s", "T3 CPU-s/GB", "seed CPU-s/GB"],
                   [[mode, f"{m['seconds']:.2f}", f"{m['t3_cpu_s_per_gb']:.2f}", f"{m['seed_cpu_s_per_gb']:.2f}"]
                    for mode, m in med.items()]
                   + [["restricted/plain", f"{ratio['seconds']:.2f}x", f"{ratio['t3_cpu_s_per_gb']:.2f}x",
                       f"{ratio['seed_cpu_s_per_gb']:.2f}x"]]))
    path = bl.write_json(args.out, "sslwire", {"size": size, "runs": results, "medians": med, "ratios": ratio})
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
