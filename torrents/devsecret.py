"""The development secret, and the one rule for where a service may use it. Pure.

Every part's built-in secret is DEV_SECRET, so that a federation runs on one
host with no configuration file. Everyone knows it: a service that others
can reach and that trusts it lets anyone sign heartbeats, seed starts and
publishes. So the rule, applied by bt-tracker, bt-repo and bt-server when
they start (docs/deploy-site.md):

- a service whose every address is on loopback (127.0.0.0/8, ::1,
  `localhost`): the addresses it listens on, the URLs it tells others to use
  (control_url, public_url) and the URLs of the parts it calls (tracker,
  repo) — a federation on one host, as `btswarm up`, the demo and the tests
  run it — may use the development secret, or none; it says so in one
  warning line;
- any other service refuses to start with one line naming the key to set
  (ConfigError: exit status 2).
"""

from __future__ import annotations

import ipaddress
from typing import Iterable, Mapping
from urllib.parse import urlsplit

from torrents.errors import ConfigError
from torrents.hostport import parse_hostport

DEV_SECRET = "btswarm-dev-secret"


def is_loopback_host(host: str) -> bool:
    """127.0.0.0/8, ::1 (also written [::1]) or the name localhost; any other name or address is not."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_of(address: str) -> str:
    """The host of a URL (`https://h:p/x`) or of HOST:PORT."""
    if "://" in address:
        return urlsplit(address).hostname or ""
    try:
        return parse_hostport(address)[0]
    except ConfigError:
        return address


def exposed(addresses: Iterable[tuple[str, str]]) -> str | None:
    """The first (key, address) pair off loopback, as 'key ADDRESS'; None when all are on it. Empty ones are skipped."""
    for key, address in addresses:
        if address and not is_loopback_host(host_of(address)):
            return f"{key} {address}"
    return None


def weak(secrets: Mapping[str, str]) -> list[str]:
    """Names whose secret is the development one or empty."""
    return sorted(name for name, secret in secrets.items() if not secret or secret == DEV_SECRET)


def check(key: str, secrets: Mapping[str, str], addresses: Iterable[tuple[str, str]], how: str) -> str | None:
    """Apply the rule to `secrets` (name → secret) of the config key `key` (e.g. '[tracker] site_secrets').

    `addresses`: (key, address) pairs the service listens on, advertises or calls. Returns the warning to
    print on loopback, None when no secret is weak; raises ConfigError off loopback, whose message ends
    with `how` (what to set).
    """
    names = weak(secrets)
    if not names:
        return None
    which = _which(names, secrets)
    where = exposed(addresses)
    if where is None:
        return f"{key}: {which}: accepted on loopback only, refused on any other address"
    raise ConfigError(key, f"{which}: refused off loopback ({where}); {how}")


def _which(names: list[str], secrets: Mapping[str, str]) -> str:
    dev = [n for n in names if secrets[n] == DEV_SECRET]
    empty = [n for n in names if not secrets[n]]
    parts = []
    if dev:
        parts.append(f"{_names(dev)} {'has' if len(dev) == 1 else 'have'} the development secret {DEV_SECRET!r}")
    if empty:
        parts.append(f"{_names(empty)} {'has' if len(empty) == 1 else 'have'} no secret")
    return " and ".join(parts)


def _names(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
