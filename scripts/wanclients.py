"""Many clients at once on the shaped links: bt-get, aria2c and curl, each started on its own client address.

Each returns the seconds until each client was done (and the last), what the
sites sent for them (T2 egress: the sites' own count and their uplinks'), and
with `timeline` who waited on whom (wanmeters.Timeline). `completion_times`
and `marked_done` wait for the clients' completion, bounded in time; a client
that exits early ends the benchmark with one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path

import benchlib as bl
from wanlib import SEED_TIME, aria2c_cmd, check_complete, curl_cmd
from wanmeters import CpuMeter, Timeline, sites_wire_bytes


def completion_times(logs: list[Path], procs: list[subprocess.Popen], t0: float, timeout: float, seeding: bool
                      ) -> list[float]:
    """Seconds from t0 until each bt-get logged its completion (seeding: it then seeds on) or exited 0."""
    done: dict[int, float] = {}
    deadline = time.monotonic() + timeout
    while len(done) < len(logs):
        for k, path in enumerate(logs):
            if k in done:
                continue
            code = procs[k].poll()
            if seeding and " complete in " in path.read_text(errors="replace") or code == 0:
                done[k] = time.monotonic() - t0
            elif code is not None:
                raise SystemExit(f"client {k} exited {code} before completing; see {path}")
        if time.monotonic() > deadline:
            raise SystemExit(f"{len(logs) - len(done)} of {len(logs)} clients not complete after {timeout:.0f} s")
        time.sleep(0.05)
    return [done[k] for k in range(len(logs))]


def bt_get_many(fed: bl.Federation, work: Path, ds: dict, extra: list[list[str]], seed: bool, sizes: list[int],
                timeline: bool = False, env: dict[str, str] | None = None) -> dict:
    """len(extra) bt-gets at once (client k: client_ip(k) with extra[k]); times to completion; T2 egress."""
    name = ds["name"]
    n = len(extra)
    before, wire = bl.settled_uploaded_total(fed), sites_wire_bytes(fed)
    outs = [bl.fresh_dir(work / f"client{k}") for k in range(n)]
    logs = [work / f"client{k}.log" for k in range(n)]
    for p in logs:
        p.write_text("")
    seeding = ["--seed-time", SEED_TIME] if seed else []
    tl = Timeline(fed, outs) if timeline else contextlib.nullcontext()
    with bl.Procs() as procs, tl:
        meter = CpuMeter(fed)
        t0, wall0 = time.monotonic(), time.time()
        clients = [procs.start(bl.bt_get_cmd(fed, name, outs[k], bl.client_ip(k), "-v", *seeding, *extra[k]), logs[k],
                               stdout=open(work / f"client{k}.json", "wb"), env={**os.environ, **(env or {})})
                   for k in range(n)]
        times = completion_times(logs, clients, t0, 900, seed)
        # Clients that seed on are still running; the others have exited, their CPU no longer readable.
        meter.clients([c.pid for c in clients] if seed else [])
        codes = [procs.stop(c) for c in clients]
    if any(codes):
        raise SystemExit(f"bt-get clients exited {codes}; see {work}/client*.log")
    from_sites = 0
    each_sources, starts = [], []
    for k in range(n):
        check_complete(f"client {k}", outs[k] / name, sizes[k])
        bl.fresh_dir(outs[k])
        doc = json.loads((work / f"client{k}.json").read_text())
        sources = doc.get("sources", {})
        each_sources.append(sources)
        marks = {**doc.get("timeline", {}), "first_byte": doc.get("first_byte_at")}
        starts.append({m: round(at - wall0, 3) for m, at in marks.items() if isinstance(at, (int, float))})
        from_sites += sum(v for src, v in sources.items() if src.startswith("site"))
    uploaded = bl.settled_uploaded_total(fed) - before
    out = {"seconds": max(times), "each_s": times, "egress_x": uploaded / ds["bytes"],
           "wire_egress_x": (sites_wire_bytes(fed) - wire) / ds["bytes"], "from_sites_x": from_sites / ds["bytes"],
           "sources": each_sources, "starts": starts,
           "first_byte_s": bl.median([m.get("first_byte", float("nan")) for m in starts]), "cpu": meter.doc}
    # The start (Python processes on shared cores) against the transfer: busy until the median first byte, and after.
    out["cpu"]["host_busy_to_first_byte"] = meter.busy(0.0, out["first_byte_s"])
    out["cpu"]["host_busy_after_first_byte"] = meter.busy(out["first_byte_s"], meter.doc["wall_s"])
    if timeline:
        out["timeline"] = tl.doc()
    return out


def aria2c_many(fed: bl.Federation, work: Path, ds: dict, n: int, torrent: Path, timeline: bool = False) -> dict:
    """n aria2c BitTorrent clients at once (client_ip(k)), the same .torrent without web seeds, each seeding on
    until the last is done: times to completion (aria2c's on-bt-download-complete hook), T2 egress."""
    name = ds["name"]
    before, wire = bl.settled_uploaded_total(fed), sites_wire_bytes(fed)
    outs = [bl.fresh_dir(work / f"aria{k}") for k in range(n)]
    marks, hooks = (list(x) for x in zip(*(aria2c_hook(work, f"aria{k}") for k in range(n))))
    tl = Timeline(fed, outs) if timeline else contextlib.nullcontext()
    with bl.Procs() as procs, tl:
        t0 = time.monotonic()
        clients = [procs.start([*aria2c_cmd(torrent, outs[k], bl.client_ip(k), seed=True),
                                f"--on-bt-download-complete={hooks[k]}"], work / f"aria{k}.log") for k in range(n)]
        done = marked_done(clients, marks, t0, lambda k: f"aria2c {k}", f"{work}/aria{{k}}.log")
    for k in range(n):
        check_complete(f"aria2c {k}", outs[k] / name, ds["bytes"])
        bl.fresh_dir(outs[k])
    uploaded = bl.settled_uploaded_total(fed) - before
    times = [done[k] for k in range(n)]
    out = {"seconds": max(times), "each_s": times, "egress_x": uploaded / ds["bytes"],
           "wire_egress_x": (sites_wire_bytes(fed) - wire) / ds["bytes"]}
    if timeline:
        out["timeline"] = tl.doc()
    return out


def aria2c_hook(work: Path, tag: str) -> tuple[Path, Path]:
    """An aria2c --on-bt-download-complete hook marking completion: (WORK/TAG.done, absent until then; the
    hook WORK/TAG.hook)."""
    mark, hook = work / f"{tag}.done", work / f"{tag}.hook"
    mark.unlink(missing_ok=True)
    hook.write_text(f"#!/bin/sh\ntouch {mark}\n")
    hook.chmod(0o755)
    return mark, hook


def marked_done(clients: list[subprocess.Popen], marks: list[Path], t0: float, label, log: str,
                timeout: float = 900) -> dict[int, float]:
    """Until each client k has written marks[k] (aria2c's on-bt-download-complete hook): its seconds since
    t0. A client that exits first, or `timeout`, ends the benchmark (`label(k)` names it, `log` with {k}
    where its output is)."""
    done: dict[int, float] = {}
    while len(done) < len(clients):
        for k, client in enumerate(clients):
            if k not in done and marks[k].exists():
                done[k] = time.monotonic() - t0
            elif k not in done and client.poll() is not None:
                raise SystemExit(f"{label(k)} exited {client.returncode}; see {log.format(k=k)}")
        if time.monotonic() > t0 + timeout:
            raise SystemExit(f"aria2c: {len(clients) - len(done)} of {len(clients)} not complete after "
                             f"{timeout:g} s")
        time.sleep(0.05)
    return done


def curl_many(srv: bl.Nginx, work: Path, ds: dict, n: int) -> float:
    outs = [bl.fresh_dir(work / f"curl{k}") for k in range(n)]
    with bl.Procs() as procs:
        t0 = time.monotonic()
        clients = [procs.start(curl_cmd(srv, ds["name"], ds["lfns"], outs[k], bl.client_ip(k)), work / f"curl{k}.log")
                   for k in range(n)]
        for c in clients:
            c.wait(max(1.0, t0 + 1800 - time.monotonic()))
        seconds = time.monotonic() - t0
    if any(c.returncode for c in clients):
        raise SystemExit(f"curl exited {[c.returncode for c in clients]}; see {work}/curl*.log")
    for o in outs:
        check_complete("curl", o, ds["bytes"])
        bl.fresh_dir(o)
    return seconds
