"""Shaped links for a one-host federation: rates, the address → htb class plan, the tc commands. Pure.

A shaped federation runs in a private network namespace whose only device
is its own loopback. Every packet leaves `lo` once, so one htb qdisc at its
root sees all traffic: a u32 filter per source address sends what a site,
a client or the nginx baseline sends into a class of its own, limited to
that address's rate. That is each one's *uplink*; downlinks are free (the
Kumar–Ross bound the benchmarks compare with assumes the same). Unmatched
traffic (tracker, repository, control calls on 127.0.0.1) takes htb's
direct queue, unshaped.

No latency is added: `sch_netem` is not on these machines (htb, tbf and
the fifos are). The round trip inside is the queueing delay of the class
queues, bounded by `queue_bytes`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from torrents.errors import BtswarmError

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(bit|kbit|mbit|gbit)\s*$", re.I)
_SCALE = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9}
MIN_RATE = 64_000  # bit/s: below this one 64 KiB loopback packet takes more than 8 s
MAX_RATE = 100 * 10**9

# Loopback packets are up to 64 KiB (GSO on lo): a class queue holds at
# least a few of them, and about QUEUE_SECONDS of traffic at its rate.
LO_PACKET = 65536
QUEUE_PACKETS = 4
QUEUE_SECONDS = 0.02

ROOT_HANDLE = "1:"
FIRST_CLASS = 0x10


def parse_rate(text: str, subject: str = "rate") -> int:
    """'100mbit', '1gbit', '500kbit', '2.5mbit' → bits per second (decimal units, as tc counts)."""
    m = _RATE.match(text)
    if not m:
        raise BtswarmError(subject, f"{text!r} is not a rate (examples: 100mbit, 1gbit, 500kbit)")
    bps = int(float(m.group(1)) * _SCALE[m.group(2).lower()])
    if not MIN_RATE <= bps <= MAX_RATE:
        raise BtswarmError(subject, f"{text!r} is out of range ({format_rate(MIN_RATE)} to "
                                    f"{format_rate(MAX_RATE)})")
    return bps


def format_rate(bps: int) -> str:
    for unit, scale in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if bps >= scale:
            value = bps / scale
            return f"{value:g}{unit}" if value == round(value, 3) else f"{value:.3f}{unit}"
    return f"{bps}bit"


def parse_keyed_rates(values: Iterable[str], option: str) -> tuple[int | None, dict[str, int]]:
    """`--site-link` style values: 'RATE' (the default for all) or 'NAME=RATE' (one), any number of each.

    → (default or None, {name: rate}). A second default, or a name given
    twice, is an error naming the option.
    """
    default: int | None = None
    named: dict[str, int] = {}
    for value in values:
        key, sep, rate = value.rpartition("=")
        if not sep:
            if default is not None:
                raise BtswarmError(option, f"two default rates ({format_rate(default)} and {value})")
            default = parse_rate(value, option)
            continue
        key = key.strip()
        if not key:
            raise BtswarmError(option, f"{value!r}: no name before '='")
        if key in named:
            raise BtswarmError(option, f"{key} is given twice")
        named[key] = parse_rate(rate, f"{option} {key}")
    return default, named


@dataclass(frozen=True)
class Link:
    """One shaped uplink: what `address` sends goes out at most at `rate` bit/s."""
    address: str
    rate: int
    label: str  # 'site1', 'client 127.0.0.101', 'baseline'

    def as_dict(self) -> dict:
        return {"address": self.address, "rate": self.rate, "rate_text": format_rate(self.rate), "label": self.label}


@dataclass(frozen=True)
class LinkOptions:
    """What the command line asked for (`--site-link`, `--client-link`, `--client-addresses`)."""
    site_default: int | None = None
    site_rates: tuple[tuple[str, int], ...] = ()  # (site name, rate) overrides
    client_rate: int | None = None
    client_addresses: int = 32

    @property
    def shaped(self) -> bool:
        return self.site_default is not None or bool(self.site_rates) or self.client_rate is not None

    @classmethod
    def parse(cls, site_link: Sequence[str] = (), client_link: str | None = None,
              client_addresses: int = 32) -> "LinkOptions":
        default, named = parse_keyed_rates(site_link, "--site-link")
        return cls(default, tuple(sorted(named.items())),
                   parse_rate(client_link, "--client-link") if client_link else None, client_addresses)


def plan(opts: LinkOptions, sites: Sequence[tuple[str, str]], clients: Sequence[str],
         baseline: str | None) -> tuple[Link, ...]:
    """The links: each site (name, address) at its rate, each client address at the client rate, and the
    baseline address (nginx in the benchmarks) at the sites' default rate. Unrated ones stay unshaped."""
    names = {name for name, _ in sites}
    for name, _ in opts.site_rates:
        if name not in names:
            raise BtswarmError("--site-link", f"no site {name} (sites: {', '.join(n for n, _ in sites)})")
    rates = dict(opts.site_rates)
    links = [Link(ip, rates.get(name, opts.site_default), name) for name, ip in sites
             if rates.get(name, opts.site_default) is not None]
    if opts.client_rate is not None:
        links += [Link(ip, opts.client_rate, f"client {ip}") for ip in clients]
    if baseline is not None and opts.site_default is not None:
        links.append(Link(baseline, opts.site_default, "baseline"))
    seen: dict[str, str] = {}
    for link in links:
        if link.address in seen:
            raise BtswarmError(link.address, f"shaped twice ({seen[link.address]} and {link.label}); "
                                             "use fewer sites")
        if not link.address.startswith("127."):
            raise BtswarmError(link.address, "not a loopback address")
        seen[link.address] = link.label
    return tuple(links)


