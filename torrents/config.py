"""Configuration: one TOML file, sections [get] [server] [tracker] [repo].

Found via --config, $BTSWARM_CONFIG, ~/.config/btswarm/config.toml,
/etc/btswarm/config.toml (the first that exists; none is fine: the defaults
run a federation on one host). Environment variables BTSWARM_<SECTION>_<KEY>
override the file, and command-line flags override both (the commands pass
them as `overrides`). Every key is checked once, here: an unknown key or a
value of the wrong type is an error naming the file and the key.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import os
import re
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from torrents.errors import ConfigError


def default_state_dir(part: str) -> str:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "btswarm", part)


@dataclass(frozen=True)
class GetConfig:
    repo: str = "http://127.0.0.1:8080"
    output: str = "."
    workers: int = 1
    listen: str = "127.0.0.1"  # address of the libtorrent sessions; ports are chosen free
    seed_time: float = 0.0
    seed_ratio: float = 0.0
    timeout: float = 0.0  # 0: no limit
    stall_timeout: float = 300.0
    max_connections: int = 200


@dataclass(frozen=True)
class RucioConfig:
    """[server.rucio]: the site's datasets as its Rucio catalog knows them (docs/deploy-site.md)."""

    server: str = ""  # Rucio REST URL; empty: Rucio is not used
    auth_server: str = ""  # default: server
    account: str = ""
    username: str = ""  # userpass identity
    password: str = ""
    password_file: str = ""  # instead of password: a file holding it (mode 0600)
    token_file: str = ""  # instead of userpass: a file holding an X-Rucio-Auth-Token, re-read at each refresh
    vo: str = ""  # multi-VO Rucio only
    rse: str = ""  # this site's storage element
    datasets: tuple[str, ...] = ()  # DIDs and DID patterns (scope:name, scope:prefix.*)
    # PFN prefix → local path prefix, e.g. "root://door:1094//pnfs/x/" = "/pnfs/x/". A PFN
    # no prefix matches is a problem for its file; the local prefixes may be served.
    pfn_map: Mapping[str, str] = field(default_factory=dict)
    schemes: tuple[str, ...] = ("file", "root")
    refresh: float = 300.0  # seconds between refreshes
    timeout: float = 60.0  # seconds per request to Rucio
    retry_min: float = 5.0  # first retry after a failed refresh; doubles up to `refresh`


@dataclass(frozen=True)
class ServerConfig:
    site: str = "site1"
    secret: str = "btswarm-dev-secret"
    listen: str = "127.0.0.1:8700"  # control API
    peer_listen: str = "127.0.0.1:6881"  # libtorrent
    control_url: str = ""  # as others reach it; default http://<listen>
    state: str = field(default_factory=lambda: default_state_dir("server"))
    roots: tuple[str, ...] = ()  # each subdirectory of a root is a dataset
    storage_roots: tuple[str, ...] = ()  # where manifest PFNs may point (roots always may)
    manifests: tuple[str, ...] = ()
    tracker: str = "http://127.0.0.1:6969"
    repo: str = "http://127.0.0.1:8080"
    heartbeat_interval: float = 10.0
    idle_ttl: float = 600.0
    max_seeds: int = 50
    upload_rate_limit: int = 0  # bytes/s, 0: unlimited
    # Peers each seed uploads to at once (libtorrent's per-torrent unchoke
    # slots), 0: no limit. 1 spares the site: other T3s take the pieces from
    # the one being served (btserver/seeder.py has the measured figures).
    upload_slots: int = 1
    private: bool = True
    hybrid: bool = False
    hash_threads: int = 0  # 0: one per core
    rucio: RucioConfig = field(default_factory=RucioConfig)  # the [server.rucio] table


@dataclass(frozen=True)
class TrackerConfig:
    listen: str = "127.0.0.1:6969"
    interval: int = 60
    min_interval: int = 30
    open: bool = False
    repo: str = ""  # also accept info-hashes the repository published
    site_secrets: Mapping[str, str] = field(default_factory=lambda: {"site1": "btswarm-dev-secret"})
    site_networks: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    start_wait: float = 2.0
    min_seeds: int = 1  # seeds wanted in every active swarm, before counting leechers
    leechers_per_seed: int = 4
    max_seeds_per_swarm: int = 3
    site_backoff: float = 30.0
    trust_ip: bool = False
    default_numwant: int = 50
    failure_reason: str = "unknown info_hash: not published in this federation"
    heartbeat_interval: float = 10.0  # asked of sites in the heartbeat answer; down after 3 missed
    repo_poll: float = 30.0  # seconds between reads of the repository's published info-hashes


@dataclass(frozen=True)
class RepoConfig:
    listen: str = "127.0.0.1:8080"
    state: str = field(default_factory=lambda: default_state_dir("repo"))
    tracker: str = "http://127.0.0.1:6969"  # for live swarm state
    public_url: str = ""  # as users reach it; default http://<listen>
    site_secrets: Mapping[str, str] = field(default_factory=lambda: {"site1": "btswarm-dev-secret"})


@dataclass(frozen=True)
class Config:
    get: GetConfig = field(default_factory=GetConfig)
    server: ServerConfig = field(default_factory=ServerConfig)
    tracker: TrackerConfig = field(default_factory=TrackerConfig)
    repo: RepoConfig = field(default_factory=RepoConfig)
    path: str | None = None


