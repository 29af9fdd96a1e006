"""Exit statuses of every btswarm command: one number, one meaning, everywhere.

Scripts and batch systems branch on these (docs/cli.md lists them), so a
number never changes meaning: INCOMPLETE means "run me again, I resume",
VERIFY_FAILED "the bytes are wrong, do not use them", CONFLICT and BLOCKED
"a rerun alone will not help". Each error class says its own status
(`exit_status`), so the mapping lives with the errors, not in each command.
"""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    OK = 0
    ERROR = 1  # any error not below: a file error, a service that failed, an internal error
    USAGE = 2  # bad arguments or configuration
    NOT_FOUND = 3  # a named thing does not exist: a dataset, a version, a site
    INCOMPLETE = 4  # bt-get stopped short (timeout, stall); a rerun resumes
    VERIFY_FAILED = 5  # downloaded bytes contradict the catalog's checksums
    CONFLICT = 6  # the sites' replicas disagree on what the dataset is
    BLOCKED = 7  # some files come from no connected seed
    PROBLEMS = 8  # bt-server scan: some datasets or files were refused
    UNREACHABLE = 9  # a service did not answer (bt-server status)
    INTERRUPTED = 130  # Ctrl-C or SIGTERM


def status_for(exc: BaseException) -> ExitStatus:
    """The status an exception ends a command with (the errors carry it)."""
    if isinstance(exc, KeyboardInterrupt):
        return ExitStatus.INTERRUPTED
    return getattr(exc, "exit_status", ExitStatus.ERROR)
