"""A federation of hosts (`btswarm up --hosts`): which hosts, their addresses, MACs, links and the commands
that build them. Pure.

Each part runs on a host of its own, as deployed: one host for the
tracker and the repository, one per site, and the T3 hosts `btswarm run
--host` enters. A host is a network namespace with its own stack and one
veth, whose other end is on a bridge in a namespace of its own (the
"lan"), so that the root namespace gets nothing new. Only loopback-range
addresses are allowed here: every host's veth holds a 127.20.x.y/16
(routed and ARPed because route_localnet is on), and its `lo` only
127.0.0.1/32, so that 127.0.0.1 means "this host" as on a real machine
and 127.0.0.2.. are not local anywhere. Namespaces isolate: two
federations of hosts use the same addresses on bridges of their own.

A host's uplink is its veth's egress: the shaping plan's htb (btswarm.shaping)
with one class for the host's address, so what the host sends leaves
through one real qdisc, as on a real NIC. Downlinks are free, as on the
shared loopback.

Round-trip times (`--site-link 100mbit/40ms`) follow the shared loopback's
model (btswarm.delayline): a packet from A to B is held (rtt[A] + rtt[B]) / 2,
so A and B are rtt[A] + rtt[B] apart. `tc` has no netem here, so each host
runs the one delay line there is (btswarm.tundelay) on its own stack: a
clsact filter on the veth's egress redirects what must be held (all the
host sends when its own link has a delay, else what it sends to a delayed
host) into a TUN device; the process holds each packet, then sends it out
of the veth again as an Ethernet frame, addressed to the MAC that follows
from the destination's address (no ARP asked), and marked, so that the
redirect lets it pass and it goes through the uplink's htb like every
other packet: one qdisc per host carries everything the host sends. The
order is delay, then shaping: the htb's queue is the link's bottleneck
buffer, one bandwidth-delay product of the longest round trip through it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from btswarm import shaping
from btswarm.shaping import Link, LinkOptions
from torrents.errors import BtswarmError

NETWORK = ipaddress.ip_network("127.20.0.0/16")
SERVICES = "services"  # the tracker's and the repository's host
LAN = "lan"  # the bridge's namespace; `btswarm up` itself watches the federation from there
LAN_ADDRESS = "127.20.255.254"
BRIDGE = "br0"
DEV = "eth0"  # each host's interface, as on a real machine
MTU = 1500
MAX_HOSTS_PER_ROLE = 250

# Each host has its own stack, so every service takes its usual port, as the docs' examples do.
TRACKER_PORT = 6969
REPO_PORT = 8080
SITE_CONTROL_PORT = 8700
SITE_PEER_PORT = 6881
SITE_WEB_PORT = 8701
ISSUER_PORT = 8443  # btswarm up --restricted: the test bed's token issuer, on the services' host
T3_PEER_PORT = 6882  # a T3 host's bt-server (bt-get --share) beside the bt-gets that choose free ports


@dataclass(frozen=True)
class Host:
    name: str  # 'services', 'site1', 't3-1'
    role: str  # 'services', 'site', 't3'
    address: str
    netns: str
    link: shaping.LinkSpec | None = None  # its uplink; None: unshaped

    @property
    def mac(self) -> str:
        return mac_of(self.address)

    @property
    def peer_dev(self) -> str:
        """The veth's other end, on the bridge (at most 15 characters: IFNAMSIZ)."""
        return f"v-{self.name}"[:15]


@dataclass(frozen=True)
class HostPlan:
    lan: str  # the bridge's namespace
    hosts: tuple[Host, ...]

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def of_role(self, role: str) -> tuple[Host, ...]:
        return tuple(h for h in self.hosts if h.role == role)

    @property
    def namespaces(self) -> tuple[str, ...]:
        """Every namespace, the lan first (each host's veth has its other end moved there)."""
        return (self.lan, *(h.netns for h in self.hosts))

    def links(self) -> tuple[Link, ...]:
        """The shaped hosts' uplinks, labelled by host name."""
        return tuple(Link(h.address, h.link.rate, h.name, h.link.rtt) for h in self.hosts if h.link is not None)

    def delays(self) -> dict[str, float]:
        """address → the round trip its uplink adds (s), the delayed hosts only: every host's delay line holds
        its packets by this table."""
        return shaping.delays(self.links())

    def longest_rtt(self, h: Host) -> float:
        """The longest round trip a delay line makes through host `h`'s uplink (s): its own and the
        farthest other host's."""
        own = h.link.rtt if h.link is not None else 0.0
        return own + max((rtt for a, rtt in self.delays().items() if a != h.address), default=0.0)


def site_address(index: int) -> str:
    """Site i (0-based) on 127.20.1.(i+1)."""
    return _address(1, index)


def t3_address(index: int) -> str:
    """T3 host k (0-based) on 127.20.2.(k+1)."""
    return _address(2, index)


SERVICES_ADDRESS = "127.20.0.1"


def _address(block: int, index: int) -> str:
    if not 0 <= index < MAX_HOSTS_PER_ROLE:
        raise ValueError(f"host index {index} out of range")
    return f"127.20.{block}.{index + 1}"


def t3_name(index: int) -> str:
    return f"t3-{index + 1}"


def mac_of(address: str) -> str:
    """A locally administered unicast MAC holding the IPv4 address: 127.20.1.2 → 02:00:7f:14:01:02."""
    return "02:00:" + ":".join(f"{b:02x}" for b in ipaddress.IPv4Address(address).packed)


