"""Private network namespaces for a shaped federation or a federation of hosts: create and shape, enter,
delete (root only).

The thin I/O side of btswarm.shaping: `ip netns` and `tc` run as
commands, and a thread enters a namespace with setns(2) (Python 3.11 has
no os.setns), so that everything it starts afterwards — threads and
processes — lives on the namespace's own loopback. Names are unique per
process (`btswarm-PID-RANDOM`): other people's namespaces on the same
host are never touched.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import shutil
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from torrents.errors import BtswarmError

CLONE_NEWNET = 0x40000000
NETNS_DIR = "/run/netns"  # where `ip netns add` bind-mounts a namespace by name

_libc = ctypes.CDLL(None, use_errno=True)


class NetnsError(BtswarmError):
    """A namespace or tc command failed, or is not allowed here."""


def require(subject: str, why: str = "a private network namespace and tc shaping",
            instead: str = "run as root, or without --site-link/--client-link") -> None:
    """One clear line when shaping cannot work here: not root, or no `ip`/`tc`."""
    if os.geteuid() != 0:
        raise NetnsError(subject, f"needs root ({why}); {instead}")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise NetnsError(subject, f"needs the `{tool}` command (Debian: iproute2)")


def unique_name(prefix: str = "btswarm") -> str:
    return f"{prefix}-{os.getpid()}-{secrets.token_hex(3)}"


def _run(argv: Sequence[str]) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise NetnsError(" ".join(argv[:4]), (proc.stderr or proc.stdout).strip() or f"exit {proc.returncode}")
    return proc.stdout


def exists(name: str) -> bool:
    return os.path.exists(os.path.join(NETNS_DIR, name))


def create(name: str, tc_commands: Sequence[Sequence[str]] = (),
           sysctls: Sequence[tuple[str, str]] = ()) -> None:
    """A namespace with its loopback up, shaped by `tc_commands` (argv lists starting with 'tc' or 'ip'),
    then `sysctls` set ((key under /proc/sys, value))."""
    _run(["ip", "netns", "add", name])
    try:
        _run(["ip", "-n", name, "link", "set", "lo", "up"])
        for cmd in tc_commands:
            _run([cmd[0], "-n", name, *cmd[1:]])
        if sysctls:
            with entered(name):  # /proc/sys/net is the namespace of the thread that opens it
                for key, value in sysctls:
                    Path("/proc/sys", key).write_text(value)
    except BaseException:
        delete(name)
        raise


def build(names: Sequence[str], steps: Sequence[tuple[str, Sequence[str]]],
          sysctls: Sequence[tuple[str, str]] = ()) -> None:
    """Namespaces `names`, each with `sysctls` set before any device is made in it (a new device takes
    `default`), then `steps` ((namespace, argv starting with 'ip' or 'tc'), in order). All or nothing:
    on a failure every one of them is deleted."""
    made: list[str] = []
    try:
        for name in names:
            _run(["ip", "netns", "add", name])
            made.append(name)
            with entered(name):  # /proc/sys/net is the namespace of the thread that opens it
                for key, value in sysctls:
                    Path("/proc/sys", key).write_text(value)
        for name, cmd in steps:
            _run([cmd[0], "-n", name, *cmd[1:]])
    except BaseException:
        for name in made:
            delete(name)
        raise


def preexec(name: str | None) -> Callable[[], None]:
    """For a child between fork and exec: into namespace `name` (None: stay), so that it starts there."""
    path = None if name is None else os.path.join(NETNS_DIR, name)

    def enter_child() -> None:
        if path is not None:
            _setns(path)
    return enter_child


def delete(name: str) -> None:
    """Remove the name; the namespace itself goes when its last process has left. Idempotent."""
    if exists(name):
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


def tc_stats(name: str, dev: str = "lo") -> str:
    """`tc -s class show dev DEV` inside the namespace (for shaping.class_bytes)."""
    return _run(["tc", "-n", name, "-s", "class", "show", "dev", dev])


def _setns(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise NetnsError(path, f"cannot enter the network namespace ({os.strerror(err)})")
    finally:
        os.close(fd)


def enter(name: str) -> None:
    """Move the calling thread into namespace `name` for good (what it starts later follows it)."""
    if not exists(name):
        raise NetnsError(name, "no such network namespace (is the shaped federation still up?)")
    _setns(os.path.join(NETNS_DIR, name))


@contextlib.contextmanager
def entered(name: str | None) -> Iterator[None]:
    """The calling thread inside namespace `name` for the block, back in its own afterwards (None: no-op)."""
    if name is None:
        yield
        return
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        enter(name)
        try:
            yield
        finally:
            if _libc.setns(own, CLONE_NEWNET) != 0:
                raise NetnsError(name, f"cannot leave the network namespace ({os.strerror(ctypes.get_errno())})")
    finally:
        os.close(own)
