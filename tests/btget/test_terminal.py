"""bt-get's progress display in a real terminal: a real bt-get inside tmux, read with capture-pane.

Checks what a person sees: the dataset named before the bars, bars of the
size the summary states, columns that stay put while numbers change width,
one last line after Ctrl-C agreeing with the summary, the resume line on the
rerun, and an already-complete rerun that says so (no `?`, no `average 0 B/s`).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time

import pytest

from tests.support import command

pytestmark = pytest.mark.slow

SEED_RATE = 4_000_000  # bytes/s: the 24 MiB dataset takes ~6 s, long enough to see several redraws
FIGURES = re.compile(r"^\s*total .*?(\d+\.\d%)\s+([\d.]+)/([\d.]+ MiB)\s+(\S+ \S+/s|--|)\s*"
                     r"(\d+:\d\d:\d\d|--:--:--|done)\s+\d+ peers\s+\d+ seeds$")


class Tmux:
    """A tmux server of our own (its own socket), one session per run, killed at the end."""

    def __init__(self, name: str) -> None:
        self.socket = name
        self.runs = 0

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10,
                              check=False).stdout

    def run(self, args: list[str]) -> None:
        # A new session per run, the earlier ones left to kill-server: killing the last session ends the
        # tmux server, and a new-session racing that exit failed under load (an empty screen for 30 s).
        self.runs += 1
        # The terminal's own size, as at a desk (an exported COLUMNS, as under pytest, would win in rich).
        line = "env -u COLUMNS -u LINES " + " ".join(shlex.quote(a) for a in args) + "; echo EXIT $?; sleep 300"
        started = subprocess.run(["tmux", "-L", self.socket, "new-session", "-d", "-s", self.session,
                                  "-x", "160", "-y", "40", line], capture_output=True, text=True, timeout=10)
        assert started.returncode == 0, f"tmux new-session failed: {started.stderr.strip()}"

    @property
    def session(self) -> str:
        return f"bt{self.runs}"

    def screen(self) -> list[str]:
        # -J: a line the terminal wrapped comes back whole
        return [line.rstrip() for line in self.tmux("capture-pane", "-p", "-J", "-t", self.session).splitlines()
                if line.strip()]

    def wait(self, seen, timeout: float, what: str) -> list[list[str]]:
        """Captures every 0.2 s until `seen(lines)`; all of them (bounded in time)."""
        captures = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            captures.append(self.screen())
            if seen(captures[-1]):
                return captures
            time.sleep(0.2)
        raise AssertionError(f"no {what} within {timeout} s:\n" + "\n".join(captures[-1] if captures else []))

    def close(self) -> None:
        self.tmux("kill-server")


def exited(lines: list[str]) -> bool:
    return any(line.startswith("EXIT ") for line in lines)


def totals(lines: list[str]) -> list[re.Match]:
    return [m for m in (FIGURES.match(line) for line in lines) if m]


@pytest.fixture
def tmux():
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (scripts/install-system-deps.sh installs it)")
    t = Tmux(f"btget-test-{os.getpid()}-{time.monotonic_ns()}")
    yield t
    t.close()


def test_display_in_tmux_names_the_dataset_keeps_columns_and_says_resuming(dataset, seed, tmp_path, tmux):
    peer = seed(upload_rate=SEED_RATE)
    root = tmp_path / dataset.name
    args = [command("bt-get"), str(dataset.torrent), "-o", str(tmp_path), "--peer", peer, "--workers", "2",
            "--timeout", "60"]
    size = f"{dataset.meta.total_size / 2**20:.1f} MiB"

    # 1. a fresh run, interrupted part way
    tmux.run(args)
    captures = tmux.wait(lambda lines: any(float(m.group(1)[:-1]) >= 15 for m in totals(lines)), 30, "progress")
    tmux.tmux("send-keys", "-t", tmux.session, "C-c")
    captures += tmux.wait(exited, 30, "exit after Ctrl-C")
    first = next(c for c in captures if totals(c))
    heading = f"bt-get: {dataset.name}: {len(dataset.meta.files)} files, {size} into {root}"
    assert first[0] == heading, first  # named before any bar
    # the bar's total is the summary's size, every time
    assert {m.group(3) for c in captures for m in totals(c)} == {size}
    # columns stay put: the end of each figure at the same place in every redraw
    spans = {tuple(m.end(g) for g in (1, 2, 4, 5)) for c in captures for m in totals(c)}
    assert len(spans) == 1, "\n".join(line for c in captures for line in c if line.lstrip().startswith("total"))
    last = captures[-1]
    assert "EXIT 130" in last, last
    assert len(totals(last)) == 1, "\n".join(last)  # the last bar drawn once
    verified = re.search(rf"size\s+{re.escape(size)}, ([\d.]+ \w+) of it verified", "\n".join(last))
    assert verified, "\n".join(last)
    final = totals(last)[0]
    assert f"{final.group(2)} MiB" == verified.group(1), "\n".join(last)  # the last bar agrees with the summary

    # 2. the rerun says what it found on disk, once, and finishes
    tmux.run(args)
    rerun = tmux.wait(exited, 40, "the rerun's end")[-1]
    said = [line for line in rerun if line.startswith("bt-get: resuming:")]
    assert said == [f"bt-get: resuming: {verified.group(1)} of {size} already verified"], "\n".join(rerun)
    assert rerun.index(heading) < rerun.index(said[0]), "\n".join(rerun)
    assert "EXIT 0" in rerun and "  status     ok" in rerun, "\n".join(rerun)

    # 3. nothing left to fetch: no `?`, no `average 0 B/s`
    tmux.run(args)
    again = tmux.wait(exited, 30, "the complete rerun's end")[-1]
    text = "\n".join(again)
    assert f"bt-get: already complete: {size} verified, nothing to fetch" in again, text
    assert totals(again) and totals(again)[-1].group(5) == "done" and "?" not in totals(again)[-1].group(0), text
    assert "already complete: nothing to fetch" in text and "average 0 B/s" not in text, text
    assert "EXIT 0" in again, text


def test_many_targets_share_one_display_each_dataset_named_then_the_summary(dataset, seed, tmp_path, tmux):
    """`bt-get A B`: one display, each dataset's heading, bar and summary in turn, the targets' summary last."""
    peer = seed()
    copy = tmp_path / "again.torrent"  # the same dataset by another path: a second target
    copy.write_bytes(dataset.torrent.read_bytes())
    tmux.run([command("bt-get"), str(dataset.torrent), str(copy), "-o", str(tmp_path / "out"), "--peer", peer,
              "--timeout", "60"])
    last = tmux.wait(exited, 60, "the end of both")[-1]
    text = "\n".join(last)
    size = f"{dataset.meta.total_size / 2**20:.1f} MiB"
    assert "EXIT 0" in last, text
    headings = [i for i, line in enumerate(last) if line.startswith(f"bt-get: {dataset.name}: ")]
    bars = [i for i, line in enumerate(last) if FIGURES.match(line)]
    assert len(headings) == 2, text  # each dataset named as it starts
    # each dataset's bar left once, done, before its summary: one display, not one on top of another
    assert [m.group(5) for m in totals(last)] == ["done", "done"], text
    assert headings[0] < bars[0] < headings[1] < bars[1], text
    assert last[-5:] == ["2 targets", f"  ok  {dataset.torrent}: {size}", f"  ok  {copy}: {size}",
                         "  status ok (exit 0)", "EXIT 0"], text
