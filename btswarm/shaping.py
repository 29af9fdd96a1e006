"""Shaped links for a one-host federation: rates and delays, the address → htb class plan, the tc commands. Pure.

A shaped federation runs in a private network namespace whose only device
is its own loopback. Every packet leaves `lo` once, so one htb qdisc at its
root sees all traffic: a u32 filter per source address sends what a site,
a client or the nginx baseline sends into a class of its own, limited to
that address's rate. That is each one's *uplink*; downlinks are free (the
Kumar–Ross bound the benchmarks compare with assumes the same). Unmatched
traffic (tracker, repository, control calls on 127.0.0.1) takes htb's
direct queue, unshaped.

Latency (`100mbit/40ms`): a link's delay is the round-trip time it adds to
every conversation through it, half each way, so a packet from A to B is
held (rtt[A] + rtt[B]) / 2 — a site at 40 ms and a client at 0 ms are
40 ms apart, two at 40 ms 80 ms. `sch_netem` is not on these machines, so
the delay line is a TUN device and a process (btswarm.delayline): a
clsact filter on lo's egress redirects every packet from or to a delayed
address into the TUN device, which has the same htb as lo (shaped first,
then delayed, as on a real uplink); the process reads each packet, holds
it and hands it to lo as received (a packet socket that bypasses lo's
qdisc and tc hooks). Not written back into the TUN device: libtorrent
binds its listening sockets to the device of their address (`ss` shows
127.0.0.2%lo), so a SYN coming in on another device is refused. Without
a delay nothing of this exists and lo is shaped as before.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from torrents.errors import BtswarmError

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(bit|kbit|mbit|gbit)\s*$", re.I)
_SCALE = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9}
_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|ms|s)\s*$", re.I)
_DELAY_SCALE = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
MAX_RTT = 10.0  # s
MIN_MTU = 1280  # what IPv6 needs of a link
MIN_RATE = 64_000  # bit/s: below this one 64 KiB loopback packet takes more than 8 s
MAX_RATE = 100 * 10**9

# lo's own MTU, kept unless `--link-mtu` asks for another. With it a slow link's queue (QUEUE_PACKETS of
# 64 KiB) is a few segments deep: TCP flows from one slow address starve each other for seconds; at MTU
# 9000 (jumbo frames, common on research networks) far less (docs/benchmarks.md "wan").
LO_MTU = 65536
JUMBO_MTU = 9000
# Loopback packets are up to 64 KiB (GSO on lo): a class queue holds at
# least a few of them, and about QUEUE_SECONDS of traffic at its rate
# (as many bytes with a smaller --link-mtu, in more packets).
LO_PACKET = LO_MTU
QUEUE_PACKETS = 4
QUEUE_SECONDS = 0.02

ROOT_HANDLE = "1:"
FIRST_CLASS = 0x10

# The delay line's device. Its MTU is the largest a TUN device takes (lo's
# is 65536, but an IPv4 packet is at most 65535 bytes anyway), so that lo's
# 64 KiB packets pass whole: a packet a read keeps the delay line's CPU per
# GB low (docs/benchmarks.md "wan").
TUN_DEVICE = "btswarm-delay"
TUN_MTU = 65535
TUN_QUEUE = 1000  # packets in the TUN device's ring (a full ring drops; the htb before it shapes)


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


def parse_delay(text: str, subject: str = "delay") -> float:
    """'40ms', '0.1s', '500us' → seconds (0 to MAX_RTT)."""
    m = _DELAY.match(text)
    if not m:
        raise BtswarmError(subject, f"{text!r} is not a delay (examples: 40ms, 0.1s)")
    seconds = float(m.group(1)) * _DELAY_SCALE[m.group(2).lower()]
    if seconds > MAX_RTT:
        raise BtswarmError(subject, f"{text!r} is out of range (0 to {MAX_RTT:g}s)")
    return seconds


def format_delay(seconds: float) -> str:
    return f"{seconds * 1e3:g}ms"


@dataclass(frozen=True)
class LinkSpec:
    """What one `--site-link`/`--client-link` value asks: `rate` bit/s, adding `rtt` s to each round trip."""
    rate: int
    rtt: float = 0.0

    def __str__(self) -> str:
        return format_rate(self.rate) + (f"/{format_delay(self.rtt)}" if self.rtt else "")


def parse_link(text: str, subject: str = "link") -> LinkSpec:
    """'100mbit' or '100mbit/40ms' → LinkSpec."""
    rate, sep, delay = text.partition("/")
    return LinkSpec(parse_rate(rate, subject), parse_delay(delay, subject) if sep else 0.0)


def format_rate(bps: int) -> str:
    for unit, scale in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if bps >= scale:
            value = bps / scale
            return f"{value:g}{unit}" if value == round(value, 3) else f"{value:.3f}{unit}"
    return f"{bps}bit"


def parse_keyed_links(values: Iterable[str], option: str) -> tuple[LinkSpec | None, dict[str, LinkSpec]]:
    """`--site-link` style values: 'RATE[/RTT]' (the default for all) or 'NAME=RATE[/RTT]' (one), any number
    of each.

    → (default or None, {name: spec}). A second default, or a name given
    twice, is an error naming the option.
    """
    default: LinkSpec | None = None
    named: dict[str, LinkSpec] = {}
    for value in values:
        key, sep, link = value.rpartition("=")
        if not sep:
            if default is not None:
                raise BtswarmError(option, f"two default rates ({default} and {value})")
            default = parse_link(value, option)
            continue
        key = key.strip()
        if not key:
            raise BtswarmError(option, f"{value!r}: no name before '='")
        if key in named:
            raise BtswarmError(option, f"{key} is given twice")
        named[key] = parse_link(link, f"{option} {key}")
    return default, named


@dataclass(frozen=True)
class Link:
    """One shaped uplink: what `address` sends goes out at most at `rate` bit/s; `rtt` s added to its
    round trips (half on the way out, half on the way in)."""
    address: str
    rate: int
    label: str  # 'site1', 'client 127.0.0.101', 'baseline'
    rtt: float = 0.0

    @property
    def spec(self) -> LinkSpec:
        return LinkSpec(self.rate, self.rtt)

    def as_dict(self) -> dict:
        return {"address": self.address, "rate": self.rate, "rate_text": format_rate(self.rate), "label": self.label,
                **({"rtt": float(self.rtt)} if self.rtt else {})}


@dataclass(frozen=True)
class LinkOptions:
    """What the command line asked for (`--site-link`, `--client-link`, `--client-addresses`)."""
    site_default: LinkSpec | None = None
    site_links: tuple[tuple[str, LinkSpec], ...] = ()  # (site name, link) overrides
    client: LinkSpec | None = None
    client_addresses: int = 32
    mtu: int = LO_MTU  # the namespace's lo (--link-mtu)

    @property
    def shaped(self) -> bool:
        return self.site_default is not None or bool(self.site_links) or self.client is not None

    @classmethod
    def parse(cls, site_link: Sequence[str] = (), client_link: str | None = None,
              client_addresses: int = 32, mtu: int = LO_MTU) -> "LinkOptions":
        default, named = parse_keyed_links(site_link, "--site-link")
        if not MIN_MTU <= mtu <= LO_MTU:
            raise BtswarmError("--link-mtu", f"{mtu} is out of range ({MIN_MTU}-{LO_MTU} bytes)")
        opts = cls(default, tuple(sorted(named.items())),
                   parse_link(client_link, "--client-link") if client_link else None, client_addresses, mtu)
        if mtu != LO_MTU and not opts.shaped:
            raise BtswarmError("--link-mtu", "applies to shaped links only (add --site-link or --client-link)")
        return opts


def plan(opts: LinkOptions, sites: Sequence[tuple[str, str]], clients: Sequence[str],
         baseline: str | None) -> tuple[Link, ...]:
    """The links: each site (name, address) at its rate, each client address at the client rate, and the
    baseline address (nginx in the benchmarks) at the sites' default rate. Unrated ones stay unshaped."""
    names = {name for name, _ in sites}
    for name, _ in opts.site_links:
        if name not in names:
            raise BtswarmError("--site-link", f"no site {name} (sites: {', '.join(n for n, _ in sites)})")
    specs = dict(opts.site_links)
    asked = [(ip, specs.get(name, opts.site_default), name) for name, ip in sites]
    if opts.client is not None:
        asked += [(ip, opts.client, f"client {ip}") for ip in clients]
    if baseline is not None and opts.site_default is not None:
        asked.append((baseline, opts.site_default, "baseline"))
    links = [Link(ip, spec.rate, label, spec.rtt) for ip, spec, label in asked if spec is not None]
    seen: dict[str, str] = {}
    for link in links:
        if link.address in seen:
            raise BtswarmError(link.address, f"shaped twice ({seen[link.address]} and {link.label}); "
                                             "use fewer sites")
        if not link.address.startswith("127."):
            raise BtswarmError(link.address, "not a loopback address")
        seen[link.address] = link.label
    return tuple(links)


