#!/usr/bin/env python3
"""Does an HTTP door answer pipelined requests? (A web seed's door: docs/webseeds.md.)

libtorrent sends several range requests to a web seed in one write (5 by
default) and waits for them in order. A server that answers only what it
read first stalls it until `urlseed_timeout`. This sends N requests for
consecutive 16 KiB ranges of URL in one write, then the same one at a time
on one connection, and says how many of each were answered.

    python3 scripts/probe_pipelining.py http://127.0.0.1:28443/data/f.bin --count 5

Measured with Debian's xrootd-server 5.5.3 (XrdHttp): 1 of 2 and 1 of 5
pipelined answered (the rest never, the connection left open), 5 of 5 one
at a time; a request that arrives after the server's read is answered, and
each new request releases one that was waiting in its buffer.
"""

from __future__ import annotations

import argparse
import re
import socket
import sys
import time
import urllib.parse

BLOCK = 16384


def request(host: str, path: str, start: int) -> bytes:
    return (f"GET {path} HTTP/1.1\r\nHost: {host}\r\nRange: bytes={start}-{start + BLOCK - 1}\r\n"
            "User-Agent: btswarm-probe\r\n\r\n").encode()


def answers(sock: socket.socket, want: int, wait: float) -> int:
    """How many whole answers (headers and Content-Length bytes) arrive within `wait` seconds."""
    buf, got, deadline = b"", 0, time.monotonic() + wait
    sock.settimeout(0.2)
    while got < want and time.monotonic() < deadline:
        try:
            chunk = sock.recv(1 << 20)
        except socket.timeout:
            continue
        if not chunk:
            break
        buf += chunk
        while (end := buf.find(b"\r\n\r\n")) >= 0:
            length = re.search(rb"(?im)^content-length:\s*(\d+)", buf[:end])
            size = int(length.group(1)) if length else 0
            if len(buf) < end + 4 + size:
                break
            buf, got = buf[end + 4 + size:], got + 1
    return got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="an http:// URL of a file of at least COUNT × 16 KiB")
    parser.add_argument("--count", type=int, default=5, help="requests pipelined (libtorrent: 5)")
    parser.add_argument("--wait", type=float, default=5.0, help="seconds to wait for the answers")
    args = parser.parse_args()
    url = urllib.parse.urlsplit(args.url)
    if url.scheme != "http" or not url.hostname:
        parser.error(f"{args.url}: an http:// URL")
    address = (url.hostname, url.port or 80)
    host = url.netloc
    path = url.path or "/"
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(b"".join(request(host, path, k * BLOCK) for k in range(args.count)))
        pipelined = answers(sock, args.count, args.wait)
    with socket.create_connection(address, timeout=10) as sock:
        one_by_one = 0
        for k in range(args.count):
            sock.sendall(request(host, path, k * BLOCK))
            one_by_one += answers(sock, 1, args.wait)
    print(f"{args.url}: pipelined {pipelined} of {args.count} answered; one at a time {one_by_one} of {args.count}")
    return 0 if pipelined == args.count == one_by_one else 1


if __name__ == "__main__":
    sys.exit(main())
