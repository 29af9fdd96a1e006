"""What the progress display says (pure): the start and resume lines, each row's figures.

btget.display.progressbars draws these with rich; everything a person reads is decided
here, so it is tested without a terminal (tests/btget/test_readout.py):

- a row's total is the bytes of its selected files (the number the summary
  states), not libtorrent's `wanted`, which counts every piece a selected
  file touches whole;
- the rate is measured over the last RATE_WINDOW seconds of bytes received,
  so a worker that stops getting bytes shows 0 within that window (rich's
  estimate and libtorrent's payload rate both keep an old rate for seconds);
- every figure has a fixed width, right-aligned, so nothing shifts as
  numbers grow.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torrents.units import human_rate, human_size

from btget.events import CHECKING, Phase, Progress

RATE_WINDOW = 1.5  # seconds of samples the rate is measured over
MIN_SPAN = 0.4  # seconds the samples must span before there is a rate (workers report every 0.5 s)
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
# Widths: "100.0%", "1023.9/1023.9 MiB", "1023.9 KiB/s", "99:59:59", "999 peers 999 seeds".
PCT_WIDTH, AMOUNT_WIDTH, RATE_WIDTH, ETA_WIDTH, PEERS_WIDTH = 6, 17, 12, 8, 19


def heading(name: str, files: int, size: int, root: str) -> str:
    """The first line: which dataset, how much, into which directory."""
    return f"{name}: {files} file{'s' if files != 1 else ''}, {human_size(size)} into {root}"


def resume_line(found: int, total: int) -> str | None:
    """Said once, when the workers have read what is on disk: what a rerun need not fetch."""
    if found <= 0 or total <= 0:
        return None
    if found >= total:
        return f"already complete: {human_size(total)} verified, nothing to fetch"
    return f"resuming: {human_size(found)} of {human_size(total)} already verified"


def verified_bytes(event: Progress, total: int, anchor: tuple[int, int] = (0, 0)) -> int:
    """Verified bytes of a share's selected files, at most `total`.

    Exact from the per-file counts when the event carries them. Else from libtorrent's `done`, which
    counts a piece straddling into an unselected file whole (as `wanted` does), and boundary pieces come
    early (the sibling workers trade them): the part of `done` since the `anchor` (done, exact bytes)
    of the last exact count, scaled to the selected bytes left then, so it reaches `total` with `wanted`.
    """
    if event.files is not None:
        return min(total, sum(event.files.values()))
    done0, exact0 = anchor
    left = event.wanted - done0
    if left <= 0:
        return min(total, exact0)
    return max(0, min(total, exact0 + (event.done - done0) * (total - exact0) // left))


# --- figures at fixed widths -------------------------------------------------------------------

def percent(done: int, total: int) -> str:
    return f"{100.0 * done / total if total else 100.0:5.1f}%".rjust(PCT_WIDTH)


def amount(done: int, total: int) -> str:
    """`done/total unit`, both in the total's unit (as rich's DownloadColumn, but of fixed width)."""
    k = 0
    while k < len(_UNITS) - 1 and total >= 1024 ** (k + 1):
        k += 1
    if k == 0:
        text = f"{done}/{total} B"
    else:
        text = f"{done / 1024 ** k:.1f}/{total / 1024 ** k:.1f} {_UNITS[k]}"
    return text.rjust(AMOUNT_WIDTH)


def rate(value: float | None, complete: bool) -> str:
    """Bytes/s; `--` before two samples; blank once complete (nothing is being fetched)."""
    if complete:
        return "".rjust(RATE_WIDTH)
    return ("--" if value is None else human_rate(value)).rjust(RATE_WIDTH)


def eta(done: int, total: int, value: float | None) -> str:
    """Time left at the current rate, h:mm:ss; `done` once complete; `--:--:--` while nothing moves."""
    if done >= total:
        return "done".rjust(ETA_WIDTH)
    if not value:
        return "--:--:--"
    seconds = int((total - done) / value + 0.5)
    if seconds >= 100 * 3600:
        return ">99 h".rjust(ETA_WIDTH)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}".rjust(ETA_WIDTH)


def peers(peer_count: int, seed_count: int) -> str:
    return f"{peer_count:>3} peers {seed_count:>3} seeds".rjust(PEERS_WIDTH)


# --- state -------------------------------------------------------------------------------------

@dataclass
class RateMeter:
    """Bytes/s over the last `window` seconds of (time, bytes received so far) samples.

    Samples are kept as one tuple, replaced whole: the display's refresh thread
    reads it while the parent's loop adds to it.
    """

    window: float = RATE_WINDOW
    samples: tuple[tuple[float, int], ...] = ()

    def add(self, now: float, received: int) -> None:
        kept = tuple(s for s in self.samples if s[0] >= now - 2 * self.window)
        self.samples = kept + ((now, received),)

    def rate(self, now: float) -> float | None:
        """None until the samples span MIN_SPAN; 0 once no byte came for `window` seconds."""
        samples = self.samples
        if not samples:
            return None
        t_last, n_last = samples[-1]
        # The base: the newest sample at least `window` old, else the oldest.
        base = next((s for s in reversed(samples) if s[0] <= now - self.window), samples[0])
        if base[0] >= t_last:  # the last sample is older than the window: nothing said since
            return 0.0 if t_last <= now - self.window else None
        if t_last - base[0] < MIN_SPAN:  # two samples a few ms apart say nothing of a rate
            return None
        return max(0.0, (n_last - base[1]) / (t_last - base[0]))


@dataclass
class Row:
    """One line of the display: a worker's share, or the total."""

    total: int  # bytes of the selected files
    done: int = 0
    peers: int = 0
    seeds: int = 0
    meter: RateMeter = field(default_factory=RateMeter)

    def figures(self, now: float) -> dict[str, str]:
        value = self.meter.rate(now)
        complete = self.done >= self.total
        return {"percent": percent(self.done, self.total), "amount": amount(self.done, self.total),
                "rate": rate(value, complete), "eta": eta(self.done, self.total, value),
                "peers": peers(self.peers, self.seeds)}


