"""What the wan scenarios (scripts/bench_wan_*.py) share: the links, the contenders' commands, the driver.

Every site's uplink is R (--rate), every client's C (--client-rate), the
nginx baseline's R (`btswarm up --site-link R --client-link C`, see
btswarm/shaping.py); downlinks are free. --rtt adds a round trip to each
site's link and the baseline's (`--site-link R/RTT`): a T3 and a site are
RTT apart, two sites 2 RTT, T3s among themselves 0 unless --client-rtt
gives the clients' links a delay too (`--client-link C/CRTT`: two T3s 2 CRTT
apart, a T3 and a site RTT + CRTT). A scenario runs once for each RTT given
(0, 40 and 100 ms unless told); where it has figures to compare, a last
table sets each beside its value at the smallest RTT (the target: within 15%
at 100 ms). --link-mtu 9000 gives the shaped loopback jumbo frames instead of
its 64 KiB packets (`btswarm up --link-mtu`). S is the dataset (29 files like
torrents.sample, 200 MB; --quick 100 MB).

`main(Scenario(...))` is each scenario file's whole `main`: the shared flags
and the scenario's own, a work directory per RTT, a failure recorded in the
results instead of a traceback, OUT/wan_NAME.json (the first RTT's document
at the top level, every one under `by_rtt`), and the report. Wall time of
each command, process start included; medians of the runs.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator

import benchlib as bl
from wanmeters import site_ip

from btswarm import federation as fedlib, shaping
from btswarm.testbed import frozenfs
from torrents import auth, sample, urls
from torrents.units import parse_size

SEED_TIME = "30m"  # swarm clients seed until all are done, then are stopped by PID
CLIENTS = 40  # shaped client addresses (a swarm of 32, the single contenders, the warm-up's)


@dataclass(frozen=True)
class Links:
    """The shaped links of one run: each site's uplink and each client's (bit/s), the round trip each site's
    and each client's link adds (s), the namespace loopback's MTU."""

    rate: int
    client_rate: int
    rtt: float = 0.0
    client_rtt: float = 0.0
    mtu: int = shaping.LO_MTU

    def up_args(self, overrides: dict[str, int] | None = None) -> list[str]:
        """`btswarm up` arguments for these links; `overrides`: a site's own rate."""
        args = ["--site-link", str(shaping.LinkSpec(self.rate, self.rtt))]
        for name, r in (overrides or {}).items():
            args += ["--site-link", f"{name}={shaping.LinkSpec(r, self.rtt)}"]
        args += ["--client-link", str(shaping.LinkSpec(self.client_rate, self.client_rtt)),
                 "--client-addresses", str(CLIENTS)]
        return args + (["--link-mtu", str(self.mtu)] if self.mtu != shaping.LO_MTU else [])

    def at(self, rate: int) -> "Links":
        """The same round trips and MTU with every site and client at `rate`."""
        return replace(self, rate=rate, client_rate=rate)

    def doc(self) -> dict:
        return {"rate": self.rate, "client_rate": self.client_rate, "rtt": self.rtt, "client_rtt": self.client_rtt,
                "link_mtu": self.mtu}


# --- the contenders' commands ----------------------------------------------------------------------
def curl_cmd(srv: bl.Nginx, name: str, lfns: list[str], out: Path, ip: str, config: Path | None = None) -> list[str]:
    cmd = bl.curl_config_cmd(srv, name, lfns, out, config) if config else bl.curl_cmd(srv, name, lfns, out)
    return [cmd[0], "--interface", ip, *cmd[1:]]


def aria2c_cmd(torrent: Path, out: Path, ip: str, seed: bool = False, port: int | None = None) -> list[str]:
    """aria2c as a BitTorrent client on `ip` (listening on `port`, default a free one); `seed`: it seeds on
    (until stopped by PID) once complete."""
    seeding = ["--seed-time=60", "--seed-ratio=0.0"] if seed else ["--seed-time=0"]
    return ["aria2c", "-q", "--enable-dht=false", "--enable-dht6=false", "--bt-enable-lpd=false",
            "--enable-peer-exchange=false", *seeding, "--file-allocation=none", "--check-integrity=false",
            "--disable-ipv6=true", f"--interface={ip}", f"--listen-port={port or bl.free_port(ip)}",
            "--summary-interval=0", "--console-log-level=warn", f"--dir={out}", str(torrent)]


def kumar_ross(size: int, n: int, site_rates: list[int], client_rate: int) -> float:
    """Minimum time to deliver `size` bytes to n peers: max(S/ΣR, n·S/(ΣR + n·C)) (free downlinks)."""
    bits, total = size * 8, sum(site_rates)
    return max(bits / total, n * bits / (total + n * client_rate))


