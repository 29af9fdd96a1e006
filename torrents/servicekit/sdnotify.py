"""systemd's readiness protocol (sd_notify): one datagram to $NOTIFY_SOCKET, no library needed.

A unit with `Type=notify` (deploy/systemd/) counts the service as started
when it sends READY=1; each service sends it once it really listens. Outside
systemd ($NOTIFY_SOCKET unset) every call does nothing. The protocol: a
datagram of newline-separated KEY=VALUE lines to the AF_UNIX socket named
by the variable (a name starting with '@' is in the abstract namespace).
"""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger("btswarm.sdnotify")

ENV = "NOTIFY_SOCKET"


def notify(*lines: str) -> bool:
    """Send `lines` (e.g. "READY=1", "STATUS=...") to systemd; False when not under it or the send failed."""
    address = os.environ.get(ENV, "")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    elif not address.startswith("/"):
        log.warning("$%s=%r: not a socket path; readiness not sent", ENV, address)
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall("\n".join(lines).encode())
    except OSError as exc:
        log.warning("$%s %s: cannot send %s (%s)", ENV, os.environ.get(ENV), lines[0] if lines else "", exc)
        return False
    return True


def ready(status: str = "") -> bool:
    """READY=1, and a STATUS line for `systemctl status`.

    No MAINPID: a forked tracker process says it for the parent systemd started
    (the unit allows that with NotifyAccess=all), which stays the main process.
    """
    return notify("READY=1", *([f"STATUS={status}"] if status else []))


def stopping() -> bool:
    return notify("STOPPING=1")