def queue_bytes(rate: int, rtt: float = 0.0) -> int:
    """Byte limit of a class's fifo: QUEUE_SECONDS at its rate, or the link's round trip if longer (one
    bandwidth-delay product, the classic router buffer), at least QUEUE_PACKETS loopback packets.

    A fifo shorter than the round trip leaves a long path's TCP flow short of the rate (CUBIC backs off
    at every tail drop and a short queue cannot cover the window it lost); one round trip fills it
    (docs/benchmarks.md "wan").
    """
    return max(QUEUE_PACKETS * LO_PACKET, int(rate / 8 * max(QUEUE_SECONDS, rtt)))


def class_id(index: int) -> str:
    return f"1:{FIRST_CLASS + index:x}"


def mtu_commands(mtu: int, dev: str = "lo") -> list[list[str]]:
    """The ip argv list that sets `dev`'s MTU, when it is not lo's own."""
    return [] if mtu == LO_MTU else [["ip", "link", "set", "dev", dev, "mtu", str(mtu)]]


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
             "limit", str(queue_bytes(link.rate, link.rtt))],
            ["tc", "filter", "add", "dev", dev, "parent", ROOT_HANDLE, "protocol", "ip", "prio", "1",
             "u32", "match", "ip", "src", f"{link.address}/32", "flowid", cid],
        ]
    return cmds


