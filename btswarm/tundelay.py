"""The delay line's process: packets from a TUN device held for their delay, then received on lo (root),
or sent out of a host's Ethernet device (`--dev eth0`, on the hosts test bed).

`btswarm up` starts it (`running`) inside the federation's namespace (or
each host's), after btswarm.shaping's (btswarm.hosts') commands made the
device and the redirect, and stops it by its PID. What it decides is
btswarm.delayline; this is the TUN descriptor and the loop: read what the
device lets out, hold it, hand it on: to lo as received (btswarm.shaping
says why not back into the TUN device), or out of `--dev` as a frame to
the MAC that follows from the destination's address (btswarm.hosts.mac_of),
marked (`--mark`) so that the redirect lets it pass to the htb. It runs as
a real-time process (SCHED_FIFO, the lowest priority; nice -10 where that
is refused), as the kernel's own network path would: on a loaded host a
delay line scheduled late adds delay nobody asked for (docs/benchmarks.md
"wan").
Its cost is per packet (a read, a send, a wake-up or two): small per GB
in lo's 64 KiB packets, several times that on a host, whose TCP
segments at 100 Mbit/s are ~10 KB (and whose ACKs are packets too), so the
priority takes little from anyone.

    python -m btswarm.tundelay --tun btswarm-delay 127.0.0.2=0.04 127.0.0.101=0.1
    python -m btswarm.tundelay --dev eth0 --mark 183 127.20.1.1=0.1  # in a host's namespace
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from btswarm import hosts, netns, shaping, statelock
from btswarm.delayline import EARLY, DelayTable, Schedule
from torrents.errors import BtswarmError

TUNSETIFF = 0x400454CA
TUNSETOFFLOAD = 0x400454D0
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000  # bare IP packets, no 4-byte header
IFF_VNET_HDR = 0x4000  # each packet behind a virtio-net header: TCP's segments stay whole (GSO)
TUN_F_CSUM, TUN_F_TSO4, TUN_F_TSO6, TUN_F_TSO_ECN = 0x01, 0x02, 0x04, 0x08
VNET_HDR = 10  # struct virtio_net_hdr: flags, gso_type, hdr_len, gso_size, csum_start, csum_offset (little-endian)
VNET_NEEDS_CSUM = 0x01
PACKET_VNET_HDR = 15
ETH_P_IP = 0x0800
SOL_PACKET = 263
PACKET_QDISC_BYPASS = 20
LO_ADDRESS = ("lo", ETH_P_IP, 0, 0, bytes(6))  # lo's MAC is all zeros: the packet is for this host
READ_SIZE = 65536 + VNET_HDR  # the largest IPv4 packet, whole (the device's MTU is 65535), and its header
BATCH = 64  # packets read before what is due is written
READY = "ready"
START_TIMEOUT = 10.0


def open_tun(name: str, gso: bool = False) -> int:
    """A non-blocking descriptor on the existing TUN device `name`; `gso`: packets come whole as TCP sent
    them (up to 64 KiB, their checksums to fill in), each behind a virtio-net header saying how to cut it.
    A 1500-byte MTU otherwise costs the delay line a read and a send per segment."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        flags = IFF_TUN | IFF_NO_PI | (IFF_VNET_HDR if gso else 0)
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), flags))
        if gso:
            fcntl.ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN)
    except OSError as exc:
        os.close(fd)
        raise BtswarmError(name, f"cannot attach to the TUN device ({exc.strerror})") from None
    return fd


