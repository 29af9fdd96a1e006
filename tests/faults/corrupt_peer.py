"""A peer that serves corrupt bytes: a libtorrent session, not in seed mode, over a damaged copy.

    python corrupt_peer.py TORRENT SAVE_PATH IP

A site's seeds run in seed mode, which hashes each piece before its first
send, so a damaged replica never leaves a site (tests/faults/test_sites.py).
Any other peer (a T3's bt-get seeding on, a third-party client) is trusted by
its own libtorrent: this one is added with resume data that claims every
piece (`have_pieces`) and without seed mode, so libtorrent skips the check,
calls itself a seed and sends whatever is on disk. It announces to the
torrent's tracker every second and, like any seed, connects to the leechers
it learns of, again after they hang up on it (from a new port each time).

Prints one JSON line when listening ({"port": N}) and one when stopped by
SIGTERM ({"uploaded": payload bytes sent}).
"""

from __future__ import annotations

import json
import signal
import sys
import time

import libtorrent as lt

from torrents.servicekit import ltsession

REANNOUNCE = 1.0  # seconds


def main(torrent: str, save_path: str, ip: str) -> None:
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    ses = ltsession.session(ip, 0)
    info = lt.torrent_info(torrent)
    atp = lt.add_torrent_params()
    atp.ti = info
    atp.save_path = save_path
    atp.have_pieces = [True] * info.num_pieces()  # "resume data": every piece, unchecked
    atp.flags &= ~(lt.torrent_flags.paused | lt.torrent_flags.auto_managed | lt.torrent_flags.seed_mode)
    handle = ses.add_torrent(atp)
    while not ses.listen_port():
        ses.wait_for_alert(50)
        ses.pop_alerts()
    print(json.dumps({"port": ses.listen_port()}), flush=True)
    deadline = time.monotonic() + 600  # never outlives a test run
    next_announce = 0.0
    while not stop and time.monotonic() < deadline:
        if time.monotonic() >= next_announce:
            handle.force_reannounce(0, -1, lt.reannounce_flags_t.ignore_min_interval)
            next_announce = time.monotonic() + REANNOUNCE
        ses.wait_for_alert(200)
        ses.pop_alerts()
    print(json.dumps({"uploaded": handle.status().total_payload_upload}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
