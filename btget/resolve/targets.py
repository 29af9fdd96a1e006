"""Many targets in one run: the list the user gave, and the one exit status they end with (pure).

`bt-get A B C` and `bt-get -i LIST` (one target a line; `#` starts a
comment; blank lines are skipped) name datasets, DIDs (a dataset, a
container or a file), .torrent files, URLs or magnets; each is resolved
as a lone target would be (btget/resolve/target.py) and fetched in turn.

The run ends with the worst of the targets' statuses, by `SEVERITY`: a
status that says "a rerun alone will not fix this" outranks one that says
"run me again" (INCOMPLETE), so a batch script that retries on 4 retries
only when retrying can finish the whole list; an interrupted run outranks
all (the targets after it were not tried).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from torrents.errors import UsageError
from torrents.exitstatus import ExitStatus

# Least to most severe; docs/bt-get.md ("Many targets") lists the same order.
SEVERITY: tuple[ExitStatus, ...] = (
    ExitStatus.OK,
    ExitStatus.INCOMPLETE,  # a rerun resumes
    ExitStatus.BLOCKED,  # a rerun resumes, finishes once a site can send the files
    ExitStatus.ERROR,
    ExitStatus.UNREACHABLE,
    ExitStatus.PROBLEMS,
    ExitStatus.NOT_FOUND,  # no rerun helps: the name is wrong
    ExitStatus.USAGE,
    ExitStatus.CONFLICT,  # no rerun helps until a site or the operator acts
    ExitStatus.VERIFY_FAILED,  # bytes on disk are wrong: do not use them
    ExitStatus.INTERRUPTED,
)
# A comment starts with '#' at the start of a line or after a blank: a URL's fragment is no comment.
_COMMENT = re.compile(r"(^|\s)#.*$")
MAX_LIST_LINE = 4096  # a magnet with many trackers is long; a line longer is no target


def worst(statuses: Iterable[ExitStatus | int]) -> ExitStatus:
    """The status a run of many targets ends with: the most severe of theirs (OK for none)."""
    rank = {s: i for i, s in enumerate(SEVERITY)}
    found = [ExitStatus(s) for s in statuses]
    return max(found, key=lambda s: rank[s], default=ExitStatus.OK)


def read_list(text: str, source: str) -> list[str]:
    """The targets of a list file: one a line; `#` comments (a whole line, or after a blank) and blank
    lines skipped. `source` names the file in errors."""
    out = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = _COMMENT.sub("", raw).strip()
        if not line:
            continue
        if len(line) > MAX_LIST_LINE:
            raise UsageError(f"{source}:{number}", f"longer than {MAX_LIST_LINE} characters")
        if any(c.isspace() for c in line):
            raise UsageError(f"{source}:{number}", f"{line[:60]!r}: one target a line (a name holds no space)")
        out.append(line)
    return out


def gather(arguments: Sequence[str], lists: Sequence[tuple[str, str]]) -> list[str]:
    """The targets on the command line, then those of each `-i` list ((source, text)), in order, each
    once (a name given twice would be fetched twice into the same directory)."""
    found = list(arguments)
    for source, text in lists:
        found += read_list(text, source)
    return list(dict.fromkeys(found))


@dataclass(frozen=True)
class Outcome:
    """How one target ended, for the summary and --json."""

    target: str
    kind: str  # dataset | container | file | torrent | url | magnet
    status: ExitStatus
    error: str | None = None  # the one-line message, when it failed
    datasets: tuple[str, ...] = ()  # the datasets fetched for it (a container's several)
    bytes_total: int = 0
    bytes_done: int = 0
    bytes_downloaded: int = 0

    def to_json(self) -> dict:
        return {"target": self.target, "kind": self.kind, "exit_status": self.status.name,
                "exit_code": int(self.status), "error": self.error,
                "bytes_total": self.bytes_total, "bytes_done": self.bytes_done,
                "bytes_downloaded": self.bytes_downloaded}


def totals(outcomes: Sequence[Outcome], seconds: float) -> dict:
    """The whole run's figures: targets by status, datasets, bytes, time."""
    by_status: dict[str, int] = {}
    for o in outcomes:
        by_status[o.status.name] = by_status.get(o.status.name, 0) + 1
    downloaded = sum(o.bytes_downloaded for o in outcomes)
    return {"targets": len(outcomes), "by_status": by_status, "datasets": sum(len(o.datasets) for o in outcomes),
            "bytes_total": sum(o.bytes_total for o in outcomes), "bytes_done": sum(o.bytes_done for o in outcomes),
            "bytes_downloaded": downloaded, "seconds": round(seconds, 3),
            "rate": round(downloaded / seconds, 1) if seconds > 0 else 0.0}


def summary_lines(outcomes: Sequence[Outcome], status: ExitStatus) -> list[str]:
    """The closing lines for a person: one per target, its outcome, then the run's status."""
    from torrents.units import human_size

    width = max((len(o.status.name) for o in outcomes), default=2)
    lines = [f"{len(outcomes)} target{'' if len(outcomes) == 1 else 's'}"]
    for o in outcomes:
        if o.error:  # `subject: problem`, said once when the subject is the target
            what = o.error[len(o.target) + 2:] if o.error.startswith(f"{o.target}: ") else o.error
        else:
            what = (f"{len(o.datasets)} datasets, " if o.kind == "container" else "") + human_size(o.bytes_total)
        lines.append(f"  {o.status.name.lower():<{width}}  {o.target}: {what}")
    lines.append(f"  status {status.name.lower()} (exit {int(status)})")
    return lines
