"""A real Rucio server on loopback, for tests, `btswarm up --rucio` and benchmarks.

The PyPI `rucio` package (the `rucio` extra of setup.cfg) holds both the
server and its client library. `LocalRucio(DIR)` writes DIR/etc/rucio.cfg
and DIR/etc/alembic.ini (a SQLite database in DIR), bootstraps the
database once (schema, base VO, root account with a userpass identity),
serves Rucio's own Flask application with werkzeug as a process of its own
on a free loopback port, waits for /ping and stops it by PID. The admin
helpers (RSEs with a POSIX protocol on a prefix directory, scopes,
datasets registered from files on disk) go through Rucio's client library,
so what bt-server reads back is what a real Rucio made of it.

Rucio reads its configuration once per process from $RUCIO_CONFIG: the
server and bootstrap run as child processes with it set, and `client()`
sets it in this process (one local Rucio per process).

    python -m btswarm.localrucio DIR      # run one until Ctrl-C (prints its URL and login)
"""

from __future__ import annotations

import configparser
import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from btswarm.federation import wait_for
from torrents.errors import BtswarmError
from torrents.procs import free_port, stop

ACCOUNT = "root"
USERNAME = "btswarm"
# The blueprints a catalog needs; `traces` and `opendata` want a message
# broker (they fail at start with "Could not load brokers from configuration").
ENDPOINTS = ("accounts", "auth", "config", "dids", "identities", "locks", "meta_conventions", "ping",
             "replicas", "rses", "rules", "scopes")


class RucioError(BtswarmError):
    """The local Rucio could not be set up, started or asked."""


