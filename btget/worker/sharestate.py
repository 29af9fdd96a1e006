"""A share's state on disk: the parameters a session resumes it from, and its resume file, written kill-safe.

Used by every session that fetches a share: a bt-get worker (btget/worker/process.py), `bt-get --serve`
(btget/swarmread/serve.py) and the swarm reader (btget/swarmread/swarmpieces.py).
"""

from __future__ import annotations

import errno
import logging
import os
from typing import TYPE_CHECKING, Any

from btget.worker import recover

if TYPE_CHECKING:
    from btget.worker.spec import WorkerSpec

log = logging.getLogger("btget.worker")

ELSEWHERE = "elsewhere"  # under a part dir: where other shares' files would be (never created)
# A rerun hashes at most this much (+ 2% of its share) of what is on disk beyond the saved state: the
# saves' lag behind the pieces (btget/worker/recover.py), not a whole dataset on a file system without holes.
RECOVER_BUDGET = 64 * 2**20


def torrent_params(lt: Any, spec: "WorkerSpec") -> Any:
    """add_torrent_params for a share: its saved resume state if any, its files wanted, the rest not.

    Shared with `bt-get --serve` (btget.swarmread.serve), which keeps its state the same way.
    """
    from torrents.servicekit import ltsession

    ti = ltsession.torrent_info(spec.torrent)
    atp = None
    if not spec.recheck and os.path.isfile(spec.resume_path):
        try:
            with open(spec.resume_path, "rb") as f:
                atp = lt.read_resume_data(f.read())
            if str(atp.info_hashes.v1) != str(ti.info_hashes().v1):
                atp = None  # state of another version of the dataset
        except (RuntimeError, OSError) as exc:
            log.warning("%s: ignoring unreadable resume state (%s)", spec.resume_path, exc)
            atp = None
    resumed = atp is not None
    # Every file under the name its info dict gives (libtorrent renames case twins).
    atp = ltsession.torrent_params(ti, spec.save_path, spec.own_names, atp)
    os.makedirs(spec.part_dir, exist_ok=True)
    atp.part_file_dir = spec.part_dir
    wanted = set(spec.wanted)
    atp.renamed_files = {**atp.renamed_files, **elsewhere(ti, wanted, spec.part_dir)}
    if resumed:
        # What arrived after the last save that reached the disk is there all the same (btget/worker/recover.py).
        share = sum(ti.layout().file_size(i) for i in wanted)
        found = recover.find(ti, spec.save_path, spec.own_names, list(atp.have_pieces), wanted,
                             RECOVER_BUDGET + share // 50)
        if found:
            recover.claim(atp, found, ti.num_pieces())
    atp.file_priorities = [4 if i in wanted else 0 for i in range(ti.num_files())]
    # The torrent's own web seeds are the parent's to use (btget/transfer/webseeds.py), never libtorrent's at
    # once: only those in url_seeds are used (override_web_seeds), none unless the parent gave some.
    atp.url_seeds = list(spec.web_seeds)
    flags = atp.flags | lt.torrent_flags.override_web_seeds
    flags &= ~lt.torrent_flags.paused
    flags &= ~lt.torrent_flags.auto_managed
    flags &= ~lt.torrent_flags.seed_mode
    # A full disk put the torrent in upload mode (no more downloading); the state saved then says so.
    flags &= ~lt.torrent_flags.upload_mode
    atp.flags = flags
    return atp


def elsewhere(ti: Any, wanted: set[int], part_dir: str) -> dict[int, str]:
    """Other shares' files renamed to paths of this share's that never exist.

    The bytes of a piece that straddles into another share's file belong in this share's part
    file. libtorrent puts them there only while that file does not exist: a priority-0 file
    found on disk is read and written in place (its rule for torrents from before part files).
    A rerun then served its straddling pieces from the sibling's file, holes where the sibling
    had not yet written, and the sibling banned it for corrupt pieces (30 hash failures, the
    piece never fetched, in tests/btget/test_resume.py). Renamed, such a file is never found,
    and no worker ever touches a file of another share. (Pad files are renamed too: libtorrent
    never opens one, and skipping them cost 80 ms per 100,000 files.)
    """
    prefix = os.path.join(part_dir, ELSEWHERE, "")
    return {i: prefix + str(i) for i in range(ti.num_files()) if i not in wanted}


def write_resume(path: str, data: bytes, room: str | None = None) -> None:
    """Resume state, written to a temporary name and renamed: a kill at any instant
    leaves either the old state or the new one, never half of one.

    On a full disk the new state is written in place instead, in the blocks the
    old one holds (`path`, else `room`, renamed to `path` then): a state saved before
    the disk filled would make the rerun fetch again all that arrived since (issue
    28). A kill in the middle
    of that leaves a state libtorrent cannot read: the rerun then hashes what is on
    disk (slower, not wrong); a state that does not fit is removed, with the same
    effect.
    """
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return
    except OSError as exc:
        _remove(tmp)
        target = next((p for p in (path, room) if p and os.path.isfile(p)), None)
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or target is None:
            log.warning("%s: cannot save resume state (%s)", path, exc.strerror)
            return
    try:
        with open(target, "r+b") as f:
            f.write(data)
            f.truncate()
            f.flush()
            os.fsync(f.fileno())
        _replace(target, path)
    except OSError as exc:
        _remove(target)  # half of a state: none is better (libtorrent then checks the files)
        log.warning("%s: cannot save resume state (%s): the next run checks the files on disk", path, exc.strerror)


def _replace(src: str, dst: str) -> None:
    try:
        os.replace(src, dst)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("%s: cannot rename to %s (%s)", src, dst, exc.strerror)


def set_aside(spec: "WorkerSpec") -> None:
    """After a failed write the saved state may claim pieces that are not on disk: out of the way, where a
    rerun never reads it, its blocks kept for the state saved after the check (write_resume's room)."""
    _replace(spec.resume_path, spec.stale_path)


def remove_stale(spec: "WorkerSpec") -> None:
    """Drop the state kept aside after a failed write: the rerun then checks the files instead."""
    _remove(spec.stale_path)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("%s: cannot remove (%s)", path, exc.strerror)
