"""A redis-server of `btswarm up --redis-replicas N` that asks the sentinels its role before it starts.

Nothing is persisted, so a data server the supervisor starts again is
empty. Started again as the master it was configured as, its replicas
would resync from it and drop every swarm, and the sentinels would keep it
as master if it came back before they had noticed it gone (down-after):
measured in tests/faults/test_redis_failover.py, a killed master restarted
by the supervisor within 0.5 s was never failed over. So before it
execs redis-server (same PID: the supervisor and `btswarm up`'s process
list see redis-server), this asks the sentinels where the master is:
- another server: it starts as that one's replica;
- itself (it died, and they have not failed over yet): it waits with its
  port closed until they name another (down-after plus an election: 2-4 s),
  at most WAIT seconds, then starts as configured;
- no sentinel answers (the federation's first start: the sentinels start
  after the data servers): as configured.

    python -m btswarm.redisnode --sentinel HOST:PORT ... --master NAME --me HOST:PORT -- redis-server ARGS...
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

WAIT = 30.0
POLL = 0.2


def ask(sentinel: tuple[str, int], master: str, timeout: float = 0.5) -> tuple[str, int] | None:
    """The master `sentinel` names, or None if it cannot say."""
    name = master.encode()
    command = b"*3\r\n$8\r\nSENTINEL\r\n$23\r\nget-master-addr-by-name\r\n$%d\r\n%s\r\n" % (len(name), name)
    try:
        with socket.create_connection(sentinel, timeout=timeout) as s:
            s.sendall(command)
            data = b""
            while data.count(b"\r\n") < 5 and not data.startswith((b"-", b"*-1")):
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    # *2\r\n$9\r\n127.0.0.1\r\n$4\r\n6379\r\n
    parts = data.split(b"\r\n")
    if not data.startswith(b"*2") or len(parts) < 5:
        return None
    try:
        return parts[2].decode(), int(parts[4])
    except (UnicodeDecodeError, ValueError):
        return None


def named(sentinels: list[tuple[str, int]], master: str) -> tuple[str, int] | None:
    """The master the first sentinel that answers names."""
    for s in sentinels:
        found = ask(s, master)
        if found is not None:
            return found
    return None


def role_args(sentinels: list[tuple[str, int]], master: str, me: tuple[str, int], wait: float = WAIT,
              clock=time.monotonic, sleep=time.sleep) -> list[str]:
    """Arguments to add to this server's configured command line (see the module's docstring)."""
    deadline = clock() + wait
    while True:
        found = named(sentinels, master)
        if found is None:
            return []
        if found != me:
            return ["--replicaof", found[0], str(found[1])]
        if clock() > deadline:
            return []
        sleep(POLL)


def _hostport(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m btswarm.redisnode")
    parser.add_argument("--sentinel", action="append", type=_hostport, default=[])
    parser.add_argument("--master", required=True)
    parser.add_argument("--me", type=_hostport, required=True)
    parser.add_argument("--wait", type=float, default=WAIT)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no redis-server command line after --")
    extra = role_args(args.sentinel, args.master, args.me, args.wait)
    if extra:
        print(f"redisnode: the sentinels name {extra[1]}:{extra[2]} master: starting as its replica", flush=True)
    os.execvp(command[0], [*command, *extra])


if __name__ == "__main__":
    sys.exit(main())
