"""`btswarm run -- COMMAND`: a client of the running `btswarm up`, on its own (shaped) address.

A shaped federation lives in a private network namespace; its addresses
exist only there. `btswarm run` reads the ready document `btswarm up`
keeps in its state directory, enters that namespace and executes COMMAND
(so its PID is COMMAND's, and signals reach it directly) with
BTSWARM_GET_REPO and BTSWARM_GET_LISTEN set: a plain `bt-get NAME` then
asks this federation's repository and sends from a client address with
its own uplink. Each run takes the next client address in turn (a counter
in the state directory, under a lock), unless --address names one.

On a federation of hosts (`btswarm up --hosts`) it runs COMMAND on a
host instead (--host, or the next T3 host in turn), in that host's
namespace, with BTSWARM_GET_REPO only: the host has one address, and
what bt-get does there with its defaults is what a physicist gets.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from btswarm import netns, topology
from btswarm.hosts import Host
from btswarm.ready import Ready
from torrents.errors import BtswarmError

COUNTER_FILE = "run-counter"


def client_addresses(ready: Ready) -> list[str]:
    """The shaped client addresses of a ready document, or the default client range when none is shaped."""
    shaped = [link.address for link in ready.links if link.label.startswith("client ")]
    return shaped or [topology.client_ip(k) for k in range(32)]


def next_address(addresses: Sequence[str], counter: int) -> str:
    return addresses[counter % len(addresses)]


def read_ready(state: Path) -> Ready:
    try:
        return Ready.read(state / topology.READY_COPY)
    except FileNotFoundError:
        raise BtswarmError(state, "no federation is up on this state directory (start `btswarm up` first, "
                                  "or pass its --state)") from None


def take_address(state: Path, addresses: Sequence[str]) -> str:
    """The next address in turn; the counter survives across runs, updated under an exclusive lock."""
    return next_address(addresses, _take_turn(state))


def _take_turn(state: Path) -> int:
    with open(state / COUNTER_FILE, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        text = f.read().strip()
        counter = int(text) if text.isdigit() else 0
        f.seek(0)
        f.truncate()
        f.write(f"{counter + 1}\n")
    return counter


def pick_host(ready: Ready, name: str | None, counter: int) -> Host:
    """The host named (any role: `--host services` to look at the tracker's), or the counter-th T3 host."""
    if name is None:
        t3s = [h for h in ready.hosts if h.role == "t3"]
        return t3s[counter % len(t3s)]
    try:
        return ready.host(name)
    except KeyError:
        raise BtswarmError("--host", f"no host {name!r} (hosts: {', '.join(h.name for h in ready.hosts)})") from None


def host_env(ready: Ready, host: Host, environ: dict[str, str]) -> dict[str, str]:
    """The environment on a host: this federation's repository, and no listen address (bt-get's own
    default is what is tried); the host's address for commands that want one."""
    env = {k: v for k, v in environ.items() if k != "BTSWARM_GET_LISTEN"}  # one of another host's addresses
    env.setdefault("BTSWARM_GET_REPO", ready.repo)
    env["BTSWARM_CLIENT_ADDRESS"] = host.address
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", os.defpath)])
    return env


def client_env(ready: Ready, address: str, environ: dict[str, str]) -> dict[str, str]:
    """The environment for the client: this federation's repository (a set one wins) and the client address
    `btswarm run` took for it (the shaped address it was given, whatever the shell had)."""
    env = dict(environ)
    env.setdefault("BTSWARM_GET_REPO", ready.repo)
    env["BTSWARM_GET_LISTEN"] = address
    # This install's bt-get first, also when its venv is not activated.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", os.defpath)])
    return env


def exec_client(state: Path, argv: Sequence[str], address: str | None = None, host: str | None = None) -> NoReturn:
    if not argv:
        raise BtswarmError("btswarm run", "no command given (btswarm run -- bt-get NAME ...)")
    ready = read_ready(state)
    if ready.hosts:
        if address is not None:
            raise BtswarmError("--address", "not on a federation of hosts (each host has one address): give --host")
        on = pick_host(ready, host, 0 if host else _take_turn(state))
        netns.require("btswarm run")
        netns.enter(on.netns)
        _exec(argv, host_env(ready, on, dict(os.environ)))
    if host is not None:
        raise BtswarmError("--host", "this federation has no hosts (start it with `btswarm up --hosts`)")
    if address is not None:
        try:
            if not ipaddress.ip_address(address).is_loopback:
                raise ValueError
        except ValueError:
            raise BtswarmError("--address", f"{address!r} is not a loopback address") from None
    else:
        address = take_address(state, client_addresses(ready))
    env = client_env(ready, address, dict(os.environ))
    if ready.netns:
        netns.require("btswarm run")
        netns.enter(ready.netns)
    _exec(argv, env)


def _exec(argv: Sequence[str], env: dict[str, str]) -> NoReturn:
    try:
        os.execvpe(argv[0], list(argv), env)
    except OSError as exc:
        raise BtswarmError(argv[0], f"cannot run it ({exc.strerror})") from None
