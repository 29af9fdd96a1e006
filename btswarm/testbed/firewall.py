"""A campus firewall inside a federation's network namespace: TCP to the sites' peer ports dropped (root only).

`ruleset` is pure (the nftables text); `block` and `unblock` run `nft`
inside the namespace of a shaped federation (`btswarm up --site-link`),
never on the host. On a host of `btswarm up --hosts`, `only_through` is a
worker node whose only way out is its site's proxy, `closed` one that
accepts no inbound connection (`apply` puts either in the host's namespace). Loopback traffic passes the output hook, so one rule per
endpoint there stops a client's connection attempts (drop: they time out,
as behind most firewalls; reject: refused at once), while every other port
of the same address (a site's HTTP listeners) stays open.
"""

from __future__ import annotations

import re
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


def only_through(endpoint: str, table: str = TABLE) -> str:
    """nftables rules for a host that reaches nothing but `ip:port` (a proxy): every other new outgoing
    connection, and all of IPv6, dropped; the host's own loopback passes."""
    ip, port = parse_hostport(endpoint, "endpoint")
    family = "ip6" if ":" in ip else "ip"
    return "\n".join([f"table inet {table} {{", "  chain out {", "    type filter hook output priority 0; policy drop;",
                      '    oifname "lo" accept', "    ct state established,related accept",
                      f"    {family} daddr {ip} tcp dport {port} accept", "  }", "}", ""])


def closed(table: str = TABLE) -> str:
    """nftables rules for a host that accepts no inbound connection (NAT, a closed firewall): a new TCP
    connection from elsewhere is dropped (the SYN unanswered), counted, its source and port kept in the set
    `knocked`; what it opens itself passes both ways."""
    return "\n".join([f"table inet {table} {{", "  set knocked { type ipv4_addr . inet_service; flags dynamic; }",
                      "  chain in {", "    type filter hook input priority 0;",
                      '    iifname "lo" accept', "    ct state established,related accept",
                      "    meta nfproto ipv4 tcp flags & (syn | ack) == syn add @knocked { ip saddr . tcp dport } "
                      "counter drop",
                      "    tcp flags & (syn | ack) == syn counter drop", "  }", "}", ""])


def dropped(netns: str, table: str = TABLE) -> int:
    """Packets the counters of `table` in `netns` have seen (a closed host: the connections refused it)."""
    if shutil.which("nft") is None:
        raise FirewallError("nft", "not installed (Debian: nftables; scripts/install-system-deps.sh)")
    proc = subprocess.run(["ip", "netns", "exec", netns, "nft", "list", "table", "inet", table], capture_output=True,
                          text=True, timeout=30)
    if proc.returncode != 0:
        raise FirewallError(f"nft list table {table}", proc.stderr.strip() or f"exit {proc.returncode}")
    return sum(int(n) for n in re.findall(r"counter packets (\d+)", proc.stdout))


def knocked(netns: str, table: str = TABLE) -> set[tuple[str, int]]:
    """(source address, port knocked on) of the connections a `closed` host dropped."""
    proc = subprocess.run(["ip", "netns", "exec", netns, "nft", "list", "set", "inet", table, "knocked"],
                          capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise FirewallError(f"nft list set {table} knocked", proc.stderr.strip() or f"exit {proc.returncode}")
    return {(ip, int(port)) for ip, port in re.findall(r"(\d+\.\d+\.\d+\.\d+) \. (\d+)", proc.stdout)}


def apply(netns: str, rules: str) -> None:
    """Put `rules` (made with `table`, TABLE by default) in namespace `netns`, replacing an earlier set."""
    unblock(netns)
    _nft(netns, ["-f", "-"], rules)


def _nft(netns: str, args: Sequence[str], text: str | None = None) -> None:
    if shutil.which("nft") is None:
        raise FirewallError("nft", "not installed (Debian: nftables; scripts/install-system-deps.sh)")
    proc = subprocess.run(["ip", "netns", "exec", netns, "nft", *args], input=text, capture_output=True, text=True,
                          timeout=30)
    if proc.returncode != 0:
        raise FirewallError(f"nft {' '.join(args)}", (proc.stderr or proc.stdout).strip() or f"exit {proc.returncode}")


def block(netns: str, endpoints: Sequence[str], verdict: str = "drop") -> None:
    """Drop (or refuse) TCP to `endpoints` inside namespace `netns`, replacing an earlier block."""
    apply(netns, ruleset(endpoints, verdict))


def unblock(netns: str) -> None:
    """Remove the block (none: nothing happens)."""
    try:
        _nft(netns, ["delete", "table", "inet", TABLE])
    except FirewallError as exc:
        if "No such file or directory" not in exc.problem:
            raise