SECTIONS: dict[str, type] = {"get": GetConfig, "server": ServerConfig, "tracker": TrackerConfig, "repo": RepoConfig}


def find_config(explicit: str | os.PathLike | None = None) -> Path | None:
    if explicit:
        p = Path(explicit)
        if not p.is_file():
            raise ConfigError(p, "config file not found")
        return p
    env = os.environ.get("BTSWARM_CONFIG")
    if env:
        p = Path(env)
        if not p.is_file():
            raise ConfigError(p, "config file named by $BTSWARM_CONFIG not found")
        return p
    for candidate in (Path.home() / ".config" / "btswarm" / "config.toml", Path("/etc/btswarm/config.toml")):
        if candidate.is_file():
            return candidate
    return None


def load_config(explicit: str | os.PathLike | None = None, *,
                overrides: Mapping[str, Mapping[str, Any]] | None = None,
                environ: Mapping[str, str] | None = None) -> Config:
    """Load, merge (file < environment < overrides) and validate the configuration."""
    path = find_config(explicit)
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(path, f"not valid TOML ({exc})") from None
        except OSError as exc:
            raise ConfigError(path, f"cannot read ({exc.strerror})") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(path, f"not UTF-8 (byte {exc.start})") from None
    where = str(path) if path else "defaults"
    for section in raw:
        if section not in SECTIONS:
            raise ConfigError(f"{where}: [{section}]", f"unknown section (known: {', '.join(SECTIONS)})")
        if not isinstance(raw[section], dict):
            raise ConfigError(f"{where}: {section}", "must be a table")
    env = os.environ if environ is None else environ
    built = {}
    for name, cls in SECTIONS.items():
        values = dict(raw.get(name, {}))
        hints = typing.get_type_hints(cls)
        for key, value in _from_env(name, cls, env).items():
            # checked here so that a bad value names the variable, not the file
            values[key] = _coerce(value, hints[key], f"${_env_name(name, key)}")
        values.update({k: v for k, v in (overrides or {}).get(name, {}).items() if v is not None})
        built[name] = section_from_dict(cls, values, f"{where}: [{name}]")
    return Config(**built, path=str(path) if path else None)


def section_from_dict(cls: type, values: Mapping[str, Any], where: str) -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(f"{where} {key}", f"unknown key (known: {', '.join(sorted(known))})")
        if dataclasses.is_dataclass(hints[key]) and where.endswith("]"):
            kwargs[key] = _coerce(value, hints[key], f"{where[:-1]}.{key}]")  # "f: [server.rucio] rse"
        else:
            kwargs[key] = _coerce(value, hints[key], f"{where} {key}")
    return cls(**kwargs)


def _env_name(section: str, key: str) -> str:
    return f"BTSWARM_{section.upper()}_{key.upper()}"


def _from_env(section: str, cls: type, env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key = _env_name(section, f.name)
        if key in env:
            text = env[key]
            origin = typing.get_origin(hints[f.name])
            if origin is tuple:
                out[f.name] = [s for s in text.split(os.pathsep) if s]
            elif origin in (dict, collections.abc.Mapping):  # get_origin(typing.Mapping[..]) is the abc
                out[f.name] = dict(kv.split("=", 1) for kv in text.split(",") if "=" in kv)
            else:
                out[f.name] = text
    return out


def _coerce(value: Any, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            return value.lower() in ("1", "true", "yes", "on")
        raise ConfigError(where, f"expected true or false, got {value!r}")
    if hint is int:
        # int(2.5) would quietly give 2; only ints, or digit strings from the environment
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9]+\s*", value):
            return int(value)
        raise ConfigError(where, f"expected a whole number, got {value!r}")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(where, f"expected a number, got {value!r}")
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(where, f"expected a string, got {value!r}")
        return value
    if origin is tuple:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ConfigError(where, f"expected a list of strings, got {value!r}")
        return tuple(value)
    if origin in (Mapping, dict) or origin is typing.get_origin(Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(where, f"expected a table, got {value!r}")
        _, vt = typing.get_args(hint)
        return {str(k): _coerce(v, vt, f"{where}.{k}") for k, v in value.items()}
    if typing.get_origin(hint) is typing.Union or str(origin) == "types.UnionType":
        return value
    if dataclasses.is_dataclass(hint):  # a sub-table such as [server.rucio]
        if isinstance(value, hint):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(where, f"expected a table, got {value!r}")
        return section_from_dict(hint, value, where)
    raise ConfigError(where, f"unsupported type {hint!r}")  # a bug in this module, not in the file


def parse_hostport(text: str, subject: str = "address") -> tuple[str, int]:
    """'127.0.0.1:8080', '[::1]:80' → (host, port)."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host or "[" in host or "]" in host:  # '::1:80' is ambiguous: IPv6 needs brackets
        raise ConfigError(subject, f"{text!r} is not HOST:PORT (write an IPv6 address as [::1]:PORT)")
    if not sep or not host:
        raise ConfigError(subject, f"{text!r} is not HOST:PORT")
    if not (port.isascii() and port.isdigit()):
        raise ConfigError(subject, f"{text!r} has a bad port")
    p = int(port)
    if not 0 <= p <= 65535:
        raise ConfigError(subject, f"{text!r}: port out of range")
    return host, p
