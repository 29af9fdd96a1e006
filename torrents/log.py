"""Logging set-up for entry points (libraries only get named loggers).

Logs go to stderr, and nowhere else: under systemd that is the journal,
elsewhere whatever the operator redirects it to (a file rotated with
logrotate's copytruncate; docs/deploy-site.md). When stderr is the journal
($JOURNAL_STREAM names it), lines carry their syslog priority (`<4>` for a
warning) so `journalctl -p warning` selects them, and no timestamp of their
own: the journal keeps one.
"""

from __future__ import annotations

import logging
import os
import sys


NOTICE = "btswarm.notice"  # lines for the operator at any verbosity: a daemon's start, its readiness


def notice() -> logging.Logger:
    return logging.getLogger(NOTICE)


def setup(verbosity: int = 0, name: str = "btswarm") -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    if to_journal():
        handler.setFormatter(JournalFormatter(f"{name} %(levelname)s %(name)s: %(message)s"))
    else:
        handler.setFormatter(logging.Formatter(f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    if verbosity < 2:
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    logging.getLogger(NOTICE).setLevel(logging.INFO)


def to_journal() -> bool:
    """Whether stderr is the systemd journal: $JOURNAL_STREAM is its device:inode (systemd.exec(5))."""
    dev, _, ino = os.environ.get("JOURNAL_STREAM", "").partition(":")
    if not (dev.isdigit() and ino.isdigit()):
        return False
    try:
        st = os.fstat(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):  # no stderr, or one without a descriptor
        return False
    return (st.st_dev, st.st_ino) == (int(dev), int(ino))


class JournalFormatter(logging.Formatter):
    """A record as `<priority>text`, the prefix journald reads as the line's syslog level."""

    PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3, logging.CRITICAL: 2}

    def format(self, record: logging.LogRecord) -> str:
        priority = self.PRIORITY.get(record.levelno, 6 if record.levelno < logging.WARNING else 3)
        # Every line of a traceback with the record's level, not the journal's default.
        return "\n".join(f"<{priority}>{line}" for line in super().format(record).split("\n"))
