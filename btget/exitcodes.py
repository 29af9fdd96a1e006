"""Exit statuses of bt-get, and the one mapping from errors to them.

Scripts and batch systems branch on these numbers (docs/bt-get.md lists
them), so they never change meaning: INCOMPLETE means "run me again, I
resume", VERIFY_FAILED means "the bytes are wrong, do not use them",
CONFLICT means "the sites disagree on what the dataset is: a rerun will
not help until a site fixes its replica or the repository's operator
chooses".
"""

from __future__ import annotations

from enum import IntEnum

from torrents.errors import BtswarmError, ConfigError, NotFound

from btget import errors


class ExitStatus(IntEnum):
    OK = 0
    ERROR = 1
    USAGE = 2
    NOT_FOUND = 3
    INCOMPLETE = 4
    VERIFY_FAILED = 5
    CONFLICT = 6
    INTERRUPTED = 130


def status_for(exc: BaseException) -> ExitStatus:
    """The exit status an error ends bt-get with (pure; cli.main is its only caller)."""
    if isinstance(exc, KeyboardInterrupt | errors.Interrupted):
        return ExitStatus.INTERRUPTED
    if isinstance(exc, errors.UsageError | ConfigError):
        return ExitStatus.USAGE
    if isinstance(exc, NotFound):
        return ExitStatus.NOT_FOUND
    if isinstance(exc, errors.Incomplete):
        return ExitStatus.INCOMPLETE
    if isinstance(exc, errors.VerifyFailed):
        return ExitStatus.VERIFY_FAILED
    if isinstance(exc, errors.ReplicaConflict):
        return ExitStatus.CONFLICT
    if isinstance(exc, BtswarmError):
        return ExitStatus.ERROR
    return ExitStatus.ERROR
