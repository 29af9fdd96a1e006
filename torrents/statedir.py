"""A daemon's state directory, checked when it starts: there, and writable by the user it runs as.

The usual way to break one: run the daemon once by hand as root, then
start it as its service user (deploy/systemd/); the directory, or the
repository's catalog in it, is then root's. Said at start, in one line
naming the fix, instead of a dataset refused later or a database error.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path
from typing import Iterable

from torrents.errors import ConfigError


def check_writable(key: str, path: str | os.PathLike, files: Iterable[str] = ()) -> Path:
    """Create `path` if missing; ConfigError naming `key` when it, or one of `files` in it, cannot be written."""
    directory = Path(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(key, f"{directory}: cannot create ({exc.strerror})") from None
    if not directory.is_dir():
        raise ConfigError(key, f"{directory}: not a directory")
    for target in [directory, *(directory / name for name in files)]:
        if target.exists() and not os.access(target, os.W_OK | (os.X_OK if target.is_dir() else 0)):
            user, owner = _user(os.geteuid()), _user(target.stat().st_uid)
            raise ConfigError(key, f"{target}: not writable by {user} (owner {owner}); give the state directory to "
                                   f"the user the service runs as (chown -R {user} {directory})")
    return directory


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
