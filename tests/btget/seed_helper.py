"""A seed for tests: one libtorrent session in its own process, seeding a dataset.

    python seed_helper.py --ip 127.0.0.9 --port 40001 --torrent X.torrent --data DIR [--upload-rate BYTES]

DIR holds DIR/NAME/<LFN>. Prints `READY ip:port` once the session listens
and the torrent is added (seed mode: no start-up recheck); exits 0 on
SIGTERM/SIGINT. Tests start it with the `procs` fixture, so it is stopped
by PID at teardown.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

import libtorrent as lt

from torrents.servicekit import ltsession


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ip", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--torrent", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--upload-rate", type=int, default=0, help="bytes/s, 0: unlimited")
    ap.add_argument("--lifetime", type=float, default=300.0, help="exit after this many seconds at most")
    args = ap.parse_args()

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    ses = lt.session(ltsession.settings(args.ip, args.port, seeding=True, upload_rate_limit=args.upload_rate))
    if args.upload_rate:
        # Loopback peers fall in libtorrent's "local" peer class, which rate
        # limits skip: put every address in the global class so the limit holds.
        everyone = lt.ip_filter()
        everyone.add_rule("0.0.0.0", "255.255.255.255", 1 << lt.session.global_peer_class_id)
        ses.set_peer_class_filter(everyone)
    atp = lt.add_torrent_params()
    with open(args.torrent, "rb") as f:
        atp.ti = lt.torrent_info(lt.bdecode(f.read()))
    atp.save_path = args.data
    atp.flags |= lt.torrent_flags.seed_mode
    atp.flags &= ~lt.torrent_flags.auto_managed
    atp.flags &= ~lt.torrent_flags.paused
    ses.add_torrent(atp)
    print(f"READY {args.ip}:{ses.listen_port()}", flush=True)
    deadline = time.monotonic() + args.lifetime
    while not stop and time.monotonic() < deadline:
        if ses.wait_for_alert(200) is not None:
            for a in ses.pop_alerts():
                if isinstance(a, (lt.listen_failed_alert, lt.file_error_alert, lt.torrent_error_alert)):
                    print(f"ERROR {a.message()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
