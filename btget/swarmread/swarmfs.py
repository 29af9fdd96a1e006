"""fsspec filesystem for `btswarm://NAME/LFN`: files read straight from the swarm through `bt-get --serve`.

    import uproot
    tree = uproot.open("btswarm://data18_13TeV.00348885.physics_Main.ntuple/ntuple._0001.root:nominal")
    fsspec.open("btswarm://NAME/LFN", server="http://127.0.0.1:8765").open().read(100)

Registered for the `btswarm` protocol by the `fsspec.specs` entry point, so
uproot, coffea and anything else that opens URLs through fsspec take it.
Storage options (or environment):

- `server` ($BTSWARM_SERVE): the URL of a running `bt-get NAME --serve`;
  without one, the first read of a dataset starts `bt-get NAME --serve` on a
  free loopback port, shared by every filesystem of this process and
  stopped when the process exits (it also stops by itself once this process
  is gone, however that happens).
- `repo` (else bt-get's: $BTSWARM_GET_REPO, then [get] repo), `cache` ($BTSWARM_CACHE, default
  ~/.cache/btswarm/serve: where the pieces land, and stay for next time),
  `prefetch` (default True: the rest of the dataset keeps arriving at low
  priority), `extra_args` (more bt-get arguments, e.g. ["--listen", IP]).

Reading is plain HTTP range requests (fsspec's HTTP filesystem does the
work); this class only turns NAME/LFN into the server's URL.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fsspec.asyn import AsyncFileSystem, sync, sync_wrapper
from fsspec.implementations.http import HTTPFileSystem

from torrents.errors import BtswarmError

START_TIMEOUT = 120.0  # seconds for bt-get --serve to resolve the dataset and listen


def _default_cache() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.environ.get("BTSWARM_CACHE") or os.path.join(base, "btswarm", "serve")


class _Launched:
    """`bt-get NAME --serve` processes this process started, one per (dataset, repo, cache, prefetch)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.servers: dict[tuple, tuple[subprocess.Popen, str]] = {}
        atexit.register(self.stop_all)

    def url(self, name: str, repo: str | None, cache: str, prefetch: bool, extra: tuple[str, ...]) -> str:
        key = (name, repo, cache, prefetch, extra)
        with self.lock:
            known = self.servers.get(key)
            if known is not None and known[0].poll() is None:
                return known[1]
            proc, url = self._start(name, repo, cache, prefetch, extra)
            self.servers[key] = (proc, url)
            return url

    @staticmethod
    def _start(name: str, repo: str | None, cache: str, prefetch: bool, extra: tuple[str, ...]
               ) -> tuple[subprocess.Popen, str]:
        Path(cache).mkdir(parents=True, exist_ok=True)
        command = [str(Path(sys.executable).parent / "bt-get"), name, "--serve", "127.0.0.1:0", "--json",
                   "-o", cache, "--parent-pid", str(os.getpid()), *extra]
        if repo:
            command += ["--repo", repo]
        if not prefetch:
            command.append("--no-prefetch")
        log = open(Path(cache) / f".bt-get-serve-{os.getpid()}.log", "ab")
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log)
        log.close()
        line = _readline(proc, START_TIMEOUT)
        if not line:
            code = proc.poll()
            _stop(proc)
            raise BtswarmError(f"btswarm://{name}", f"bt-get --serve did not start (exit {code}; "
                               f"see {log.name})")
        return proc, json.loads(line)["url"].rstrip("/").rsplit("/", 1)[0]

    def stop_all(self) -> None:
        with self.lock:
            for proc, _url in self.servers.values():
                _stop(proc)
            self.servers.clear()


def _readline(proc: subprocess.Popen, timeout: float) -> str:
    """The first stdout line (bt-get --serve --json prints it once listening), or '' on exit or timeout."""
    result: list[str] = []
    reader = threading.Thread(target=lambda: result.append(proc.stdout.readline().decode()), daemon=True)
    reader.start()
    reader.join(timeout)
    return result[0] if result else ""


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()  # by PID; bt-get saves its state and leaves the swarm
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    if proc.stdout:
        proc.stdout.close()


LAUNCHED = _Launched()


def _is_url(path: Any) -> bool:
    return isinstance(path, str) and path.startswith(("http://", "https://"))


