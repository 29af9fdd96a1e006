"""One base exception for btswarm; every message reads `subject: problem`.

Each class carries the exit status a command ends with when it is the
error that ends it (torrents.exitstatus).
"""

from __future__ import annotations

from torrents.exitstatus import ExitStatus


class BtswarmError(Exception):
    """Base of every error btswarm raises on purpose.

    `subject` names what is wrong (a file, a key, a dataset, a peer) and
    `problem` says what; both stay available as attributes for callers
    that translate errors at an edge (HTTP middleware, a CLI's main).
    """

    exit_status = ExitStatus.ERROR

    def __init__(self, subject: object, problem: str) -> None:
        self.subject = str(subject)
        self.problem = problem
        super().__init__(f"{self.subject}: {problem}")


class BencodeError(BtswarmError):
    """Malformed, oversized or too deeply nested bencoded data."""


class MetainfoError(BtswarmError):
    """A .torrent that is unsafe, inconsistent or not a torrent at all."""


class DatasetError(BtswarmError):
    """A dataset, file name or manifest that cannot be used."""


class ConfigError(BtswarmError):
    """A bad configuration file, key or value."""

    exit_status = ExitStatus.USAGE


class AuthError(BtswarmError):
    """A control request that is unsigned, stale, replayed or wrongly signed."""


class Forbidden(BtswarmError):
    """A correctly signed request that the sender's role does not allow (HTTP 403): a T3 publishing a
    new version, a site claiming another kind than the federation's configuration gives it."""


class TokenRefused(BtswarmError):
    """A restricted dataset asked for without a token that may read it (torrents/tokens.py): `status` 401 (none,
    or not a good one) or 403 (a good token of another scope); `error` and `scope` are RFC 6750's."""

    def __init__(self, subject: object, problem: str, *, status: int, error: str | None = None,
                 scope: str | None = None) -> None:
        super().__init__(subject, problem)
        self.status, self.error, self.scope = status, error, scope


class NotFound(BtswarmError):
    """A named thing (dataset, info-hash, site) that does not exist."""

    exit_status = ExitStatus.NOT_FOUND


class Conflict(BtswarmError):
    """A request that contradicts itself or the current state (HTTP 409)."""


class UsageError(BtswarmError):
    """A bad argument or option combination."""

    exit_status = ExitStatus.USAGE


class Unreachable(BtswarmError):
    """A service that did not answer."""

    exit_status = ExitStatus.UNREACHABLE