class LocalRucio:
    def __init__(self, root: str | os.PathLike, host: str = "127.0.0.1", port: int = 0) -> None:
        self.root = Path(root).resolve()
        self.host = host
        self.port = port
        self.etc = self.root / "etc"
        self.cfg_path = self.etc / "rucio.cfg"
        self.password_file = self.etc / "password"
        self.log_path = self.root / "server.log"
        self.proc: subprocess.Popen | None = None
        self._client: Any = None

    @classmethod
    def running_at(cls, root: str | os.PathLike) -> "LocalRucio | None":
        """The LocalRucio already serving from `root` (its rucio.cfg names the URL), or None."""
        cfg = Path(root).resolve() / "etc" / "rucio.cfg"
        parser = configparser.RawConfigParser()
        if not parser.read(cfg):
            return None
        url = urllib.parse.urlsplit(parser.get("client", "rucio_host", fallback=""))
        if not url.hostname or not url.port:
            return None
        server = cls(root, host=url.hostname, port=url.port)
        return server if server.ping() else None

    # -- places and credentials ------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.root / 'rucio.db'}"

    @property
    def password(self) -> str:
        return self.password_file.read_text().strip()

    def env(self) -> dict[str, str]:
        return {**os.environ, "RUCIO_CONFIG": str(self.cfg_path)}

    # -- setting up ------------------------------------------------------------------------
    def configure(self) -> None:
        """Write rucio.cfg and alembic.ini (a password is made once and kept)."""
        self.etc.mkdir(parents=True, exist_ok=True)
        if not self.password_file.exists():
            fd = os.open(self.password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(16))
        if not self.port:
            self.port = free_port(self.host)
        (self.root / "trace").mkdir(exist_ok=True)
        _write_ini(self.etc / "alembic.ini", alembic_ini(self.db_url, migrations_dir()))
        _write_ini(self.cfg_path, rucio_cfg(self.root, self.url, self.db_url, self.password), mode=0o600)

    def bootstrap(self, timeout: float = 120.0) -> None:
        """Schema, base VO and root account, once: a database that has them is left alone."""
        marker = self.root / "bootstrapped"
        if marker.exists():
            return
        code = ("from rucio.db.sqla.util import build_database, create_base_vo, create_root_account\n"
                "build_database(); create_base_vo(); create_root_account()\n")
        done = subprocess.run([sys.executable, "-c", code], env=self.env(), capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise RucioError(self.db_url, "bootstrap failed: " + " | ".join(tail))
        marker.touch()

    def start(self, timeout: float = 60.0) -> "LocalRucio":
        """configure, bootstrap and serve; returns once /ping answers (or RucioError with the log tail)."""
        self.configure()
        self.bootstrap()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "btswarm.localrucio", "--serve", str(self.root),
                                          self.host, str(self.port)],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env=self.env(), start_new_session=True)
        try:
            wait_for(lambda: self.proc.poll() is not None or self.ping(), timeout, "rucio /ping", interval=0.1)
        except BtswarmError:
            self.stop()
            raise RucioError(self.url, f"no answer to /ping after {timeout:g} s; {self.log_path}:\n"
                                       f"{self.log_tail()}") from None
        if self.proc.poll() is not None:
            code = self.proc.returncode
            self.proc = None
            raise RucioError(self.url, f"server exited with code {code}; {self.log_path}:\n{self.log_tail()}")
        return self

    def ping(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/ping", timeout=2) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc, timeout=15)
            self.proc = None

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError as exc:
            return f"({exc})"

    def __enter__(self) -> "LocalRucio":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- Rucio's client library --------------------------------------------------------------
    def client(self) -> Any:
        """A rucio.client.Client logged in as root (userpass)."""
        if self._client is None:
            configured = os.environ.get("RUCIO_CONFIG")
            if configured and configured != str(self.cfg_path) and "rucio.common.config" in sys.modules:
                raise RucioError(self.cfg_path, f"this process already uses the Rucio config {configured}")
            os.environ["RUCIO_CONFIG"] = str(self.cfg_path)
            from rucio.client import Client

            self._client = Client(rucio_host=self.url, auth_host=self.url, account=ACCOUNT, auth_type="userpass",
                                  creds={"username": USERNAME, "password": self.password})
        return self._client

    def add_rse(self, rse: str, prefix: str | os.PathLike, *, hostname: str = "localhost") -> Path:
        """A deterministic POSIX RSE whose files live under `prefix` (created); the prefix.
        An RSE of that name already there is kept as it is."""
        from rucio.common.exception import Duplicate

        prefix = Path(prefix).resolve()
        prefix.mkdir(parents=True, exist_ok=True)
        c = self.client()
        try:
            c.add_rse(rse, deterministic=True)
        except Duplicate:
            return prefix
        # No quota on a new RSE: `rucio upload` would add the replica and then fail its rule
        # ("not enough quota left"), still exiting 0. -1 is Rucio's "no limit".
        c.set_local_account_limit(ACCOUNT, rse, -1)
        c.add_protocol(rse, {"scheme": "file", "hostname": hostname, "port": 0, "prefix": f"{prefix}/",
                             "impl": "rucio.rse.protocols.posix.Default",
                             "domains": {"lan": {"read": 1, "write": 1, "delete": 1},
                                         "wan": {"read": 1, "write": 1, "delete": 1, "third_party_copy_read": 1,
                                                 "third_party_copy_write": 1}}})
        return prefix

    def add_scope(self, scope: str) -> None:
        from rucio.common.exception import Duplicate

        with contextlib.suppress(Duplicate):
            self.client().add_scope(ACCOUNT, scope)

    def pfns(self, rse: str, scope: str, lfns: Iterable[str]) -> dict[str, str]:
        """LFN → the PFN this RSE's protocol gives it (the `hash` lfn2pfn: prefix/scope/h1/h2/LFN)."""
        lfns = list(lfns)
        found: dict[str, str] = {}
        for start in range(0, len(lfns), 200):  # LFNs go in the query string: keep URLs short
            found.update(self.client().lfns2pfns(rse, [f"{scope}:{lfn}" for lfn in lfns[start:start + 200]],
                                                 operation="write", scheme="file"))
        return {lfn: found[f"{scope}:{lfn}"] for lfn in lfns}

    def place(self, rse: str, scope: str, files: Mapping[str, str | os.PathLike], *,
              link: bool = False) -> dict[str, Path]:
        """Copy (or hard-link) files (LFN → source path) to where the RSE keeps them; LFN → path on disk."""
        import shutil

        out = {}
        for lfn, pfn in self.pfns(rse, scope, files).items():
            dest = Path(pfn_path(pfn))
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.unlink(missing_ok=True)
            try:
                if not link:
                    raise OSError("copy asked for")
                os.link(files[lfn], dest)
            except OSError:  # another file system, or a copy wanted (a replica of its own)
                shutil.copyfile(files[lfn], dest)
            out[lfn] = dest
        return out

    def register_files(self, rse: str, scope: str, files: Mapping[str, str | os.PathLike]) -> list[dict]:
        """add_replicas for files already at their RSE paths (LFN → path), with bytes and adler32."""
        # Rucio's own adler32 (what `rucio upload` registers), not ours: the
        # checks downstream are then against an implementation we did not write.
        from rucio.common.checksum import adler32

        entries = [{"scope": scope, "name": lfn, "bytes": os.path.getsize(path), "adler32": adler32(path)}
                   for lfn, path in files.items()]
        # In bulk, but on SQLite an add_replicas of about 1,000 files fails (HTTP 500
        # DatabaseException; 900 pass): 500 at a time.
        for start in range(0, len(entries), 500):
            self.client().add_replicas(rse, entries[start:start + 500])
        return entries

    def add_dataset(self, scope: str, name: str, lfns: Iterable[str]) -> None:
        """add_dataset (kept if it exists), then attach_dids of the files (registered already) to it."""
        from rucio.common.exception import DataIdentifierAlreadyExists

        c = self.client()
        with contextlib.suppress(DataIdentifierAlreadyExists):
            c.add_dataset(scope, name)
        dids = [{"scope": scope, "name": lfn} for lfn in lfns]
        for start in range(0, len(dids), 500):
            c.attach_dids_to_dids([{"scope": scope, "name": name, "dids": dids[start:start + 500]}],
                                  ignore_duplicate=True)

    def add_datasets(self, scope: str, datasets: Mapping[str, Iterable[str]]) -> None:
        """Many new datasets (name → LFNs, the files registered already) in a few bulk calls."""
        c = self.client()
        names = list(datasets)
        for start in range(0, len(names), 500):
            chunk = names[start:start + 500]
            c.add_datasets([{"scope": scope, "name": n} for n in chunk])
            attachments = [{"scope": scope, "name": n, "dids": [{"scope": scope, "name": lfn} for lfn in datasets[n]]}
                           for n in chunk if datasets[n]]  # Rucio takes no empty attachment
            if attachments:
                c.attach_dids_to_dids(attachments, ignore_duplicate=True)

    def register_dataset(self, rse: str, scope: str, name: str, source: str | os.PathLike,
                         *, link: bool = False) -> dict[str, Path]:
        """Every regular file directly in `source` placed at `rse`, registered there with its
        bytes and adler32, and attached to dataset scope:name (created if new). Called for a
        second RSE, it adds that RSE's replicas to the same dataset. LFN → path at the RSE."""
        files = {p.name: p for p in sorted(Path(source).iterdir()) if p.is_file() and not p.name.startswith(".")}
        if not files:
            raise RucioError(source, "no files to register")
        placed = self.place(rse, scope, files, link=link)
        self.register_files(rse, scope, placed)
        self.add_dataset(scope, name, placed)
        return placed


def pfn_path(pfn: str) -> str:
    """file://host/abs/path (or file:///abs/path) → /abs/path."""
    parts = urllib.parse.urlsplit(pfn)
    if parts.scheme != "file":
        raise RucioError(pfn, "not a file:// PFN")
    return parts.path  # Rucio joins PFNs without percent-encoding: nothing to decode


def migrations_dir() -> Path:
    """rucio/db/sqla/migrate_repo of the installed package (alembic's script_location)."""
    try:
        import rucio.db.sqla.migrate_repo as repo
    except ImportError as exc:
        raise RucioError("rucio", f"the Rucio server package is not installed ({exc}); "
                                  "pip install -e '.[rucio]'") from None
    return Path(repo.__file__).parent


def rucio_cfg(root: Path, url: str, db_url: str, password: str) -> dict[str, dict[str, str]]:
    """The settings this server needs; each one was a failure at start or bootstrap until set."""
    return {
        "common": {"logdir": str(root / "log"), "loglevel": "INFO"},
        "database": {"default": db_url},
        "alembic": {"cfg": str(root / "etc" / "alembic.ini")},
        "bootstrap": {"userpass_identity": USERNAME, "userpass_pwd": password,
                      "userpass_email": "btswarm@localhost"},
        "client": {"rucio_host": url, "auth_host": url, "account": ACCOUNT, "auth_type": "userpass",
                   "username": USERNAME, "password": password,
                   # not the shared /tmp/<user>/.rucio_<account>/ of every Rucio client on the machine
                   "auth_token_file_path": str(root / "token" / "auth_token")},
        "trace": {"tracedir": str(root / "trace")},
        "api": {"endpoints": ",".join(ENDPOINTS)},
        "policy": {"permission": "generic", "schema": "generic", "lfn2pfn_algorithm_default": "hash"},
    }


def alembic_ini(db_url: str, migrations: Path) -> dict[str, dict[str, str]]:
    # build_database stamps the schema with alembic, which also reads its
    # logging sections from this file (without them: KeyError 'formatters').
    return {
        "alembic": {"script_location": str(migrations), "sqlalchemy.url": db_url},
        "loggers": {"keys": "root,sqlalchemy,alembic"},
        "handlers": {"keys": "console"},
        "formatters": {"keys": "generic"},
        "logger_root": {"level": "WARN", "handlers": "console", "qualname": ""},
        "logger_sqlalchemy": {"level": "WARN", "handlers": "", "qualname": "sqlalchemy.engine"},
        "logger_alembic": {"level": "WARN", "handlers": "", "qualname": "alembic"},
        "handler_console": {"class": "StreamHandler", "args": "(sys.stderr,)", "level": "NOTSET",
                            "formatter": "generic"},
        "formatter_generic": {"format": "%%(levelname)-5.5s [%%(name)s] %%(message)s"},
    }


def _write_ini(path: Path, sections: Mapping[str, Mapping[str, str]], mode: int = 0o644) -> None:
    parser = configparser.RawConfigParser()
    for name, values in sections.items():
        parser[name] = dict(values)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        parser.write(f)


@contextlib.contextmanager
def running(root: str | os.PathLike, **kwargs: Any) -> Iterator[LocalRucio]:
    """A started LocalRucio, stopped whatever happens."""
    server = LocalRucio(root, **kwargs)
    try:
        yield server.start()
    finally:
        server.stop()


def _serve(root: str, host: str, port: int) -> None:
    """The server process: Rucio's Flask app under werkzeug, one worker (SQLite takes one writer)."""
    from werkzeug.serving import run_simple

    from rucio.web.rest.flaskapi.v1.main import application

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    run_simple(host, port, application, threaded=False, use_reloader=False, use_debugger=False)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--serve"]:
        _serve(argv[1], argv[2], int(argv[3]))
        return 0
    if len(argv) != 1:
        print("usage: python -m btswarm.localrucio DIR", file=sys.stderr)
        return 2
    with running(argv[0]) as server:
        print(f"rucio {server.url}  account {ACCOUNT}  username {USERNAME}  password file {server.password_file}"
              f"  RUCIO_CONFIG={server.cfg_path}", flush=True)
        try:
            while server.proc is not None and server.proc.poll() is None:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
