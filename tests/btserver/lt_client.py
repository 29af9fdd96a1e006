"""A tiny real libtorrent client for the tests, run as its own process.

    python lt_client.py TORRENT SAVE_DIR PEER_IP:PORT LISTEN_IP TIMEOUT

Adds the torrent, connects to the given peer, and waits (bounded) for
torrent_finished_alert. Exit 0 and 'finished' on stdout when done, 1 on
timeout or error, with the reason on stderr.
"""

from __future__ import annotations

import sys
import time

import libtorrent as lt

from torrents.servicekit import ltsession


def main(torrent: str, save: str, peer: str, listen_ip: str, timeout: float) -> int:
    ses = lt.session(ltsession.settings(listen_ip))
    atp = lt.add_torrent_params()
    atp.ti = lt.torrent_info(torrent)
    atp.save_path = save
    handle = ses.add_torrent(atp)
    host, port = peer.rsplit(":", 1)
    handle.connect_peer((host, int(port)))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ses.wait_for_alert(200)
        for alert in ses.pop_alerts():
            if isinstance(alert, lt.torrent_finished_alert):
                st = handle.status()
                print(f"finished {st.total_payload_download}")
                return 0
            if isinstance(alert, (lt.torrent_error_alert, lt.file_error_alert)):
                print(f"error: {alert.message()}", file=sys.stderr)
                return 1
    st = handle.status()
    print(f"timeout after {timeout} s: progress {st.progress:.3f}, peers {st.num_peers}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])))
