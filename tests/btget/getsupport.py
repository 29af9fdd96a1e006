"""Helpers for bt-get tests: run the real command, compare bytes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

from tests.support import command


def bt_get(*args: str, timeout: float = 60, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the real bt-get console script, bounded in time."""
    return subprocess.run([command("bt-get"), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def bt_get_json(*args: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess, dict]:
    result = bt_get(*args, "--json", timeout=timeout)
    try:
        return result, json.loads(result.stdout)
    except ValueError:
        raise AssertionError(f"no JSON on stdout (exit {result.returncode}): {result.stdout!r} {result.stderr!r}")


def same_bytes(a: Path, b: Path) -> bool:
    return a.stat().st_size == b.stat().st_size and a.read_bytes() == b.read_bytes()


async def bt_get_async(*args: str, env: dict | None = None, timeout: float = 60) -> tuple[int, str, str]:
    """bt-get from an async test: the event loop keeps serving a repository stand-in meanwhile."""
    proc = await asyncio.create_subprocess_exec(command("bt-get"), *args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE, env={**os.environ, **(env or {})})
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode, out.decode(), err.decode()
