"""What the progress display says (btget.display.readout, pure): start and resume lines, bar figures, rate, widths."""

from __future__ import annotations

from btget.display import readout, result
from btget.events import Phase, Progress

MiB = 2**20


def test_heading_names_dataset_size_and_directory():
    assert readout.heading("ds1", 20, int(101.8 * MiB), "/data/ds1") == "ds1: 20 files, 101.8 MiB into /data/ds1"
    assert readout.heading("ds1", 1, 10, "/d/ds1") == "ds1: 1 file, 10 B into /d/ds1"


def test_resume_line():
    assert readout.resume_line(int(34.8 * MiB), int(101.8 * MiB)) == \
        "resuming: 34.8 MiB of 101.8 MiB already verified"
    assert readout.resume_line(0, 100) is None  # a fresh start says nothing
    assert readout.resume_line(100, 100) == "already complete: 100 B verified, nothing to fetch"


def test_bar_total_is_the_selected_bytes_and_done_never_exceeds_it():
    # libtorrent counts whole boundary pieces: wanted 103.3 MiB for 101.8 MiB of selected files
    total, wanted = int(101.8 * MiB), int(103.3 * MiB)
    assert readout.verified_bytes(Progress(1, done=wanted, wanted=wanted), total) == total
    assert readout.verified_bytes(Progress(1, done=wanted // 2, wanted=wanted), total) < total // 2 + 1
    assert readout.verified_bytes(Progress(1, done=0, wanted=0), total) == 0
    # per-file counts are exact (and capped)
    assert readout.verified_bytes(Progress(1, done=wanted, wanted=wanted, files={0: 5, 1: 7}), total) == 12
    # scaled from the last exact count: 40 of 100 exact when libtorrent said 60 of 110
    assert readout.verified_bytes(Progress(1, done=60, wanted=110), 100, anchor=(60, 40)) == 40
    assert readout.verified_bytes(Progress(1, done=110, wanted=110), 100, anchor=(60, 40)) == 100
    assert readout.verified_bytes(Progress(1, done=85, wanted=110), 100, anchor=(60, 40)) == 70


def test_board_totals_and_resume_said_once_after_the_check():
    board = readout.Board([(1, 10, 60 * MiB), (2, 10, 40 * MiB)])
    assert board.total.total == 100 * MiB
    # checking: no line yet
    assert board.take(Progress(1, done=0, wanted=61 * MiB, state="checking_resume_data"), 0.0) is None
    assert board.take(Progress(1, done=21 * MiB, wanted=61 * MiB, state="downloading",
                               files={0: 20 * MiB}), 0.5) is None  # worker 2 still checking
    said = board.take(Progress(2, done=15 * MiB, wanted=41 * MiB, state="downloading", files={1: 15 * MiB}), 0.6)
    assert said == "resuming: 35.0 MiB of 100.0 MiB already verified"
    assert board.total.done == 35 * MiB
    assert board.take(Progress(2, done=20 * MiB, wanted=41 * MiB, state="downloading"), 1.0) is None  # once
    # the last word (stopped, per-file counts) is what the summary states
    board.take(Progress(1, Phase.STOPPED, done=61 * MiB, wanted=61 * MiB, files={0: 30 * MiB}), 2.0)
    assert board.total.done == 30 * MiB + board.workers[2].done <= 100 * MiB


def test_resume_line_is_what_was_on_disk_not_what_this_run_fetched():
    board = readout.Board([(1, 10, 60 * MiB), (2, 10, 40 * MiB)])
    # Worker 1's first report after the check came late: 2 MiB fetched since, half of a piece whose other
    # blocks the last run left on disk. Its own count of what was there (found) is exact; worker 2's
    # event carries none (as when it stops before its first report after the check): the bytes received are
    # taken off.
    board.take(Progress(1, done=22 * MiB, wanted=61 * MiB, state="downloading", downloaded=1 * MiB,
                        files={0: 22 * MiB}, found=20 * MiB), 0.5)
    said = board.take(Progress(2, done=15 * MiB, wanted=41 * MiB, state="downloading", downloaded=1 * MiB,
                               files={1: 15 * MiB}), 0.6)
    assert said == "resuming: 34.0 MiB of 100.0 MiB already verified"
    assert board.total.done == 37 * MiB  # the bars show all that is verified now


def test_rate_falls_to_zero_soon_after_bytes_stop():
    meter = readout.RateMeter()
    assert meter.rate(0.0) is None
    for i in range(7):  # 1 MiB/s, a report every 0.5 s
        meter.add(i * 0.5, i * MiB // 2)
    assert abs(meter.rate(3.0) - MiB) < 1
    # starved: reports go on, no byte arrives
    for i in range(7, 11):
        meter.add(i * 0.5, 3 * MiB)
    assert meter.rate(5.0) == 0.0  # 2 s after the last byte
    # reports stop altogether (no state change posted): 0 once the window passed
    meter2 = readout.RateMeter()
    meter2.add(0.0, 0)
    meter2.add(0.5, MiB)
    assert meter2.rate(0.6) > 0
    assert meter2.rate(2.1) == 0.0
    # two samples a few ms apart are no rate (a resumed run's first reports)
    meter3 = readout.RateMeter()
    meter3.add(0.0, 0)
    meter3.add(0.01, 10 * MiB)
    assert meter3.rate(0.02) is None


def test_figures_keep_their_width_as_numbers_grow():
    total = int(101.8 * MiB)
    widths = set()
    for done, value in [(0, None), (1, 5.0), (10 * MiB, 900 * 1024.0), (99 * MiB, 12 * MiB * 1.0), (total, None)]:
        row = readout.Row(total, done=done)
        figures = {"percent": readout.percent(done, total), "amount": readout.amount(done, total),
                   "rate": readout.rate(value, done >= total), "eta": readout.eta(done, total, value),
                   "peers": readout.peers(done % 1000 if done < 1000 else 3, 12 if done else 0)}
        assert row.figures(0.0).keys() == figures.keys()
        widths.add(tuple(len(v) for v in figures.values()))
    assert len(widths) == 1, widths


def test_complete_row_says_done_not_a_question_mark():
    row = readout.Row(100, done=100)
    f = row.figures(0.0)
    assert f["eta"].strip() == "done" and f["rate"].strip() == "" and "?" not in "".join(f.values())
    assert readout.eta(0, 100, None) == "--:--:--"
    assert readout.eta(0, 3600, 1.0).strip() == "1:00:00"


def test_summary_of_an_already_complete_dataset_and_of_an_interrupted_one():
    done = {"bytes_total": 100, "bytes_done": 100, "bytes_downloaded": 0, "rate": 0.0}
    assert result.pace(done) == "already complete: nothing to fetch"
    assert result.size_line(done) == "100 B (0 B downloaded now)"
    part = {"bytes_total": 100 * MiB, "bytes_done": 34 * MiB, "bytes_downloaded": 36 * MiB, "rate": MiB}
    assert result.pace(part) == "average 1.0 MiB/s"
    assert result.size_line(part) == "100.0 MiB, 34.0 MiB of it verified (36.0 MiB downloaded now)"
    assert result.pace({**part, "bytes_downloaded": 0}) == "nothing downloaded"
