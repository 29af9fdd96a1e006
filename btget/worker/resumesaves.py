"""When a worker saves its share's resume state, and which states it writes.

Saved every `resume_interval` *and* each time 1/SAVE_FRACTION of the share
has arrived: on a fast link half a second is many pieces, which a kill -9
would cost again. After a failed write (a full disk) libtorrent's idea of
what it holds may not be on disk: the state saved before the failure is set
aside, and only one taken after the files were checked again is written
(`recheck`); btget/worker/sharestate.py writes it kill-safe.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

from btget.worker import sharestate

if TYPE_CHECKING:
    from btget.worker.spec import WorkerSpec

SAVE_FRACTION = 100


class ResumeSaves:
    def __init__(self, lt: Any, spec: "WorkerSpec") -> None:
        self.lt, self.spec = lt, spec
        self.handle: Any = None  # the torrent's, once added
        self.every = 0  # bytes of pieces between two saves (sized)
        self.piece_bytes = 0
        self.unsaved = 0  # bytes of pieces finished since the last save was asked for
        self.pending = 0  # saves asked for and not yet answered
        self.write_failed = False
        self.rechecked = False  # the files were checked again after the failed write

    def sized(self, share_bytes: int, piece_bytes: int) -> None:
        self.piece_bytes = piece_bytes
        self.every = max(piece_bytes, share_bytes // SAVE_FRACTION)

    def piece_done(self, may_save: bool) -> None:
        self.unsaved += self.piece_bytes
        if self.unsaved >= self.every and may_save:
            self.save()

    def save(self, force: bool = False) -> None:
        self.unsaved = 0
        if force or self.handle.need_save_resume_data():
            self.handle.save_resume_data(self.lt.torrent_handle.flush_disk_cache)
            self.pending += 1

    def answered(self, params: Any = None) -> None:
        """A save's answer: its state (None when it failed)."""
        self.pending = max(0, self.pending - 1)
        if params is None or self.write_failed and not self.rechecked:
            return  # a state asked for before the failure may claim what did not reach the disk
        sharestate.write_resume(self.spec.resume_path, self.lt.write_resume_data_buf(params),
                                room=self.spec.stale_path if self.write_failed else None)

    def failed_write(self) -> None:
        """A piece could not be written: set the saved state aside until the files are checked again."""
        if not self.write_failed:
            self.write_failed = True
            sharestate.set_aside(self.spec)

    def recheck(self, wait_for: Callable[[type, float], bool], until: float) -> None:
        """After a failed write, find what is on disk by hashing the files, by `until` (monotonic); `wait_for`
        handles the session's alerts until one of a kind comes (True) or the seconds pass (False).

        libtorrent counts a piece once it passed its check, before it is written. While it is fetching,
        it takes back a piece whose write fails (60 MiB into 40 MiB: 165 pieces passed, 159 written and
        counted); but once it holds every piece it keeps no record to take one back from, and says 60 MiB
        with 39.75 on disk (1 run in 5 here, when the writes lag behind the transfer). So the files are
        checked: 0.1-0.15 s for 40 MiB. Pausing first lets the writes under way end (a check would read
        their blocks from the write queue); the full disk keeps libtorrent in upload mode, so resuming to
        check fetches nothing. Without a check (cut short), no state is saved: the rerun checks."""
        lt = self.lt
        self.handle.pause()
        if wait_for(lt.torrent_paused_alert, min(5.0, until - time.monotonic())):
            self.handle.force_recheck()
            self.handle.resume()
            self.rechecked = wait_for(lt.torrent_checked_alert, until - time.monotonic())
