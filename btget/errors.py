"""bt-get's errors: BtswarmError subclasses, each one exit status (see exitcodes)."""

from __future__ import annotations

from torrents.errors import BtswarmError


class UsageError(BtswarmError):
    """A bad argument or option combination (exit 2)."""


class Incomplete(BtswarmError):
    """The download stopped short (timeout, stall, no peers); a rerun resumes (exit 4)."""


class VerifyFailed(BtswarmError):
    """Downloaded bytes do not match the catalog's checksums (exit 5)."""


class TransferError(BtswarmError):
    """libtorrent could not go on: a file error such as a full disk (exit 1, resumable)."""


class RepoError(BtswarmError):
    """The repository or tracker could not be reached or answered nonsense (exit 1)."""


class Interrupted(BtswarmError):
    """Ctrl-C or SIGTERM before the data was complete (exit 130)."""


class ReplicaConflict(BtswarmError):
    """The sites' replicas disagree, or none is whole: no version to fetch by name (exit 6)."""
