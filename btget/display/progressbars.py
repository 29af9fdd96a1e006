"""The terminal display: one rich Progress on stderr, a line per worker and a total.

Imported only when stderr is a terminal (btget.display.progress.make_display): rich
is costly to import (docs/benchmarks.md "cost"), and a --json or piped run
never draws with it. What each line says is btget.display.readout's
(pure); this only draws it.
"""

from __future__ import annotations

import time
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TaskID, TextColumn
from rich.text import Text

from btget import events
from btget.display import readout
from btget.events import Listening


class FigureColumn(ProgressColumn):
    """One of a row's figures (readout.Row.figures), worked out when drawn: a rate falls while nothing arrives."""

    def __init__(self, key: str, style: str = "") -> None:
        super().__init__()
        self.key, self.style = key, style

    def render(self, task: Task) -> Text:
        row: readout.Row = task.fields["row"]
        return Text(row.figures(time.monotonic())[self.key], style=self.style)


class RichDisplay:
    """Bytes, %, rate, ETA, peers and seeds, per worker and in total."""

    def __init__(self, stream: TextIO) -> None:
        self.console = Console(file=stream)
        self.progress = Progress(
            TextColumn("{task.description:>9}"), BarColumn(bar_width=40),
            FigureColumn("percent", "progress.percentage"), FigureColumn("amount", "progress.download"),
            FigureColumn("rate", "progress.data.speed"), FigureColumn("eta", "progress.remaining"),
            FigureColumn("peers"), console=self.console, transient=False, refresh_per_second=4)
        self.board: readout.Board | None = None
        self.tasks: dict[int, TaskID] = {}
        self.total: TaskID | None = None
        self.running = False

    def start(self, shares: list[tuple[int, int, int]]) -> None:
        # Again for each dataset of a run of many (bt-get A B C): its own rows replace the last one's.
        for task in [*self.tasks.values(), *([self.total] if self.total is not None else [])]:
            self.progress.remove_task(task)
        self.tasks.clear()
        self.board = board = readout.Board(shares)
        self.progress.start()
        self.running = True
        if len(shares) > 1:
            for k, row in board.workers.items():
                self.tasks[k] = self.progress.add_task(f"worker {k}", total=row.total or None, row=row)
        self.total = self.progress.add_task("total", total=board.total.total or None, row=board.total)

    def update(self, event: Listening | events.Progress) -> None:
        if not isinstance(event, events.Progress) or self.board is None:
            return
        said = self.board.take(event, time.monotonic())
        if event.worker in self.tasks:
            self.progress.update(self.tasks[event.worker], completed=self.board.workers[event.worker].done)
        if self.total is not None:
            self.progress.update(self.total, completed=self.board.total.done)
        if said:
            self.note(said)

    def note(self, text: str, warning: bool = False) -> None:
        self.progress.console.print(f"bt-get: {'warning: ' if warning else ''}{text}", markup=False, highlight=False, soft_wrap=True)

    def stop(self) -> None:
        if self.running:  # once: a second stop would draw the last lines again
            self.running = False
            self.progress.refresh()
            self.progress.stop()
