"""`bt-get --share`: hand a verified, whole dataset to this T3's bt-server for the long run.

bt-get seeds only while it runs (`--seed-time`, `--seed-ratio`). Sharing
means joining the federation as a holder: the dataset published as held
by this T3 site and seeded on demand by its bt-server, under the same
idle and capacity rules as a T2's, long after bt-get has ended. That is
bt-server's job, so bt-get runs `bt-server share DIR/NAME` (the command
installed beside it) with the same configuration file, and reports its
answer; it imports nothing of bt-server (they are separate deployables).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from torrents.errors import BtswarmError

WAIT = "10m"  # for the site to hash the dataset and the repository to answer; the daemon goes on after


class ShareError(BtswarmError):
    """`bt-server share` did not share the dataset (its reason is the problem)."""


def bt_server() -> str:
    """The bt-server command installed beside this bt-get (same environment), else the one on PATH."""
    beside = Path(sys.executable).parent / "bt-server"
    if beside.is_file():
        return str(beside)
    found = shutil.which("bt-server")
    if found is None:
        raise ShareError("--share", "bt-server is not installed (it comes with bt-get: pip install btswarm)")
    return found


def command(directory: Path, info_hash: str, config_path: str | None, wait: str = WAIT) -> list[str]:
    return [bt_server(), "share", str(directory), "--info-hash", info_hash, "--wait", wait, "--json",
            *(["--config", config_path] if config_path else [])]


def said(stderr: str) -> str:
    """bt-server's one-line error without its prefix (its last line: logs may come before it)."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else "no reason given"
    return last.split("bt-server: error: ", 1)[1] if "bt-server: error: " in last else last


def share(directory: Path, info_hash: str, config_path: str | None, timeout: float = 900.0) -> dict[str, Any]:
    """Run `bt-server share`; its JSON answer (name, site, kind, pid, repository's answer) or ShareError."""
    try:
        done = subprocess.run(command(directory, info_hash, config_path), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ShareError("--share", f"bt-server share did not answer in {timeout:.0f} s") from None
    if done.returncode != 0:
        raise ShareError("--share", said(done.stderr))
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        raise ShareError("--share", f"bt-server share answered no JSON: {done.stdout[:200]!r}") from None
    return doc if isinstance(doc, dict) else {}


def human(doc: dict[str, Any]) -> str:
    repo = doc.get("repository") or {}
    daemon = f"bt-server pid {doc['pid']}" if doc.get("pid") else "bt-server"
    return (f"shared: {doc.get('name')} as {doc.get('kind')} site {doc.get('site')} "
            f"(repository: {repo.get('result') or 'published'}); {daemon} at {doc.get('control_url')} seeds it on "
            f"demand after bt-get ends")
