"""`btswarm token`: a member's token from the running restricted federation's issuer (`btswarm up --restricted`).

The test bed's issuer (btswarm/testbed/issuer.py) hands a token to whoever on this host asks; a real
federation's members get theirs from their experiment's issuer with `oidc-token` or `htgettoken`, which
write it to the same place. The token is written where WLCG Bearer Token Discovery looks (bt-get's
btget/resolve/bearer.py): `$XDG_RUNTIME_DIR/bt_u$UID` when that directory is set, else `/tmp/bt_u$UID`, readable
by its owner only, so a plain `bt-get` afterwards finds it with no option.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Mapping, Sequence

import aiohttp

from btswarm import netns, run
from torrents import access
from torrents.access import READ
from torrents.errors import BtswarmError
from torrents.servicekit.httpclient import client_error, client_session


def scope_claim(scopes: Sequence[str]) -> str:
    """The WLCG `scope` claim that reads every dataset of `scopes` (restricted scopes, or `scope:pattern`
    entries, whose scope is what a token reads)."""
    return " ".join(dict.fromkeys(f"{READ}:/{s.partition(':')[0]}" for s in scopes))


def discovery_path(environ: Mapping[str, str], uid: int) -> Path:
    """Where Bearer Token Discovery looks first for a token file when no variable names one."""
    return Path(access.discovery_files(environ.get("XDG_RUNTIME_DIR"), uid)[0])


async def request(issuer: str, ca_file: str | os.PathLike, scope: str, lifetime: float) -> str:
    """A token from the test bed's issuer (its POST /token), over https verified with the federation's CA."""
    try:
        async with client_session(str(ca_file), timeout=aiohttp.ClientTimeout(total=10)) as http:
            async with http.post(f"{issuer}/token", json={"scope": scope, "lifetime": lifetime}) as resp:
                doc = await resp.json(content_type=None)
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
        raise BtswarmError(issuer, f"cannot ask the issuer ({client_error(exc, f'give its CA, {ca_file}')})") from None
    if resp.status != 200 or not isinstance(doc, dict) or "access_token" not in doc:
        said = doc.get("error", "") if isinstance(doc, dict) else ""
        raise BtswarmError(issuer, f"no token: HTTP {resp.status} {said}".rstrip())
    return str(doc["access_token"])


def write(path: Path, token: str) -> Path:
    """The token in `path`, mode 0600, replaced atomically (a bt-get reading it sees the old one or the new)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.replace(tmp, path)
    return path


def fetch(state: Path, scopes: Sequence[str], lifetime: float) -> str:
    """A token for `scopes` (default: every restricted scope) from the issuer of the `btswarm up --restricted`
    on `state`, asked from the federation's namespace when it has one (shaped links, hosts)."""
    ready = run.read_ready(state)
    if ready.members is None:
        raise BtswarmError(state, "its federation restricts nothing (start it with `btswarm up --restricted`)")
    claim = scope_claim(scopes or ready.members.scopes)
    with netns.entered(ready.netns):
        return asyncio.run(request(ready.members.issuer, ready.members.ca_file, claim, lifetime))