def open_lo(dev: str = "lo") -> socket.socket:
    """A packet socket that hands IPv4 packets to `dev` as received, bypassing its qdiscs and tc hooks
    (a packet sent so is not redirected into the delay line again, nor shaped twice)."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP))
    sock.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)
    sock.bind((dev, ETH_P_IP))
    return sock


SO_SNDBUFFORCE = 32  # linux/socket.h (Python names no constant for it): SO_SNDBUF past wmem_max, as root
SNDBUF = 64 * 2**20  # the htb after the delay line drops (ENOBUFS) what its queue cannot hold; never block


class ToLo:
    """Held packets handed to lo, as received (open_lo)."""

    header = 0  # bytes before each packet read from the TUN device

    def __init__(self) -> None:
        self.sock = open_lo()

    def send(self, packet: bytes) -> None:
        self.sock.sendto(packet, LO_ADDRESS)


class ToEthernet:
    """Held packets sent out of Ethernet device `dev` (a host's veth) to the MAC of their destination
    (btswarm.hosts.mac_of), marked `mark`, through the device's qdisc (the uplink's htb); whole, behind the
    virtio-net header the TUN device gave them (open_tun's `gso`), so that the kernel cuts them as TCP
    would have."""

    header = VNET_HDR

    def __init__(self, dev: str, mark: int) -> None:
        # SOCK_RAW, the Ethernet header ours: the kernel takes a virtio-net header on no other kind.
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IP))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, mark)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, SNDBUF)
        self.sock.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
        self.sock.bind((dev, ETH_P_IP))
        self._own_mac = self.sock.getsockname()[4]
        self._eth: dict[bytes, bytes] = {}  # destination address → Ethernet header

    def send(self, packet: bytes) -> None:
        h = self.header
        dst = packet[h + 16:h + 20]
        eth = self._eth.get(dst)
        if eth is None:
            mac = bytes.fromhex(hosts.mac_of(socket.inet_ntoa(dst)).replace(":", ""))
            eth = self._eth[dst] = mac + self._own_mac + ETH_P_IP.to_bytes(2, "big")
        vnet = packet[:h]
        if vnet[0] & VNET_NEEDS_CSUM:  # where the checksum starts, counted from the frame's first byte here
            start = int.from_bytes(vnet[6:8], "little") + len(eth)
            vnet = vnet[:6] + start.to_bytes(2, "little") + vnet[8:]
        self.sock.sendmsg([vnet, eth, memoryview(packet)[h:]])


Output = ToLo | ToEthernet


def serve(fd: int, table: DelayTable, stop_fd: int, out: "Output | None" = None) -> dict:
    """Until `stop_fd` is readable: hold every packet read from `fd` for its delay, then hand it to `out`
    (lo by default). → counters (packets, bytes, dropped, how late packets left)."""
    poller = select.epoll()
    poller.register(fd, select.EPOLLIN)
    poller.register(stop_fd, select.EPOLLIN)
    schedule = Schedule()
    out = out or ToLo()
    stats = {"packets": 0, "bytes": 0, "dropped": 0, "late_max_ms": 0.0, "late_sum_ms": 0.0, "held_max": 0}
    while True:
        now = time.monotonic()
        for due, packet in schedule.pop_due(now):
            late = (now - due) * 1e3
            stats["late_max_ms"] = max(stats["late_max_ms"], late)
            stats["late_sum_ms"] += late
            try:
                out.send(packet)
            except OSError:
                stats["dropped"] += 1
                continue
            stats["packets"] += 1
            stats["bytes"] += len(packet)
        due = schedule.next_due()
        events = poller.poll(-1 if due is None else max(0.0, due - time.monotonic() - EARLY))
        if any(efd == stop_fd for efd, _ in events):
            return stats
        now = time.monotonic()
        for _ in range(BATCH):
            try:
                packet = os.read(fd, READ_SIZE)
            except BlockingIOError:
                break
            delay = table.of_packet(packet, out.header)
            if delay is None:
                stats["dropped"] += 1
                continue
            schedule.push(now, delay, packet)
        stats["held_max"] = max(stats["held_max"], schedule.held)


def _parse_rtts(values: Sequence[str]) -> dict[str, float]:
    out = {}
    for value in values:
        address, _, rtt = value.partition("=")
        out[address] = float(rtt)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m btswarm.tundelay", description=__doc__.splitlines()[0])
    ap.add_argument("--tun", default=shaping.TUN_DEVICE)
    ap.add_argument("--dev", default="lo", help="where held packets go: lo (received) or an Ethernet device (sent)")
    ap.add_argument("--mark", type=int, default=0, help="the mark of the packets sent out of --dev")
    ap.add_argument("rtts", nargs="+", metavar="ADDRESS=RTT", help="an address and its round trip in seconds")
    args = ap.parse_args(argv)
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(os.sched_get_priority_min(os.SCHED_FIFO)))
    except OSError:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, -10)
    out = ToLo() if args.dev == "lo" else ToEthernet(args.dev, args.mark)
    fd = open_tun(args.tun, gso=out.header > 0)
    stop_r, stop_w = os.pipe()
    os.set_blocking(stop_w, False)
    signal.set_wakeup_fd(stop_w)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)  # the wakeup byte ends serve()
    print(READY, flush=True)
    t0, cpu0 = time.monotonic(), time.process_time()
    stats = serve(fd, DelayTable(_parse_rtts(args.rtts)), stop_r, out)
    stats.update(seconds=round(time.monotonic() - t0, 3), cpu_seconds=round(time.process_time() - cpu0, 3),
                 late_mean_ms=round(stats["late_sum_ms"] / max(1, stats["packets"]), 3))
    print(json.dumps(stats), file=sys.stderr, flush=True)
    return 0


@contextlib.contextmanager
def running(links: Sequence[shaping.Link], log_path: Path, tun: str = shaping.TUN_DEVICE, *, dev: str = "lo",
            mark: int = 0, netns_name: str | None = None) -> Iterator[subprocess.Popen | None]:
    """The delay line for `links` running for the block, in network namespace `netns_name` (None: the
    caller's), handing held packets to `dev`; None and nothing started when no link has a delay. Its stderr
    (the counters at exit) goes to `log_path`."""
    rtts = shaping.delays(links)
    if not rtts:
        yield None
        return
    argv = [sys.executable, "-m", "btswarm.tundelay", "--tun", tun, "--dev", dev, "--mark", str(mark),
            *(f"{a}={r!r}" for a, r in rtts.items())]
    enter = netns.preexec(netns_name)

    def preexec() -> None:
        statelock.die_with_parent()
        enter()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                                preexec_fn=preexec)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT)
        line = proc.stdout.readline().decode(errors="replace").strip() if ready else ""
        if line != READY:
            raise BtswarmError("delay line", f"did not start (see {log_path})")
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        proc.stdout.close()


if __name__ == "__main__":
    sys.exit(main())
