"""btget.transfer.finish: the dataset's links get back the text the site wrote, and nothing else is touched."""

from __future__ import annotations

import os

from btget.transfer import finish
from torrents import build


def test_only_a_link_that_holds_the_plain_text_is_given_the_sites_text(tmp_path):
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    (src / "a" / "x").write_bytes(b"x" * 100)
    built = build.build_dataset("ds", [("a/x", src / "a" / "x")],
                                links={"b/odd": "../a/./x", "b/plain": "../a/x", "b/mine": "./../a/x"})
    assert sorted(finish.rewrites(built.meta)) == [("b/mine", "../a/x", "./../a/x"), ("b/odd", "../a/x", "../a/./x")]
    root = tmp_path / "ds"
    (root / "b").mkdir(parents=True)
    os.symlink("../a/x", root / "b" / "odd")      # as libtorrent writes it
    os.symlink("../a/x", root / "b" / "plain")
    os.symlink("elsewhere", root / "b" / "mine")  # not what a client wrote: left alone
    assert finish.restore(root, built.meta) == 1
    assert {p.name: os.readlink(p) for p in (root / "b").iterdir()} == {
        "odd": "../a/./x", "plain": "../a/x", "mine": "elsewhere"}
    assert finish.restore(root, built.meta) == 0  # a rerun changes nothing
