"""The terminal display: one rich Progress on stderr, a line per worker and a total.

Imported only when stderr is a terminal (btget.progress.make_display): rich
costs about 90 ms of CPU to import, a tenth of a cold start, which a --json
or piped run never draws with.
"""

from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.progress import (BarColumn, DownloadColumn, Progress, ProgressColumn, Task, TaskID, TextColumn,
                           TimeRemainingColumn)
from rich.text import Text

from torrents.units import human_rate

from btget import events
from btget.events import Listening


class RateColumn(ProgressColumn):
    """Rate in binary units, like the sizes beside it and the summary (rich's own says MB/s)."""

    def render(self, task: Task) -> Text:
        return Text(human_rate(task.speed) if task.speed else "?", style="progress.data.speed")


class RichDisplay:
    """Bytes, %, rate, ETA, peers and seeds, per worker and in total."""

    def __init__(self, stream: TextIO) -> None:
        self.console = Console(file=stream)
        self.progress = Progress(
            TextColumn("{task.description:>9}"), BarColumn(), TextColumn("{task.percentage:>5.1f}%"),
            DownloadColumn(binary_units=True), RateColumn(), TimeRemainingColumn(),
            TextColumn("{task.fields[peers]} peers {task.fields[seeds]} seeds"),
            console=self.console, transient=False, refresh_per_second=4)
        self.tasks: dict[int, TaskID] = {}
        self.total: TaskID | None = None
        self.last: dict[int, events.Progress] = {}

    def start(self, shares: list[tuple[int, int, int]]) -> None:
        self.progress.start()
        if len(shares) > 1:
            for k, _count, size in shares:
                self.tasks[k] = self.progress.add_task(f"worker {k}", total=size, peers=0, seeds=0)
        self.total = self.progress.add_task("total", total=sum(s for _, _, s in shares), peers=0, seeds=0)

    def update(self, event: Listening | events.Progress) -> None:
        if not isinstance(event, events.Progress):
            return
        k = event.worker
        self.last[k] = event
        if k in self.tasks:
            # `wanted` counts whole pieces, boundary ones included: the true total.
            self.progress.update(self.tasks[k], completed=event.done, total=event.wanted or None,
                                 peers=event.peers, seeds=event.seeds)
        if self.total is not None:
            if len(self.last) == len(self.tasks) or not self.tasks:
                self.progress.update(self.total, total=sum(e.wanted for e in self.last.values()) or None)
            self.progress.update(self.total, completed=sum(e.done for e in self.last.values()),
                                 peers=sum(e.peers for e in self.last.values()),
                                 seeds=sum(e.seeds for e in self.last.values()))

    def note(self, text: str, warning: bool = False) -> None:
        self.progress.console.print(f"bt-get: {'warning: ' if warning else ''}{text}")

    def stop(self) -> None:
        self.progress.stop()