_SENT = re.compile(r"^class htb (\S+) .*?\n\s*Sent (\d+) bytes", re.M)


def class_bytes(tc_output: str) -> dict[str, int]:
    """`tc -s class show` text → {class id: bytes sent}."""
    return {cid: int(n) for cid, n in _SENT.findall(tc_output)}


def delayed(links: Sequence[Link]) -> bool:
    return any(link.rtt > 0 for link in links)


def delay_commands(links: Sequence[Link], dev: str = "lo", tun: str = TUN_DEVICE) -> list[list[str]]:
    """ip/tc argv lists that put the delay line between `dev` and its receivers: the TUN device, shaped
    like `dev`, and `dev`'s egress redirect of every packet from or to a delayed address. [] when no link
    has a delay."""
    if not delayed(links):
        return []
    cmds = [*tun_commands(tun, TUN_MTU),
            *tc_commands(links, tun),
            # clsact's egress hook runs before the root qdisc: a redirected packet is shaped once, on tun.
            ["tc", "qdisc", "add", "dev", dev, "clsact"]]
    for link in links:
        if link.rtt > 0:
            cmds += [["tc", "filter", "add", "dev", dev, "egress", "protocol", "ip", "prio", "1", "u32",
                      "match", "ip", way, f"{link.address}/32", "action", "mirred", "egress", "redirect", "dev", tun]
                     for way in ("src", "dst")]
    return cmds


def tun_commands(tun: str, mtu: int) -> list[list[str]]:
    """The delay line's TUN device, up (the process attaches to it by name)."""
    return [["ip", "tuntap", "add", "dev", tun, "mode", "tun"],
            ["ip", "link", "set", "dev", tun, "mtu", str(mtu), "txqueuelen", str(TUN_QUEUE), "up"]]


# A classic BPF classifier (cls_bpf) where u32 cannot do it: this kernel's u32 ignores `match mark`, and
# the delay line's own packets (marked) must pass the redirect that fed it. Opcodes from linux/filter.h.
_LD_ABS_W, _JEQ_K, _RET_K = 0x20, 0x15, 0x06
_SKF_AD_MARK = 0xFFFFF000 + 20  # SKF_AD_OFF + SKF_AD_MARK: the packet's mark, not its bytes
ETH_HEADER = 14  # cls_bpf sees an Ethernet device's frames from their MAC header, at egress too


def unmarked_bpf(destinations: Sequence[str] | None, l3_offset: int = ETH_HEADER) -> str:
    """`tc ... bpf bytecode` text matching an unmarked IPv4 packet, to any of `destinations` (None: to any
    address). Every jump is at most one instruction, so any number of destinations fits."""
    prog = [(_LD_ABS_W, 0, 0, _SKF_AD_MARK), (_JEQ_K, 1, 0, 0), (_RET_K, 0, 0, 0)]  # marked: no match
    if destinations is None:
        prog.append((_RET_K, 0, 0, 0xFFFFFFFF))
    else:
        prog.append((_LD_ABS_W, 0, 0, l3_offset + 16))  # the IPv4 destination
        for address in destinations:
            prog += [(_JEQ_K, 0, 1, int(ipaddress.IPv4Address(address))), (_RET_K, 0, 0, 0xFFFFFFFF)]
        prog.append((_RET_K, 0, 0, 0))
    return ",".join([str(len(prog)), *(" ".join(map(str, ins)) for ins in prog)])


def delay_sysctls(dev: str = "lo") -> list[tuple[str, str]]:
    """(key under /proc/sys, value): a packet the delay line hands to `dev` has no route attached (one
    that loops back on lo keeps its output route), so the kernel looks one up and would drop it, from
    and to 127.x, as martian (route_localnet) and from a local address as spoofed (accept_local,
    rp_filter; the effective rp_filter is the larger of `all` and the device's)."""
    conf = f"net/ipv4/conf/{dev}"
    return [(f"{conf}/route_localnet", "1"), (f"{conf}/accept_local", "1"), (f"{conf}/rp_filter", "0"),
            ("net/ipv4/conf/all/rp_filter", "0")]


def delays(links: Sequence[Link]) -> dict[str, float]:
    """address → the round trip its link adds (s), for the delay line; only the delayed ones."""
    return {link.address: link.rtt for link in links if link.rtt > 0}


def link_class_ids(links: Sequence[Link]) -> dict[str, str]:
    """address → class id, in the order tc_commands gives them."""
    return {link.address: class_id(i) for i, link in enumerate(links)}