# --- the federation and its data -------------------------------------------------------------------
def seeds_everywhere(fed: bl.Federation, info_hash: str) -> None:
    """Every site seeding `info_hash` and listed so at the tracker (all contenders get the same seeds)."""
    bl.start_seeds(fed, info_hash)
    n = len(fed.sites)
    bl.wait_for(lambda: len(bl.get_json(f"{fed.tracker_url}/api/swarms/{info_hash}")["sites"]) >= n, 30,
                f"all {n} sites seeding at the tracker", interval=0.2)


def restart_seed(fed: bl.Federation, site: str, info_hash: str) -> None:
    """Stop `site`'s seed: it closes its files, nothing of them stays mapped (seeds_everywhere starts it again)."""
    s = fed.site(site)
    path = f"/api/seeds/{info_hash}"
    headers = auth.sign(bl.site_secret(fed, site), site, "DELETE", path, b"")
    req = urllib.request.Request(s.control_url + path, headers=headers, method="DELETE")
    with contextlib.suppress(urllib.error.HTTPError), urllib.request.urlopen(req, timeout=10) as resp:
        resp.read()
    bl.wait_for(lambda: info_hash not in [x["info_hash"] for x in fed.site_status(site)["seeds"]], 20,
                f"{site} to stop its seed")


def noweb_torrent(fed: bl.Federation, name: str, path: Path) -> Path:
    """The dataset's .torrent without web seeds (the BitTorrent contenders' own, from the same seeds) at `path`."""
    path.write_bytes(fedlib.get_bytes(f"{fed.repo}{urls.dataset_torrent(name)}?web_seeds=0"))
    return path


def check_complete(label: str, directory: Path, size: int) -> None:
    got = bl.dataset_size(directory) if directory.is_dir() else 0
    if got != size:
        raise SystemExit(f"{label}: {got} of {size} bytes arrived in {directory}")


def dataset(data: Path, name: str, files: int, size: int, jitter: float = 0.3) -> dict:
    """`files` files of about `size` bytes in all (torrents.sample) under DATA/NAME: its name, root, files, bytes."""
    root = sample.generate(data, name=name, files=files, total_size=size, jitter=jitter)
    lfns = sorted(p.name for p in root.iterdir())
    return {"name": name, "root": root, "lfns": lfns, "sizes": [(root / f).stat().st_size for f in lfns],
            "bytes": bl.dataset_size(root), "files": len(lfns)}


def public(ds: dict) -> dict:
    return {"name": ds["name"], "bytes": ds["bytes"], "files": ds["files"]}


def wan_dataset(work: Path, args: argparse.Namespace, doc: dict) -> dict:
    """The scenarios' dataset (29 files of --size) under WORK/data, named in the results."""
    size = parse_size(args.size or ("100M" if args.quick else "200M"))
    return scenario_dataset(work, doc, "bench.wan.dataset", 29, size)


def scenario_dataset(work: Path, doc: dict, name: str, files: int, size: int, jitter: float = 0.3) -> dict:
    """A scenario's dataset under WORK/data, named in its results (`doc`)."""
    ds = dataset(work / "data", name, files, size, jitter)
    doc["dataset"] = public(ds)
    bl.log(f"dataset {ds['name']}: {ds['bytes'] / 1e6:.0f} MB in {ds['files']} files")
    return ds


def replicas(work: Path, ds: dict, prefix: str) -> tuple[Path, Path, Path]:
    """Two replicas of `ds` (hard links: no copy of the bytes), and where the second is mounted through bindfs."""
    one, two = work / f"{prefix}1", work / f"{prefix}2"
    for d in (one, two):
        d.mkdir()
        subprocess.run(["cp", "-al", str(ds["root"]), str(d / ds["name"])], check=True)
    return one, two, work / f"{prefix}2-fuse"


def warm_up(fed: bl.Federation, work: Path, name: str, timeout: float = 900) -> None:
    """A first fetch of `name` from the spare client address: seeds started, page cache warm."""
    bl.timed(bl.bt_get_cmd(fed, name, bl.fresh_dir(work / "warm"), bl.client_ip(CLIENTS - 1)), timeout)
    bl.fresh_dir(work / "warm")


@contextlib.contextmanager
def federation(work: Path, links: Links, warm: str, *, where: str = "fed3", overrides: dict[str, int] | None = None,
               baseline: bool = True, timeout: float = 900) -> Iterator[tuple[bl.Federation, bl.Nginx | None]]:
    """Three sites serving WORK/data on `links` (state in WORK/WHERE) and (`baseline`) nginx serving it behind
    R; `warm` fetched once."""
    with contextlib.ExitStack() as stack:
        fed = stack.enter_context(bl.federation(work / where, work / "data", sites=3, args=links.up_args(overrides)))
        srv = stack.enter_context(bl.nginx(work / where, work / "data")) if baseline else None
        warm_up(fed, work, warm, timeout)
        yield fed, srv


