"""A real libtorrent client for the tracker's tests, run as its own process.

    python lt_client.py TORRENT SAVE_DIR LISTEN_IP TIMEOUT

Prints one JSON line per event on stdout: the first tracker reply (with how
many peers it carried) and the finish; exits 0 when the download is complete.
"""

from __future__ import annotations

import json
import sys
import time

import libtorrent as lt

from torrents.servicekit import ltsession


def main() -> int:
    torrent, save, ip, timeout = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    ses = ltsession.session(ip)
    params = lt.add_torrent_params()
    params.ti = lt.torrent_info(torrent)
    params.save_path = save
    ses.add_torrent(params)
    deadline = time.monotonic() + timeout
    replies = 0
    while time.monotonic() < deadline:
        if not ses.wait_for_alert(500):
            continue
        for alert in ses.pop_alerts():
            if isinstance(alert, lt.tracker_reply_alert):
                replies += 1
                if replies == 1:
                    print(json.dumps({"event": "tracker_reply", "num_peers": alert.num_peers}), flush=True)
            elif isinstance(alert, lt.tracker_error_alert):
                print(json.dumps({"event": "tracker_error", "message": alert.message()}), flush=True)
            elif isinstance(alert, lt.torrent_finished_alert):
                print(json.dumps({"event": "finished", "tracker_replies": replies}), flush=True)
                return 0
    print(json.dumps({"event": "timeout"}), flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
