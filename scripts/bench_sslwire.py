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

On shaped links with a round trip (root):

    sudo .venv/bin/python scripts/bench_sslwire.py --hosts [--rtt 100ms] [--rate 200mbit] [--size 256M] [--runs 3]

the whole federation as deployed, `btswarm up --hosts --restricted`: the tracker and the repository (https)
on one host, one site on its own, one T3 host, each uplink at --rate with half of --rtt on it (the site
and the T3 --rtt apart). The site holds the same bytes under two names, `public:NAME` and `members:NAME`
(`--restrict members`); each run fetches each once with bt-get on the T3 host, alternating which goes first,
as a member would (`btswarm token` first, the members' configuration, web seeds off: the peer wire only).
Figures (medians): bt-get's wall time, its time to first byte and its transfer (first byte to exit), and
CPU seconds per GB of the site's bt-server and of the T3's bt-get with its workers.
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


def hosts_fetch(fed: bl.Federation, name: str, out: Path, env: dict[str, str]) -> dict:
    """bt-get NAME on the T3 host, as a member runs it: wall time, time to first byte, transfer, and CPU-s/GB
    of the site's bt-server and of bt-get's process tree (waited for: its workers are in RUSAGE_CHILDREN)."""
    import json
    import resource
    import subprocess

    from btswarm import netns, run

    host = fed.host("t3-1")
    site = fed.site_pids()["site1"]
    argv = [str(bl.BIN / "bt-get"), name, "--config", str(fed.ready.members.config), "-o", str(bl.fresh_dir(out)),
            "--json", "--no-web-seeds", "--timeout", "900"]
    site_cpu, t3_cpu = bl.cpu_seconds(site), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0, launched = time.monotonic(), time.time()
    done = subprocess.run(argv, env=run.host_env(fed.ready, host, {**os.environ, **env}), capture_output=True,
                          text=True, timeout=960, preexec_fn=netns.preexec(host.netns))
    wall, ended = time.monotonic() - t0, time.time()
    if done.returncode != 0:
        raise SystemExit(f"bt-get {name} on t3-1 exited {done.returncode}: {done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    doc = json.loads(done.stdout)
    gb = doc["bytes_downloaded"] / 1e9
    return {"seconds": wall, "first_byte_s": doc["first_byte_at"] - launched, "transfer_s": ended - doc["first_byte_at"],
            "site_cpu_s_per_gb": (bl.cpu_seconds(site) - site_cpu) / gb,
            "t3_cpu_s_per_gb": (after.ru_utime + after.ru_stime - t3_cpu.ru_utime - t3_cpu.ru_stime) / gb,
            "bytes": doc["bytes_downloaded"], "sources": doc["sources"],
            "timeline": {step: round(at - launched, 3) for step, at in doc.get("timeline", {}).items()}}


def hosts_main(args, runs: int) -> int:
    """--hosts: plain and restricted on the hosts bed, --rtt apart (module docstring)."""
    import subprocess

    from torrents import sample
    from torrents.units import parse_duration, parse_size

    bl.require_shaping("bench_sslwire --hosts")
    size = parse_size(args.size or ("64M" if args.quick else "256M"))
    half = f"{parse_duration(args.rtt) * 1000 / 2:g}ms"
    names = {"plain": "public:sslwire.bench", "restricted": "members:sslwire.bench"}
    with bl.workdir("sslwire-hosts", args.keep) as work:
        data = work / "data"
        first = sample.generate(data, name=names["plain"], files=8, total_size=size)
        (data / names["restricted"]).mkdir(exist_ok=True)
        for f in first.iterdir():  # the same bytes under the restricted name
            if not (data / names["restricted"] / f.name).exists():
                os.link(f, data / names["restricted"] / f.name)
        env = {"XDG_RUNTIME_DIR": str(bl.fresh_dir(work / "run")), "XDG_STATE_HOME": str(work / "xdg-state")}
        with bl.federation(work / "fed", data, sites=1, args=[
                "--hosts", "--t3-hosts", "1", "--restricted", "--restrict", "members",
                "--site-link", f"{args.rate}/{half}", "--client-link", f"{args.rate}/{half}"]) as fed:
            subprocess.run([str(bl.BIN / "btswarm"), "token", "--state", str(fed.state)], check=True,
                           env={**os.environ, **env}, timeout=60)
            results: dict[str, list[dict]] = {"plain": [], "restricted": []}
            for k in range(runs):
                order = ("plain", "restricted") if k % 2 == 0 else ("restricted", "plain")
                for mode in order:
                    r = hosts_fetch(fed, names[mode], work / "t3", env)
                    bl.log(f"run {k + 1} {mode}: {r['seconds']:.2f} s (first byte {r['first_byte_s']:.2f} s, "
                           f"transfer {r['transfer_s']:.2f} s), site {r['site_cpu_s_per_gb']:.2f} CPU-s/GB, "
                           f"T3 {r['t3_cpu_s_per_gb']:.2f} CPU-s/GB, from {r['sources']}, start {r['timeline']}")
                    results[mode].append(r)
    keys = ("seconds", "first_byte_s", "transfer_s", "site_cpu_s_per_gb", "t3_cpu_s_per_gb")
    med = {mode: {key: bl.median([r[key] for r in rs]) for key in keys} for mode, rs in results.items()}
    ratio = {key: med["restricted"][key] / med["plain"][key] for key in keys}
    print(bl.table(["", "wall s", "first byte s", "transfer s", "site CPU-s/GB", "T3 CPU-s/GB"],
                   [[mode, *(f"{m[k]:.2f}" for k in keys)] for mode, m in med.items()]
                   + [["restricted/plain", *(f"{ratio[k]:.2f}x" for k in keys)]]))
    bl.write_json(args.out, "sslwire-hosts", {"size": size, "rtt": args.rtt, "rate": args.rate,
                                              "runs": results, "medians": med, "ratios": ratio})
    return 0


def main() -> int:
    ap = bl.parser(__doc__)
    ap.add_argument("--size", default=None, help="dataset size (default 1G, --hosts 256M; --quick 256M, 64M)")
    ap.add_argument("--hosts", action="store_true", help="on the hosts test bed with shaped links (root)")
    ap.add_argument("--rtt", default="100ms", help="--hosts: the site's and the T3's round trip")
    ap.add_argument("--rate", default="200mbit", help="--hosts: every uplink's rate")
    args = ap.parse_args()
    runs = args.runs or 3
    if args.hosts:
        return hosts_main(args, runs)
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
