"""torrents.paths.RealPaths gives os.path.realpath's answer, whatever the links on the way."""

from __future__ import annotations

import os

from torrents.paths import RealPaths


def test_the_same_answer_as_os_path_realpath(tmp_path):
    root = str(tmp_path)
    os.makedirs(f"{root}/a/b/c")
    os.makedirs(f"{root}/x/y")
    open(f"{root}/a/b/c/f", "w").close()
    os.symlink("../../a/b", f"{root}/x/y/lb")  # a directory link, relative
    os.symlink(f"{root}/a/b/c/f", f"{root}/x/abs")  # absolute
    os.symlink("y/lb/c/f", f"{root}/x/rel")  # a link through a link
    os.symlink("nothere", f"{root}/x/dangle")
    os.symlink("loop2", f"{root}/x/loop1")
    os.symlink("loop1", f"{root}/x/loop2")
    os.symlink("../x", f"{root}/x/y/up")
    realpath = RealPaths()
    for rel in ["x/y/lb/c/f", "x/abs", "x/rel", "x/dangle", "x/loop1", "x/y/up/rel", "x/y/up/y/up/abs",
                "a/./b/../b/c/f", "x/y/lb/../c", "x/y/lb/c/missing/deeper", "a/b/c/f", ""]:
        for _ in range(2):  # the second time from what the first one cached
            assert realpath(f"{root}/{rel}") == os.path.realpath(f"{root}/{rel}"), rel
    assert realpath("/") == "/"
    assert realpath("relative/path") == os.path.realpath("relative/path")