class Board:
    """Every row, fed the workers' Progress events; says the resume line once."""

    def __init__(self, shares: list[tuple[int, int, int]]) -> None:
        self.workers = {k: Row(size) for k, _count, size in shares}
        self.total = Row(sum(size for _, _, size in shares))
        self.last: dict[int, Progress] = {}
        self.found: dict[int, int] = {}  # worker → bytes verified on disk when its check was done
        self.anchors: dict[int, tuple[int, int]] = {}  # worker → (done, exact bytes) at its last per-file count
        self.resume_said = False

    def take(self, event: Progress, now: float) -> str | None:
        """Update the rows; the resume line, the once it is due."""
        row = self.workers.get(event.worker)
        if row is None:
            return None
        self.last[event.worker] = event
        row.done = verified_bytes(event, row.total, self.anchors.get(event.worker, (0, 0)))
        if event.files is not None:
            self.anchors[event.worker] = (event.done, row.done)
        row.peers, row.seeds = event.peers, event.seeds
        row.meter.add(now, event.downloaded)
        self.total.done = sum(r.done for r in self.workers.values())
        self.total.peers = sum(e.peers for e in self.last.values())
        self.total.seeds = sum(e.seeds for e in self.last.values())
        self.total.meter.add(now, sum(e.downloaded for e in self.last.values()))
        if event.worker not in self.found and (event.state not in CHECKING or event.phase is not Phase.RUNNING):
            # Bytes fetched already in this run are not what was on disk (the worker counts them out
            # exactly; without its count, the bytes received are taken off).
            self.found[event.worker] = event.found if event.found is not None else max(0, row.done - event.downloaded)
        if self.resume_said or len(self.found) < len(self.workers):
            return None
        self.resume_said = True
        return resume_line(sum(self.found.values()), self.total.total)
