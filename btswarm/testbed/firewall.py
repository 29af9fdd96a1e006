"""A campus firewall inside a federation's network namespace: TCP to the sites' peer ports dropped (root only).

`ruleset` is pure (the nftables text); `block` and `unblock` run `nft`
inside the namespace of a shaped federation (`btswarm up --site-link`),
never on the host. Loopback traffic passes the output hook, so one rule per
endpoint there stops a client's connection attempts (drop: they time out,
as behind most firewalls; reject: refused at once), while every other port
of the same address (a site's HTTP listeners) stays open.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

from torrents.errors import BtswarmError
from torrents.hostport import parse_hostport

TABLE = "btswarm_firewall"
VERDICTS = {"drop": "drop", "reject": "reject with tcp reset"}


class FirewallError(BtswarmError):
    """nft is missing or refused the rules."""


def ruleset(endpoints: Sequence[str], verdict: str = "drop", table: str = TABLE) -> str:
    """nftables rules dropping (or refusing) TCP to each `ip:port`."""
    if verdict not in VERDICTS:
        raise FirewallError(verdict, f"not a verdict ({', '.join(VERDICTS)})")
    lines = [f"table inet {table} {{", "  chain out {", "    type filter hook output priority 0;"]
    for ep in endpoints:
        ip, port = parse_hostport(ep, "endpoint")
        family = "ip6" if ":" in ip else "ip"
        lines.append(f"    {family} daddr {ip} tcp dport {port} {VERDICTS[verdict]}")
    return "\n".join(lines + ["  }", "}", ""])


def _nft(netns: str, args: Sequence[str], text: str | None = None) -> None:
    if shutil.which("nft") is None:
        raise FirewallError("nft", "not installed (Debian: nftables; scripts/install-system-deps.sh)")
    proc = subprocess.run(["ip", "netns", "exec", netns, "nft", *args], input=text, capture_output=True, text=True,
                          timeout=30)
    if proc.returncode != 0:
        raise FirewallError(f"nft {' '.join(args)}", (proc.stderr or proc.stdout).strip() or f"exit {proc.returncode}")


def block(netns: str, endpoints: Sequence[str], verdict: str = "drop") -> None:
    """Drop (or refuse) TCP to `endpoints` inside namespace `netns`, replacing an earlier block."""
    unblock(netns)
    _nft(netns, ["-f", "-"], ruleset(endpoints, verdict))


def unblock(netns: str) -> None:
    """Remove the block (none: nothing happens)."""
    try:
        _nft(netns, ["delete", "table", "inet", TABLE])
    except FirewallError as exc:
        if "No such file or directory" not in exc.problem:
            raise
