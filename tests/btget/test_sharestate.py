"""btget/worker/sharestate.py: what a worker's libtorrent session is given for its share, added to a real session."""

from __future__ import annotations

import libtorrent as lt

from btget.worker import sharestate
from btget.worker.spec import WorkerSpec
from torrents import metainfo
from torrents.servicekit import ltsession

PIECE = 16384
SITE_WEB_SEED = "http://127.0.0.2:8701/data/"


def spec(tmp_path, web_seeds: tuple[str, ...] = ()) -> WorkerSpec:
    info = metainfo.info_dict("ds", [("a.root", PIECE), ("b.root", PIECE)], PIECE, b"\x00" * 40)
    torrent = metainfo.dump(info, announce="http://127.0.0.1:6969/announce", url_list=[SITE_WEB_SEED])
    return WorkerSpec(index=1, torrent=torrent, save_path=str(tmp_path), state_dir=str(tmp_path / "ds" / ".bt-get"),
                      key="all", wanted=(0, 1), web_seeds=web_seeds)


def added_web_seeds(tmp_path, web_seeds: tuple[str, ...]) -> set[str]:
    ses = ltsession.session("127.0.0.1")
    try:
        handle = ses.add_torrent(sharestate.torrent_params(lt, spec(tmp_path, web_seeds)))
        return set(handle.url_seeds())
    finally:
        ses.pause()


def test_the_torrents_own_web_seeds_are_not_libtorrents_to_use(tmp_path):
    """The sites' web seeds in the .torrent's url-list are the parent's to switch to (btget/transfer/webseeds.py):
    a worker that was given none uses none, while peers send."""
    assert added_web_seeds(tmp_path, ()) == set()


def test_the_web_seeds_the_parent_gives_are_the_ones_used(tmp_path):
    relayed = "http://127.0.0.1:40123/relay/1/"
    assert added_web_seeds(tmp_path, (relayed,)) == {relayed}
