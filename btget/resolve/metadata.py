"""A magnet link's metadata (the info dict) fetched from peers (BEP 9), in its own process.

Used only when the repository does not know the magnet's dataset. The
libtorrent session runs in a process of its own (spawned: it runs while the
parent's event loop has threads, which a fork would copy half-held), and hands back
the .torrent bytes; the caller waits in an executor, never on its event loop.
"""

from __future__ import annotations

import multiprocessing
import time
from multiprocessing.connection import Connection
from typing import Sequence

from btget.errors import Incomplete

POLL_MS = 200


def fetch_metadata(uri: str, peers: Sequence[tuple[str, int]], listen_ip: str, timeout: float) -> bytes:
    """The .torrent for `uri`, or Incomplete after `timeout` seconds without it."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(uri, tuple(peers), listen_ip, timeout, child), name="bt-get metadata")
    proc.start()
    child.close()
    try:
        if parent.poll(timeout + 10):
            kind, payload = parent.recv()
            if kind == "ok":
                return payload
        # libtorrent never sends a private torrent's info dict (BEP 27), and
        # btswarm's torrents are private: say where the metadata can come from.
        raise Incomplete("magnet", f"no peer sent the metadata within {timeout:g} s (peers do not share "
                         "a private torrent's metadata: use the dataset name or its .torrent)")
    except EOFError:
        raise Incomplete("magnet", "metadata fetch ended without an answer") from None
    finally:
        proc.join(5)
        if proc.is_alive():
            proc.terminate()
            proc.join(5)
        parent.close()


def _child(uri: str, peers: tuple[tuple[str, int], ...], listen_ip: str, timeout: float, conn: Connection) -> None:
    import tempfile

    import libtorrent as lt

    from torrents.servicekit import ltsession

    ses = ltsession.session(listen_ip, 0)
    with tempfile.TemporaryDirectory(prefix="bt-get-meta-") as tmp:
        atp = lt.parse_magnet_uri(uri)
        atp.save_path = tmp
        # Metadata only: nothing is written while we wait for the info dict.
        atp.flags |= lt.torrent_flags.upload_mode
        # A parsed magnet starts paused (libtorrent's default flags): unpaused and
        # not auto-managed, or it never connects to anyone.
        atp.flags &= ~lt.torrent_flags.auto_managed
        atp.flags &= ~lt.torrent_flags.paused
        h = ses.add_torrent(atp)
        for peer in peers:
            h.connect_peer(peer)
        received: list = []
        alerts = ltsession.Alerts({lt.metadata_received_alert: received.append})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ses.wait_for_alert(POLL_MS)
            alerts.drain(ses)
            if received:
                data = lt.bencode(lt.create_torrent(h.torrent_file()).generate())
                conn.send(("ok", bytes(data)))
                conn.close()
                return
        conn.send(("timeout", None))
        conn.close()