@contextlib.contextmanager
def frozen_federation(work: Path, ds: dict, links: Links, prefix: str, env: dict[str, str] | None = None
                      ) -> Iterator[tuple[bl.Federation, int, Path]]:
    """Two sites with a replica each, site2 reading its own through bindfs (whose daemon a scenario may
    SIGSTOP: its storage freezes): the federation, bindfs's PID and mount."""
    one, two, mount = replicas(work, ds, prefix)
    with frozenfs.bindfs(two, mount, work / "bindfs.log") as fuse, \
            bl.federation(work / f"{prefix}fed", [one, mount], sites=2, args=links.up_args(), env=env) as fed:
        yield fed, fuse.pid, mount


def uncached(fed: bl.Federation, info_hash: str, mount: Path) -> None:
    """site2's seed restarted and its bindfs mount's page cache dropped: its reads really reach bindfs."""
    restart_seed(fed, "site2", info_hash)
    frozenfs.drop_cached(mount)


def wait_third(fed: bl.Federation, start: dict[str, int], size: int, proc: subprocess.Popen) -> None:
    """Until the sites' uplinks carried a third of `size` since `start` (their counters then), or `proc` ended."""
    ips = [site_ip(s) for s in fed.sites]
    bl.wait_for(lambda: sum(fed.link_bytes()[ip] - start[ip] for ip in ips) >= size / 3 or proc.poll() is not None,
                300, "a third of the dataset to arrive", interval=0.05)


# --- one command at a time -------------------------------------------------------------------------
def timed_contenders(contenders: dict, runs: int, dest: Path, size: int, name: str, tag: str) -> dict[str, list[float]]:
    """Each contender (label -> its command given the output directory) in turn, `runs` times; seconds."""
    seconds: dict[str, list[float]] = {k: [] for k in contenders}
    for run_no in range(runs):
        for label, make in contenders.items():
            bl.fresh_dir(dest)
            t = bl.timed(make(dest), 1800)
            check_complete(label, dest / name, size)
            seconds[label].append(t.seconds)
            bl.log(f"{tag} run {run_no + 1} {label:10s} {t.seconds:6.2f} s")
            bl.fresh_dir(dest)
    return seconds


def one_t3(fed: bl.Federation, srv: bl.Nginx, work: Path, ds: dict, runs: int, bound: float, tag: str,
           config: Path | None = None, others: dict | None = None) -> dict:
    """bt-get vs curl<-nginx (and `others`: label -> command) on one dataset, seeds at every site: seconds,
    fraction of `bound`."""
    name = ds["name"]
    seeds_everywhere(fed, fed.info_hash(name))
    contenders = {
        "bt-get": lambda o: bl.bt_get_cmd(fed, name, o, bl.client_ip(0)),
        "curl<-nginx": lambda o: curl_cmd(srv, name, ds["lfns"], o / name, bl.client_ip(1), config),
        **(others or {}),
    }
    seconds = timed_contenders(contenders, runs, work / "out", ds["bytes"], name, tag)
    med = {k: bl.median(v) for k, v in seconds.items()}
    return {"bound_s": bound, "median_s": med, "runs_s": seconds, "fraction": bound / med["bt-get"],
            "vs_curl": med["curl<-nginx"] / med["bt-get"]}


# --- the driver ----------------------------------------------------------------------------------------
@dataclass
class Scenario:
    """One wan scenario: `run(work, args, links, runs, doc)` fills the results of one RTT, `report(doc)` prints
    them; `options` adds its own flags; `figures(doc)` (seconds by what they measure) for the latency table."""

    name: str
    doc: str | None
    run: Callable[[Path, argparse.Namespace, Links, int, dict], None]
    report: Callable[[dict], None]
    targets: dict[str, float] = field(default_factory=dict)
    options: Callable[[argparse.ArgumentParser], None] = lambda ap: None
    figures: Callable[[dict], dict[str, float]] | None = None
    sized: bool = True  # takes --size: the scenario fetches the 29-file dataset


def parse_args(sc: Scenario) -> argparse.Namespace:
    ap = bl.parser(sc.doc)
    ap.add_argument("--rate", default="100mbit", help="each site's uplink R (and the nginx baseline's)")
    ap.add_argument("--client-rate", default="100mbit", help="each client's uplink C")
    ap.add_argument("--rtt", nargs="+", default=["0ms", "40ms", "100ms"],
                    help="the round trips each site's link adds, each a run of the scenario (0ms 40ms 100ms)")
    ap.add_argument("--client-rtt", default="0ms",
                    help="the round trip each client's link adds: T3s are twice that apart, a T3 and a site "
                         "that plus the site's (default 0ms: T3s side by side)")
    ap.add_argument("--link-mtu", type=int, default=shaping.LO_MTU,
                    help=f"the shaped loopback's MTU (btswarm up --link-mtu; {shaping.JUMBO_MTU}: jumbo frames)")
    if sc.sized:
        ap.add_argument("--size", default=None, help="dataset size (default 200M, --quick 100M)")
    sc.options(ap)
    return ap.parse_args()