class SwarmFileSystem(HTTPFileSystem):
    """btswarm://NAME/LFN → http://SERVER/NAME/LFN of a `bt-get NAME --serve`."""

    protocol = "btswarm"

    def __init__(self, server: str | None = None, repo: str | None = None, cache: str | None = None,
                 prefetch: bool = True, extra_args: tuple[str, ...] | list[str] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.server = (server or os.environ.get("BTSWARM_SERVE") or "").rstrip("/") or None
        self.repo = repo  # else bt-get's own: $BTSWARM_GET_REPO, then its config
        self.cache = cache or _default_cache()
        self.prefetch = prefetch
        self.extra_args = tuple(extra_args)

    @property
    def fsid(self) -> str:
        return "btswarm"

    @classmethod
    def _strip_protocol(cls, path: str) -> str:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        if path.startswith("btswarm://"):
            path = path[len("btswarm://"):]
        return path.strip("/")

    @classmethod
    def _parent(cls, path: str) -> str:
        path = cls._strip_protocol(path)
        return path.rsplit("/", 1)[0] if "/" in path else ""

    def unstrip_protocol(self, name: str) -> str:
        return "btswarm://" + self._strip_protocol(name)

    async def _base(self, name: str) -> str:
        if self.server:
            return self.server
        return await asyncio.to_thread(LAUNCHED.url, name, self.repo, self.cache, self.prefetch, self.extra_args)

    async def _url(self, path: str) -> str:
        if _is_url(path):  # fsspec's HTTP file objects come back with the URL they were given
            return path
        path = self._strip_protocol(path)
        name, _, lfn = path.partition("/")
        if not name:
            raise FileNotFoundError("btswarm://: no dataset name (btswarm://NAME/LFN)")
        base = await self._base(name)
        return f"{base}/{quote(name)}/{quote(lfn)}" if lfn else f"{base}/{quote(name)}/"

    # --- what fsspec calls, with paths turned into URLs -------------------------------------------
    async def _cat_file(self, path, start=None, end=None, **kwargs):
        return await super()._cat_file(await self._url(path), start=start, end=end, **kwargs)

    async def _info(self, path, **kwargs):
        if _is_url(path):
            return await super()._info(path, **kwargs)
        path = self._strip_protocol(path)
        if "/" not in path:
            return {"name": path, "size": 0, "type": "directory"}
        info = await super()._info(await self._url(path), **kwargs)
        return {**info, "name": path, "type": "file"}

    async def _ls(self, path, detail=True, **kwargs):
        path = self._strip_protocol(path)
        name, _, prefix = path.partition("/")
        session = await self.set_session()
        async with session.get(await self._url(name)) as r:
            if r.status == 404:
                raise FileNotFoundError(path)
            r.raise_for_status()
            listing = await r.json()
        entries: dict[str, dict] = {}
        under = prefix + "/" if prefix else ""
        for f in listing["files"]:
            if not f["lfn"].startswith(under):
                if f["lfn"] == prefix:
                    return [{"name": f"{name}/{f['lfn']}", "size": f["size"], "type": "file"}] if detail \
                        else [f"{name}/{f['lfn']}"]
                continue
            rest = f["lfn"][len(under):]
            if "/" in rest:
                sub = f"{name}/{under}{rest.split('/', 1)[0]}"
                entries.setdefault(sub, {"name": sub, "size": 0, "type": "directory"})
            else:
                entries[f"{name}/{f['lfn']}"] = {"name": f"{name}/{f['lfn']}", "size": f["size"], "type": "file"}
        if not entries and prefix:
            raise FileNotFoundError(path)
        out = sorted(entries.values(), key=lambda e: e["name"])
        return out if detail else [e["name"] for e in out]

    ls = sync_wrapper(_ls)  # HTTPFileSystem binds its own _ls to the name

    async def _exists(self, path, **kwargs):
        try:
            await self._info(path)
            return True
        except FileNotFoundError:
            return False

    async def _isfile(self, path, **kwargs):
        return "/" in self._strip_protocol(path) and await self._exists(path)

    async def _isdir(self, path):
        try:
            return (await self._info(path))["type"] == "directory"
        except FileNotFoundError:
            return False

    async def _get_file(self, rpath, lpath, **kwargs):
        return await super()._get_file(await self._url(rpath), lpath, **kwargs)

    async def _glob(self, path, maxdepth=None, **kwargs):
        return await AsyncFileSystem._glob(self, path, maxdepth=maxdepth, **kwargs)

    def _open(self, path, mode="rb", **kwargs):
        url = sync(self.loop, self._url, path)
        return super()._open(url, mode=mode, **kwargs)

    async def open_async(self, path, mode="rb", **kwargs):
        return await super().open_async(await self._url(path), mode=mode, **kwargs)

    def ukey(self, path):
        return f"btswarm://{self._strip_protocol(path)}"
