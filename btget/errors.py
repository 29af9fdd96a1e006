"""bt-get's errors: BtswarmError subclasses, each with the exit status it ends bt-get with."""

from __future__ import annotations

from torrents.errors import BtswarmError
from torrents.exitstatus import ExitStatus


class Incomplete(BtswarmError):
    """The download stopped short (timeout, stall, no peers); a rerun resumes."""

    exit_status = ExitStatus.INCOMPLETE


class VerifyFailed(BtswarmError):
    """Downloaded bytes do not match the catalog's checksums."""

    exit_status = ExitStatus.VERIFY_FAILED


class TransferError(BtswarmError):
    """libtorrent could not go on: a file error such as a full disk (resumable)."""


class RepoError(BtswarmError):
    """The repository or tracker could not be reached or answered nonsense."""


class Interrupted(BtswarmError):
    """Ctrl-C or SIGTERM before the data was complete."""

    exit_status = ExitStatus.INTERRUPTED


class ReplicaConflict(BtswarmError):
    """The sites' replicas disagree, or none is whole: no version to fetch by name."""

    exit_status = ExitStatus.CONFLICT


class Blocked(BtswarmError):
    """Seeds are connected but some pieces come from none of them: the files are named.

    A rerun resumes, but will not finish until a site can send those pieces.
    """

    exit_status = ExitStatus.BLOCKED


class TrackersRefuse(BtswarmError):
    """Every tracker of the torrent answers no for good (an unpublished info-hash, nobody listening)."""