def links_of(args: argparse.Namespace) -> list[Links]:
    """One Links for each --rtt."""
    rate, client_rate = shaping.parse_rate(args.rate, "--rate"), shaping.parse_rate(args.client_rate, "--client-rate")
    client_rtt = shaping.parse_delay(args.client_rtt, "--client-rtt")
    return [Links(rate, client_rate, shaping.parse_delay(r, "--rtt"), client_rtt, args.link_mtu) for r in args.rtt]


@contextlib.contextmanager
def noted(doc: dict, key: str) -> Iterator[None]:
    """Run one scenario (or part); a failure is recorded (and printed) instead of losing the other parts."""
    t = time.monotonic()
    try:
        yield
    except (SystemExit, Exception) as e:  # noqa: BLE001  (SystemExit: benchlib's one-line failures)
        if isinstance(e, SystemExit) and e.code in (0, None):
            raise
        doc.setdefault("failed", {})[key] = str(e)[-2000:]
        bl.log(f"{key}: FAILED: {e}")
    bl.log(f"{key}: {time.monotonic() - t:.0f} s")


def run_at(sc: Scenario, args: argparse.Namespace, links: Links) -> dict:
    """The scenario at one RTT, in a work directory of its own."""
    runs = args.runs or 3
    doc: dict = {**links.doc(), "runs": runs, "scenarios": [sc.name]}
    bl.log(f"{sc.name}: R {args.rate}, C {args.client_rate}, site RTT {shaping.format_delay(links.rtt)}")
    with bl.workdir(f"wan-{sc.name}", args.keep) as work, noted(doc, sc.name):
        sc.run(work, args, links, runs, doc)
    doc["targets"] = sc.targets
    return doc


def main(sc: Scenario) -> int:
    args = parse_args(sc)
    every = links_of(args)
    bl.require_shaping(f"bench_wan_{sc.name}")
    docs = [run_at(sc, args, links) for links in every]
    # The first RTT's document stays at the top level (as with one --rtt); every one is under by_rtt.
    doc = {**docs[0], "by_rtt": {shaping.format_delay(d["rtt"]): d for d in docs}} if len(docs) > 1 else docs[0]
    bl.write_json(args.out, f"wan_{sc.name}", doc)
    for d in docs:
        print(heading(d))
        sc.report(d)
        for key, why in d.get("failed", {}).items():
            print(f"FAILED {key}: {why}")
    if len(docs) > 1 and sc.figures:
        report_rtts(docs, sc.figures)
    return 1 if any(d.get("failed") for d in docs) else 0


# --- reports -------------------------------------------------------------------------------------------
def line(what: str, value: float, bound: str, target: str) -> str:
    """One figure of a report: what, its value, the bound it is measured against, the target."""
    return f"  {what:58s} {value:7.2f}   {bound:28s} {target}"


def heading(doc: dict) -> str:
    ds = doc.get("dataset")
    return (f"wan: R {shaping.format_rate(doc['rate'])} per site, C {shaping.format_rate(doc['client_rate'])} per "
            f"client, site RTT {shaping.format_delay(doc.get('rtt', 0.0))}, "
            + (f"client RTT {shaping.format_delay(doc['client_rtt'])}, " if doc.get("client_rtt") else "")
            + (f"MTU {doc['link_mtu']}, " if doc.get("link_mtu", shaping.LO_MTU) != shaping.LO_MTU else "")
            + (f"S {ds['bytes'] / 1e6:.0f} MB in {ds['files']} files, " if ds else "")
            + f"median of {doc['runs']}")


def report_rtts(docs: list[dict], figures: Callable[[dict], dict[str, float]]) -> None:
    """Each figure at every RTT and its ratio to RTT 0 (or the smallest RTT run): target within 15%."""
    base = min(docs, key=lambda d: d["rtt"])
    others = [d for d in docs if d is not base]
    rows = []
    for what, t0 in figures(base).items():
        row = [what, t0]
        for d in others:
            t = figures(d).get(what)
            row += [t, t / t0] if t else ["-", "-"]
        rows.append(row)
    at = shaping.format_delay(base["rtt"])
    head = ["figure", f"{at} s"]
    for d in others:
        head += [f"{shaping.format_delay(d['rtt'])} s", f"/ {at}"]
    print(f"latency: each figure against its {at} value (target: within 1.15 at 100 ms)")
    print(bl.table(head, rows))