def plan(prefix: str, sites: Sequence[str], t3_hosts: int, links: LinkOptions) -> HostPlan:
    """The hosts of a federation: services, one per site (names in order), `t3_hosts` T3s; namespaces
    PREFIX-NAME. The sites' hosts take --site-link, the T3 hosts --client-link, each rate with its RTT."""
    if not 1 <= t3_hosts <= MAX_HOSTS_PER_ROLE:
        raise BtswarmError("--t3-hosts", f"{t3_hosts} is out of range (1-{MAX_HOSTS_PER_ROLE})")
    if len(sites) > MAX_HOSTS_PER_ROLE:
        raise BtswarmError("--sites", f"{len(sites)} is out of range with --hosts (1-{MAX_HOSTS_PER_ROLE})")
    for name, _ in links.site_links:
        if name not in sites:
            raise BtswarmError("--site-link", f"no site {name} (sites: {', '.join(sites)})")
    specs = dict(links.site_links)
    hosts = [Host(SERVICES, "services", SERVICES_ADDRESS, f"{prefix}-{SERVICES}")]
    hosts += [Host(name, "site", site_address(i), f"{prefix}-{name}", specs.get(name, links.site_default))
              for i, name in enumerate(sites)]
    hosts += [Host(t3_name(k), "t3", t3_address(k), f"{prefix}-{t3_name(k)}", links.client) for k in range(t3_hosts)]
    return HostPlan(f"{prefix}-{LAN}", tuple(hosts))


# --- the commands: argv lists, each run as `CMD -n NAMESPACE ARGS` by btswarm.hostnet ---------------
Step = tuple[str, list[str]]  # (namespace, argv without `-n NAMESPACE`)


def lan_steps(p: HostPlan) -> list[Step]:
    """The bridge, and an address on it for `btswarm up` (and a test) to watch every host from."""
    return [(p.lan, ["ip", "link", "set", "dev", "lo", "up"]),
            (p.lan, ["ip", "link", "add", "dev", BRIDGE, "mtu", str(MTU), "type", "bridge"]),
            (p.lan, ["ip", "link", "set", "dev", BRIDGE, "address", mac_of(LAN_ADDRESS), "up"]),
            # `scope global`: ip gives a 127.x address scope host, which is never a source towards a link
            (p.lan, ["ip", "addr", "add", f"{LAN_ADDRESS}/{NETWORK.prefixlen}", "dev", BRIDGE, "scope", "global"])]


def host_steps(p: HostPlan, h: Host) -> list[Step]:
    """One host: lo with 127.0.0.1/32 only (::1 stays), the veth with its address, MAC and MTU, its other
    end on the bridge, and the uplink's htb."""
    steps: list[Step] = [
        (h.netns, ["ip", "link", "set", "dev", "lo", "up"]),  # this adds 127.0.0.1/8 ...
        (h.netns, ["ip", "addr", "del", "127.0.0.1/8", "dev", "lo"]),  # ... which would make 127.20.x local
        (h.netns, ["ip", "addr", "add", "127.0.0.1/32", "dev", "lo"]),
        # created here, the other end moved at once: neither end ever exists in the root namespace
        (h.netns, ["ip", "link", "add", "dev", DEV, "mtu", str(MTU), "address", h.mac, "type", "veth",
                   "peer", "name", h.peer_dev, "mtu", str(MTU), "netns", p.lan]),
        (p.lan, ["ip", "link", "set", "dev", h.peer_dev, "master", BRIDGE, "up"]),
        (h.netns, ["ip", "addr", "add", f"{h.address}/{NETWORK.prefixlen}", "dev", DEV, "scope", "global"]),
        (h.netns, ["ip", "link", "set", "dev", DEV, "up"]),
    ]
    if h.link is not None:
        uplink = Link(h.address, h.link.rate, h.name, p.longest_rtt(h))  # its queue: one BDP of that round trip
        steps += [(h.netns, cmd) for cmd in shaping.tc_commands([uplink], DEV)]
    return steps + delay_steps(p, h)


DELAY_DEV = shaping.TUN_DEVICE
DELAY_MARK = 0xB7  # on the frames the delay line sends, so that its redirect lets them pass


def delay_steps(p: HostPlan, h: Host) -> list[Step]:
    """Host `h`'s delay line, when any host's link has a delay: the TUN device (Ethernet's MTU) and the
    redirect into it of every unmarked IPv4 packet `h` sends that is held (all of them when its own link
    has a delay, else those to a delayed host). [] with no delay anywhere."""
    delays = p.delays()
    if not delays:
        return []
    held = None if h.address in delays else sorted(delays, key=ipaddress.IPv4Address)
    return [(h.netns, cmd) for cmd in shaping.tun_commands(DELAY_DEV, MTU)] + [
        (h.netns, ["tc", "qdisc", "add", "dev", DEV, "clsact"]),
        (h.netns, ["tc", "filter", "add", "dev", DEV, "egress", "protocol", "ip", "prio", "1", "bpf", "bytecode",
                   shaping.unmarked_bpf(held), "action", "mirred", "egress", "redirect", "dev", DELAY_DEV])]


def sysctls() -> list[tuple[str, str]]:
    """(key under /proc/sys, value) in each namespace before its devices: 127.x is martian on any device
    but lo unless route_localnet is on (routing and ARP both ask; the effective value is `all` or the
    device's, which inherits `default`). No IPv6 on the new devices: a link-local fe80:: address is
    outside the loopback range, and IPv6 stays ::1 within one host."""
    return [("net/ipv4/conf/all/route_localnet", "1"), ("net/ipv4/conf/default/route_localnet", "1"),
            ("net/ipv6/conf/default/disable_ipv6", "1")]


def class_id() -> str:
    """The htb class of a host's uplink (its only one)."""
    return shaping.class_id(0)
