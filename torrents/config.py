"""Configuration: one TOML file for every part, sections [get] [server] [tracker] [repo].

Each deployable declares its own section as a frozen dataclass next to its
code (btget/config.py, btserver/config.py, tracker/config.py,
btrepo/config.py); this module is the one loader they share: the lookup
order, the merge and the validation.

The file is found via --config, $BTSWARM_CONFIG, ~/.config/btswarm/config.toml,
/etc/btswarm/config.toml (the first that exists; none is fine: the defaults
run a federation on one host). Environment variables BTSWARM_<SECTION>_<KEY>
override the file, and command-line flags override both (the commands pass
them as `overrides`). Every value is checked once, here: an unknown key or a
value of the wrong type is an error naming the file (or variable) and the key.
Durations (`Seconds`), sizes (`Bytes`) and rates (`Rate`) are parsed the same way
in files, the environment and flags ("5m", "16MiB", "400mbit"); a section's own `__post_init__`
may refuse values that make no sense, raising ConfigError(key, problem).
Every error names where the value came from, in one format:
`FILE: [section] key: problem`, `$BTSWARM_SECTION_KEY: problem`, or
`--flag: problem`.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import logging
import os
import re
import tomllib
import types
import typing
from pathlib import Path
from typing import Any, Callable, Mapping, NewType, TypeVar

from torrents.errors import BtswarmError, ConfigError
from torrents.units import parse_duration, parse_byte_rate, parse_size

# The sections a config file may hold; each part reads its own, and the services [access] too (torrents/access.py).
SECTION_NAMES = ("get", "server", "tracker", "repo", "access")

Seconds = NewType("Seconds", float)  # a duration: 30, "30s", "10m", "2h"; never negative
Bytes = NewType("Bytes", int)  # a size: 512, "256K", "16MiB"; never negative
Rate = NewType("Rate", int)  # bytes per second: 1048576, "50MB/s", "400mbit"; never negative
_UNITS = {Seconds: (parse_duration, float, "duration"), Bytes: (parse_size, int, "size"), Rate: (parse_byte_rate, int, "rate")}

T = TypeVar("T")


def default_state_dir(part: str) -> str:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "btswarm", part)


def find_config(explicit: str | os.PathLike | None = None) -> Path | None:
    if explicit:
        p = Path(explicit)
        try:
            found = p.is_file()
        except OSError as exc:  # a directory on the way this user may not enter
            raise ConfigError(p, f"cannot read ({exc.strerror})") from None
        if not found:
            raise ConfigError(p, "config file not found")
        return p
    env = os.environ.get("BTSWARM_CONFIG")
    if env:
        p = Path(env)
        if not p.is_file():
            raise ConfigError(p, "config file named by $BTSWARM_CONFIG not found")
        return p
    for candidate in (Path.home() / ".config" / "btswarm" / "config.toml", Path("/etc/btswarm/config.toml")):
        try:
            if candidate.is_file():
                return candidate
        except PermissionError:  # another user's home (HOME kept across su): not ours to read
            continue
    return None


def read_file(path: Path | None) -> dict[str, Any]:
    """The file's sections (checked to be known tables); {} for no file."""
    if path is None:
        return {}
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, f"not valid TOML ({exc})") from None
    except OSError as exc:
        raise ConfigError(path, f"cannot read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(path, f"not UTF-8 (byte {exc.start})") from None
    for section in raw:
        if section not in SECTION_NAMES:
            raise ConfigError(f"{path}: [{section}]", f"unknown section (known: {', '.join(SECTION_NAMES)})")
        if not isinstance(raw[section], dict):
            raise ConfigError(f"{path}: {section}", "must be a table")
    return raw


def load_section(name: str, cls: type[T], explicit: str | os.PathLike | None = None, *,
                 overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> T:
    """Section `name` as `cls`: defaults < file < environment < `overrides` (None values are ignored)."""
    path = find_config(explicit)
    raw = read_file(path)
    where = str(path) if path else "defaults"
    values = dict(raw.get(name, {}))
    # The file alone first: a bad value in it is the file's error even when a flag overrides it.
    section_from_dict(cls, values, f"{where}: [{name}]")
    hints = typing.get_type_hints(cls)
    env = os.environ if environ is None else environ
    for (owner, key) in REMOVED_KEYS:
        if owner == cls.__name__ and env_name(name, key) in env:
            _removed(cls, key, f"${env_name(name, key)}")
    for key, value in _from_env(name, cls, env).items():
        # checked here, alone, so that a bad value names the variable, not the file
        values[key] = _coerce(value, hints[key], f"${env_name(name, key)}")
        try:
            cls(**{key: values[key]})
        except ConfigError as exc:
            raise ConfigError(f"${env_name(name, key)}", exc.problem) from None
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        # From the command line: a bad value names the flag.
        flag = "--" + key.replace("_", "-")
        if key not in hints:
            raise ConfigError(flag, f"not a key of [{name}]")  # a bug in the command, not in the user's line
        values[key] = _coerce(value, hints[key], flag)
        try:
            cls(**{key: values[key]})
        except ConfigError as exc:
            raise ConfigError(flag, exc.problem) from None
    return section_from_dict(cls, values, f"{where}: [{name}]")


def section_from_dict(cls: type[T], values: Mapping[str, Any], where: str) -> T:
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs = {}
    for key, value in values.items():
        if key not in known and _removed(cls, key, f"{where} {key}"):
            continue
        if key not in known:
            raise ConfigError(f"{where} {key}", f"unknown key (known: {', '.join(sorted(known))})")
        # a sub-table is named as TOML writes it: "FILE: [server.rucio] rse"
        sub = dataclasses.is_dataclass(hints[key]) and where.endswith("]")
        kwargs[key] = _coerce(value, hints[key], f"{where[:-1]}.{key}]" if sub else f"{where} {key}")
    try:
        return cls(**kwargs)
    except ConfigError as exc:  # the section's own checks name the key; say where it came from
        raise ConfigError(f"{where} {exc.subject}", exc.problem) from None


def env_name(section: str, key: str) -> str:
    return f"BTSWARM_{section.upper()}_{key.upper()}"


def split_list(text: str) -> list[str]:
    """A list from one environment variable: items separated by commas, and by ':' as in $PATH when
    every item is then an absolute path. So URLs (`http://t1:6969,http://t2:6969`) and DIDs
    (`scope:name`) stay whole, and `/data/a:/data/b` is two roots as before."""
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        pieces = [p for p in part.split(os.pathsep) if p]
        out.extend(pieces if all(p.startswith("/") for p in pieces) else [part])
    return [item for item in out if item]


log = logging.getLogger("btswarm.config")

# Variables from before every setting was $BTSWARM_<SECTION>_<KEY>: old name → (section or None for every
# section with the key, key). Read for one release when the new name is unset, with a warning naming it.
RENAMED_ENV = {"BTSWARM_REPO": ("get", "repo"), "BTSWARM_CA_FILE": (None, "ca_file")}


# Keys that are no longer settings: (section's class name, key) → why. A file that still has one is read
# for one release with a warning, the key ignored; then it is an unknown key like any other.
REMOVED_KEYS = {("GetConfig", "site_share"): "the site-share rules always apply (docs/bt-get.md)"}


_said_removed: set[str] = set()


def _removed(cls: type, key: str, subject: str) -> bool:
    """Whether `key` of `cls` is a removed setting; said once per `subject` (where it was written)."""
    why = REMOVED_KEYS.get((cls.__name__, key))
    if why is not None and subject not in _said_removed:
        _said_removed.add(subject)
        log.warning("%s is no longer a setting and is ignored: %s", subject, why)
    return why is not None


def _renamed(section: str, key: str, env: Mapping[str, str]) -> str | None:
    """The value of an old variable that stands for $BTSWARM_<SECTION>_<KEY>, said to be deprecated."""
    for old, (where, name) in RENAMED_ENV.items():
        if name == key and where in (None, section) and env.get(old):
            log.warning("$%s is deprecated and will be ignored in the next release: use $%s", old,
                        env_name(section, key))
            return env[old]
    return None


def _from_env(section: str, cls: type, env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key = env_name(section, f.name)
        text = env[key] if key in env else _renamed(section, f.name, env)
        if text is not None:
            origin = typing.get_origin(hints[f.name])
            if origin is tuple:
                out[f.name] = split_list(text)
            elif origin in (dict, collections.abc.Mapping):  # get_origin(typing.Mapping[..]) is the abc
                out[f.name] = dict(kv.split("=", 1) for kv in text.split(",") if "=" in kv)
            else:
                out[f.name] = text
    return out


def _coerce(value: Any, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if hint in _UNITS:
        return _to_unit(value, hint, where)
    if hint in _SCALARS:
        return _SCALARS[hint](value, where)
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
    if dataclasses.is_dataclass(hint):
        # A sub-table such as [server.rucio]
        if isinstance(value, hint):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(where, f"expected a table, got {value!r}")
        return section_from_dict(hint, value, where)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None and len(args) < len(typing.get_args(hint)):
            return None
        if len(args) == 1:
            return _coerce(value, args[0], where)
        return value
    raise ConfigError(where, f"unsupported type {hint!r}")  # a bug in this module, not in the file


def _to_unit(value: Any, hint: Any, where: str) -> Any:
    parse, kind, what = _UNITS[hint]
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(where, f"expected a {what}, got {value!r}")
    try:
        parsed = parse(value)  # type: ignore[operator]
    except BtswarmError as exc:
        raise ConfigError(where, f"{exc.problem}, got {value!r}") from None
    return kind(parsed)


def _to_bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return value.lower() in ("1", "true", "yes", "on")
    raise ConfigError(where, f"expected true or false, got {value!r}")


def _to_int(value: Any, where: str) -> int:
    # int(2.5) would quietly give 2; only ints, or digit strings from the environment
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9]+\s*", value):
        return int(value)
    raise ConfigError(where, f"expected a whole number, got {value!r}")


def _to_float(value: Any, where: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise ConfigError(where, f"expected a number, got {value!r}")


def _to_str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(where, f"expected a string, got {value!r}")
    return value


# The plain types a setting may have, each read from a file's value or the environment's string.
_SCALARS: dict[Any, Callable[[Any, str], Any]] = {bool: _to_bool, int: _to_int, float: _to_float, str: _to_str}
