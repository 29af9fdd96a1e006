"""The Kumar-Ross schedule as plain TCP flows: what the test bed itself allows.

    python scripts/idealflows.py host --listen ADDR:PORT --expect BYTES --go FILE --send ADDR:PORT:BYTES ...

The bound max(S/ΣR, N·S/(ΣR + N·C)) assumes every uplink busy from start to
end, each site sending its bytes spread evenly over the N T3s, and each T3
passing on to each other T3 an equal part of what it needs from its peers.
`plan` gives that schedule's bytes per (sender, receiver); `ideal_all` runs
it on the hosts of a federation (`btswarm up --hosts`): one process per
host, every flow starting at one instant, each T3 done when every byte due
to it has arrived. No piece has to arrive before it is passed on, no hash,
no disk: so the time it takes is the least any BitTorrent client can take
on these links, this machine and its load, and bt-get's time over it is
the product's share of the gap to the bound (scripts/bench_hosts.py
--ideal).
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
from pathlib import Path

CHUNK = 1 << 20
PORT = 6991  # each host has its own stack: one port for all


def plan(size: int, n: int, sites: list[str], t3s: list[str], site_rate: float, client_rate: float
         ) -> dict[tuple[str, str], int]:
    """Bytes from sender to receiver in the bound's schedule for N = len(t3s) T3s fetching `size` bytes
    from `sites` (each sending at `site_rate`, the T3s at `client_rate`, bytes/s; downlinks free)."""
    bound = max(size / (len(sites) * site_rate), n * size / (len(sites) * site_rate + n * client_rate))
    from_each_site = min(size / len(sites), site_rate * bound / n)
    from_each_peer = (size - from_each_site * len(sites)) / (n - 1) if n > 1 else 0.0
    flows = {(s, t): round(from_each_site) for s in sites for t in t3s}
    flows.update({(a, b): round(from_each_peer) for a in t3s for b in t3s if a != b and from_each_peer > 0})
    return flows


def _send(address: str, port: int, size: int) -> None:
    with socket.create_connection((address, port)) as c:
        block = bytes(CHUNK)
        left = size
        while left > 0:
            left -= c.send(block[:min(left, CHUNK)])


def _receive(listener: socket.socket, expect: int, done: list[float]) -> None:
    got = 0
    lock = threading.Lock()

    def drain(c: socket.socket) -> None:
        nonlocal got
        with c:
            while data := c.recv(CHUNK):
                with lock:
                    got += len(data)
                    if got >= expect and not done:
                        done.append(time.time())

    while not done:
        listener.settimeout(0.5)
        try:
            c, _ = listener.accept()
        except TimeoutError:
            continue
        threading.Thread(target=drain, args=(c,), daemon=True).start()


def host(args: argparse.Namespace) -> int:
    """One host's part: listen (a T3), say "ready", send its flows once the `--go` file exists, and print
    the time (epoch) its last expected byte arrived."""
    done: list[float] = []
    receiver = None
    if args.expect:
        address, _, port = args.listen.rpartition(":")
        listener = socket.create_server((address, int(port)), backlog=64)
        receiver = threading.Thread(target=_receive, args=(listener, args.expect, done), daemon=True)
        receiver.start()
    print("ready", flush=True)
    deadline = time.monotonic() + args.timeout
    while not Path(args.go).exists():
        if time.monotonic() > deadline:
            return 1
        time.sleep(0.002)
    senders = [threading.Thread(target=_send, args=(a, int(p), int(b))) for a, p, b in
               (s.rsplit(":", 2) for s in args.send)]
    for t in senders:
        t.start()
    for t in senders:
        t.join()
    if receiver is not None:
        receiver.join(timeout=max(0.0, deadline - time.monotonic()))
        if not done:
            print("timed out", flush=True)
            return 1
        print(f"done {done[0]:.6f}", flush=True)
    return 0


def ideal_all(fed, n: int, work: Path, size: int, site_rate: float, client_rate: float,
              timeout: float = 600) -> dict:
    """The bound's schedule (plan) as TCP flows on the federation's hosts, every flow from one instant: a
    contender of scripts/bench_hosts.py. → each T3's seconds until all its bytes were in."""
    import benchlib as bl
    from btswarm import netns

    sites = [fed.host(s.name) for s in fed.sites]
    t3s = [fed.host(f"t3-{k}") for k in range(1, n + 1)]
    flows = plan(size, n, [h.name for h in sites], [h.name for h in t3s], site_rate, client_rate)
    address = {h.name: h.address for h in sites + t3s}
    go = work / "ideal.go"
    go.unlink(missing_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    logs = {h.name: work / f"ideal-{h.name}.log" for h in sites + t3s}
    with bl.Procs() as procs:
        for h in sites + t3s:
            logs[h.name].write_text("")
            expect = sum(b for (_, to), b in flows.items() if to == h.name)
            sends = [f"{address[to]}:{PORT}:{b}" for (src, to), b in flows.items() if src == h.name]
            procs.start([sys.executable, __file__, "host", "--listen", f"{h.address}:{PORT}", "--expect",
                         str(expect), "--go", str(go), "--timeout", str(timeout), "--send", *sends],
                        logs[h.name], preexec_fn=netns.preexec(h.netns))
        bl.wait_for(lambda: all("ready" in p.read_text() for p in logs.values()), 60, "the flows' hosts ready")
        t0 = time.time()
        go.touch()
        for p in procs.procs:
            p.wait(timeout=timeout)
    ends = [_done_at(logs[h.name]) for h in t3s]
    return {"seconds": [e - t0 for e in ends]}


def _done_at(log: Path) -> float:
    for line in log.read_text().splitlines():
        if line.startswith("done "):
            return float(line.split()[1])
    raise SystemExit(f"idealflows: no completion in {log}: {log.read_text()[-500:]}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    h = sub.add_parser("host")
    h.add_argument("--listen", default="")
    h.add_argument("--expect", type=int, default=0)
    h.add_argument("--send", nargs="*", default=[])
    h.add_argument("--go", required=True, help="start sending once this file exists")
    h.add_argument("--timeout", type=float, default=600)
    return host(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
