"""The display of a download: drawn on a terminal (btget.display.progressbars), or nothing.

Only the parent draws; workers send events (see btget.worker.process). When stderr
is not a terminal, or with -q / --json, `make_display` returns a display
that draws nothing, so logs and pipes stay clean.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

from btget import events
from btget.events import Listening

if TYPE_CHECKING:
    from btget.display.progressbars import RichDisplay


class NullDisplay:
    """Draws nothing; says warnings as one line each (`bt-get: warning: ...`) unless quiet."""

    def __init__(self, stream: TextIO | None = None, warnings: bool = True) -> None:
        self.stream = stream
        self.warnings = warnings

    def start(self, shares: list[tuple[int, int, int]]) -> None:
        pass

    def update(self, event: Listening | events.Progress) -> None:
        pass

    def note(self, text: str, warning: bool = False) -> None:
        if warning and self.warnings:
            print(f"bt-get: warning: {text}", file=self.stream or sys.stderr, flush=True)

    def stop(self) -> None:
        pass


def make_display(quiet: bool, json_output: bool, stream: TextIO | None = None) -> "NullDisplay | RichDisplay":
    stream = stream or sys.stderr
    if quiet or json_output or not stream.isatty():
        return NullDisplay(stream)  # -q leaves out progress and summary, not warnings
    from btget.display.progressbars import RichDisplay  # rich only when there is something to draw

    return RichDisplay(stream)
