"""`bt-server share DIR/NAME`: a T3 joins the federation as a holder of a dataset it fetched whole.

The dataset directory is added to the site's shares (btserver/sharelist.py);
the site's daemon, `bt-server run` with `[server] kind = "T3"`, then
prepares it, publishes it to the repository and tells the tracker it can
seed it, exactly as a T2 does with its roots: seeds start on demand, stop
when idle, at most `max_seeds` at once. When no daemon answers at the
site's control URL one is started, detached from the terminal (its own
session, log and PID file in the state directory), so it outlives the
shell that shared; for the long run a service manager keeps it
(docs/bt-get.md, "Sharing what you fetched").

The daemon is asked to scan again (a signed POST /api/rescan) and its
/api/status is read until the scan that includes the share has finished
and the repository has answered its publication (`verdict`, pure).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from torrents.errors import BtswarmError, ConfigError, Unreachable
from torrents.servicekit.web import signed_request

from btserver import sharelist
from btserver.config import ServerConfig

PID_FILE = "bt-server.pid"  # <state>/: the daemon `share` started
LOG_FILE = "bt-server.log"
START_TIMEOUT = 60.0


class ShareError(BtswarmError):
    """The dataset could not be shared (refused by this site or by the repository)."""


@dataclass(frozen=True)
class Shared:
    name: str
    info_hash: str
    site: str
    kind: str
    control_url: str
    repository: dict[str, Any]  # the repository's answer to the publication (docs/contracts.md)
    pid: int | None  # the daemon's, when this site's state records it (one `share` started)
    started: bool  # this call started the daemon
    log: str | None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "info_hash": self.info_hash, "site": self.site, "kind": self.kind,
                "control_url": self.control_url, "repository": self.repository, "pid": self.pid,
                "started": self.started, "log": self.log}


def verdict(status: dict[str, Any], name: str, info_hash: str | None) -> tuple[str, Any]:
    """From a daemon's /api/status after the scan that read the share: ("done", dataset entry),
    ("wait", why) while the repository has not answered yet, or ("fail", why). Pure."""
    if status.get("error"):
        return "fail", status["error"]
    entry = next((d for d in status.get("datasets", []) if d.get("name") == name), None)
    if entry is None:
        why = [p.removeprefix(f"{name}: ") for p in status.get("problems", [])
               if p.startswith(f"{name}:") or f"/{name}" in p]
        return "fail", "; ".join(why[:5]) or "the site did not prepare it (see bt-server status)"
    if info_hash and entry.get("info_hash") != info_hash:
        return "fail", f"the site serves {entry.get('info_hash')}, not the {info_hash} fetched"
    answer = entry.get("repository")
    if answer is None:
        return "wait", "not yet published"
    if not answer.get("published"):
        return "fail", f"the repository refused it: {answer.get('problem') or 'no reason given'}"
    return "done", entry


def control_url(cfg: ServerConfig) -> str:
    return (cfg.control_url or f"http://{cfg.listen}").rstrip("/")


def recorded_pid(state: Path) -> int | None:
    """The daemon's PID from <state>/bt-server.pid, when that process still runs."""
    try:
        pid = int((state / PID_FILE).read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def start_daemon(config_path: str | None, state: Path) -> subprocess.Popen:
    """`bt-server run` in a session of its own (no terminal to hang up on it), logging to the state."""
    state.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "btserver", "run", *(["--config", config_path] if config_path else [])]
    with open(state / LOG_FILE, "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                close_fds=True)
    (state / PID_FILE).write_text(f"{proc.pid}\n")
    return proc


async def _status(http: aiohttp.ClientSession, url: str) -> dict[str, Any] | None:
    try:
        async with http.get(f"{url}/api/status", timeout=aiohttp.ClientTimeout(total=5)) as resp:
            doc = await resp.json(content_type=None) if resp.status == 200 else None
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _log_tail(state: Path, lines: int = 5) -> str:
    try:
        return " | ".join((state / LOG_FILE).read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


async def share(cfg: ServerConfig, config_path: str | None, path: Path, info_hash: str | None, *,
                wait: float, start: bool = True) -> Shared:
    """Share the dataset directory `path` as this T3 site; return once the repository lists it."""
    if cfg.kind != "T3":
        raise ConfigError("[server] kind", f"is {cfg.kind}: a site sharing what its users fetched is a T3 "
                                           "(set kind = \"T3\" in this site's [server] section)")
    if not cfg.repo:
        raise ConfigError("[server] repo", "is empty: a share is published to the federation's repository")
    state = Path(cfg.state)
    new = sharelist.Share(path.name, str(path.resolve()), info_hash)
    sharelist.add(state, new)
    url = control_url(cfg)
    deadline = time.monotonic() + wait
    async with aiohttp.ClientSession() as http:
        status = await _status(http, url)
        started = False
        if status is None:
            if not start:
                raise Unreachable(url, "no bt-server answers here: start this site's daemon (bt-server run)")
            proc = start_daemon(config_path, state)
            started = True
            done_after = 1  # its first scan reads the shares as they are now
            up_by = time.monotonic() + START_TIMEOUT
            while (status := await _status(http, url)) is None:
                if proc.poll() is not None:
                    (state / PID_FILE).unlink(missing_ok=True)
                    raise ShareError(url, f"the bt-server started here exited with {proc.returncode} "
                                          f"({_log_tail(state)}); its log: {state / LOG_FILE}")
                if time.monotonic() > up_by:
                    raise ShareError(url, f"the bt-server started here (pid {proc.pid}) does not answer after "
                                          f"{START_TIMEOUT:.0f} s; its log: {state / LOG_FILE}")
                await asyncio.sleep(0.2)
        if status.get("site") != cfg.site:
            raise ShareError(url, f"answers as site {status.get('site')!r}, not {cfg.site!r}: another site's "
                                  "bt-server listens at this site's control URL")
        if not started:
            code, answer = await signed_request(http, "POST", f"{url}/api/rescan", site=cfg.site,
                                                secret=cfg.secret, payload={})
            if code == 401:
                raise ShareError(url, "refused our signature: the daemon runs with another [server] secret")
            if code != 202 or not isinstance(answer, dict) or not isinstance(answer.get("done_after"), int):
                raise ShareError(url, f"POST /api/rescan answered HTTP {code} (a bt-server older than sharing?)")
            done_after = answer["done_after"]
        why = "the daemon has not scanned yet"
        while True:
            status = await _status(http, url)
            if status is not None and status.get("scans", 0) >= done_after:
                state_, result = verdict(status, new.name, info_hash)
                if state_ == "done":
                    return Shared(new.name, result["info_hash"], cfg.site, cfg.kind, url, result["repository"],
                                  recorded_pid(state), started, str(state / LOG_FILE) if started or
                                  recorded_pid(state) else None)
                if state_ == "fail":
                    raise ShareError(new.name, result)
                why = result
            if time.monotonic() > deadline:
                raise ShareError(new.name, f"{why} after {wait:.0f} s (the site's daemon goes on: see "
                                           f"bt-server status)")
            await asyncio.sleep(0.2)


def stop(state: Path, timeout: float = 30.0) -> int | None:
    """Stop the daemon a `share` started (SIGTERM, by the PID it recorded); its PID, or None if none ran."""
    pid = recorded_pid(state)
    if pid is None:
        return None
    os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise ShareError(str(pid), f"still running {timeout:.0f} s after SIGTERM")
    (state / PID_FILE).unlink(missing_ok=True)
    return pid
