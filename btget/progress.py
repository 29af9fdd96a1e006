"""The display of a download: drawn on a terminal (btget.terminal), or nothing.

Only the parent draws; workers send events (see btget.worker). When stderr
is not a terminal, or with -q / --json, `make_display` returns a display
that draws nothing, so logs and pipes stay clean.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from btget.terminal import RichDisplay


class NullDisplay:
    def start(self, shares: list[tuple[int, int, int]]) -> None:
        pass

    def update(self, event: dict) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def stop(self) -> None:
        pass


def make_display(quiet: bool, json_output: bool, stream: TextIO | None = None) -> "NullDisplay | RichDisplay":
    stream = stream or sys.stderr
    if quiet or json_output or not stream.isatty():
        return NullDisplay()
    from btget.terminal import RichDisplay  # rich only when there is something to draw

    return RichDisplay(stream)