def queue_bytes(rate: int) -> int:
    """Byte limit of a class's fifo: QUEUE_SECONDS at its rate, at least QUEUE_PACKETS loopback packets."""
    return max(QUEUE_PACKETS * LO_PACKET, int(rate / 8 * QUEUE_SECONDS))


def class_id(index: int) -> str:
    return f"1:{FIRST_CLASS + index:x}"


def tc_commands(links: Sequence[Link], dev: str = "lo") -> list[list[str]]:
    """tc argv lists (without `-n NAMESPACE`) that shape `dev` as the plan says, in order."""
    cmds = [["tc", "qdisc", "add", "dev", dev, "root", "handle", ROOT_HANDLE, "htb"]]  # default 0: unshaped
    for i, link in enumerate(links):
        cid = class_id(i)
        leaf = f"{FIRST_CLASS + i:x}:"
        cmds += [
            # rate = ceil: a link never borrows. quantum: a whole loopback packet per round.
            ["tc", "class", "add", "dev", dev, "parent", ROOT_HANDLE, "classid", cid, "htb",
             "rate", f"{link.rate}bit", "ceil", f"{link.rate}bit", "quantum", str(LO_PACKET)],
            ["tc", "qdisc", "add", "dev", dev, "parent", cid, "handle", leaf, "bfifo",
             "limit", str(queue_bytes(link.rate))],
            ["tc", "filter", "add", "dev", dev, "parent", ROOT_HANDLE, "protocol", "ip", "prio", "1",
             "u32", "match", "ip", "src", f"{link.address}/32", "flowid", cid],
        ]
    return cmds


_SENT = re.compile(r"^class htb (\S+) .*?\n\s*Sent (\d+) bytes", re.M)


def class_bytes(tc_output: str) -> dict[str, int]:
    """`tc -s class show` text → {class id: bytes sent}."""
    return {cid: int(n) for cid, n in _SENT.findall(tc_output)}


def link_class_ids(links: Sequence[Link]) -> dict[str, str]:
    """address → class id, in the order tc_commands gives them."""
    return {link.address: class_id(i) for i, link in enumerate(links)}
