"""os.path.realpath for many files in few directories.

os.path.realpath lstat()s every component of every path: for a dataset of
100,000 files ten levels deep that is a million system calls, twice per scan
(a farm link is resolved by the fingerprint and again by the layout's
probe). `RealPaths` resolves each directory once and then costs one
readlink() per file and per link it follows; the answer is the same string.
"""

from __future__ import annotations

import os

MAX_LINKS = 40  # links followed for one path before leaving it to os.path.realpath (a loop)


class RealPaths:
    def __init__(self) -> None:
        self._dirs: dict[str, str] = {}

    def __call__(self, path: str | os.PathLike) -> str:
        text = os.fspath(path)
        if not isinstance(text, str) or not os.path.isabs(text):
            return os.path.realpath(text)
        return self._resolve(text, text, 0)

    def _resolve(self, original: str, path: str, links: int) -> str:
        head, tail = os.path.split(path)
        if tail in ("", ".", "..") or links > MAX_LINKS:
            return os.path.realpath(original if links > MAX_LINKS else path)
        real_head = self._dirs.get(head)
        if real_head is None:
            real_head = self._dirs[head] = os.path.realpath(head)
        full = os.path.join(real_head, tail)
        try:
            target = os.readlink(full)
        except OSError:  # not a link, or nothing there: realpath keeps the name as it is
            return full
        return self._resolve(original, os.path.join(real_head, target), links + 1)
