"""A complete dataset on disk, finished: its links as the site wrote them, every file checked against the catalog.

Links: a BEP 47 link names its target relative to the torrent's root, so libtorrent
writes the plain relative path (`a/b`) where the site's link read `a/./b`
(the Linux tree has one). The .torrent carries such a text ("symlink text");
once the download is complete the links libtorrent wrote are given it back.

Checksums: whole-file adler32 against the catalog (the grid's checksum), streamed.
BitTorrent already verified every piece with SHA1; this catches what SHA1 of
the torrent cannot: a .torrent built from files that differ from what the
catalog says the dataset is. Runs in an executor thread (zlib releases the GIL).
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import Mapping

from torrents.dataset import plain_link_text
from torrents.metainfo import Metainfo

CHUNK = 4 * 1024 * 1024


def rewrites(meta: Metainfo) -> list[tuple[str, str, str]]:
    """(LFN, the text a client writes, the site's text) of each link whose text differs."""
    return [(f.lfn, plain_link_text(f.lfn, f.target), f.link_text)
            for f in meta.files if f.target is not None and f.link_text is not None]


def restore(root: Path, meta: Metainfo) -> int:
    """Give the links under `root` their site's text; only a link that holds the plain text is
    touched (so a rerun, or a file the user put there, is left alone). Returns how many."""
    done = 0
    for lfn, plain, text in rewrites(meta):
        path = root / lfn
        try:
            if os.readlink(path) != plain:
                continue
        except OSError:  # not there, or not a link
            continue
        tmp = path.with_name(f".{path.name}.btswarm-link")
        tmp.unlink(missing_ok=True)
        os.symlink(text, tmp)
        os.replace(tmp, path)  # atomic: the link is never missing
        done += 1
    return done


def adler32_of(path: Path) -> str:
    value = 1
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            value = zlib.adler32(chunk, value)
    return f"{value & 0xFFFFFFFF:08x}"


def verify_files(root: Path, expected: Mapping[str, str]) -> dict[str, bool]:
    """LFN → whether root/LFN's adler32 equals the expected hex value (a missing file is False)."""
    results = {}
    for lfn, want in expected.items():
        try:
            results[lfn] = adler32_of(root / lfn) == want.lower().rjust(8, "0")
        except OSError:
            results[lfn] = False
    return results
