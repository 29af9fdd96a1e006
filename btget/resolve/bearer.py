"""The physicist's token: WLCG Bearer Token Discovery, and what bt-get says when the token is refused.

Where the token is found, first that exists (the WLCG Bearer Token Discovery
order, as Pelican's client and the storage doors' clients follow it, with
bt-get's own option first):

1. `--token-file FILE` (or `[get] token_file`): that file;
2. `$BEARER_TOKEN`: the token itself;
3. `$BEARER_TOKEN_FILE`: a file holding it;
4. `$XDG_RUNTIME_DIR/bt_u$UID`, then `/tmp/bt_u$UID` (what `oidc-token` or
   `htgettoken` write).

The token is read again each time it is sent (`TokenSource.current`): a long
fetch whose token file a renewal agent rewrites sends the renewed token to
the web seeds from then on. Without a token nothing is sent, and every public
dataset is fetched as before. The token goes to the repository and, for a
members-only dataset, to the web seeds of its .torrent; never to anything
else, and never in clear across a network: only over https, or to a loopback
address (`carries_token`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import urlsplit

from torrents import access
from torrents.devsecret import is_loopback_host
from torrents.errors import UsageError


@dataclass(frozen=True)
class TokenSource:
    """Where this run's token is: `value` (from $BEARER_TOKEN) or `path`; `where` says which, for messages."""

    where: str
    value: str | None = None
    path: str | None = None

    def current(self) -> str | None:
        """The token as it is now (a file is read again), or None when the file went away or is empty."""
        if self.value is not None:
            return self.value.strip() or None
        try:
            with open(self.path, encoding="ascii", errors="replace") as f:  # type: ignore[arg-type]
                return f.read(64 * 1024).strip() or None
        except OSError:
            return None

    def header(self) -> dict[str, str]:
        token = self.current()
        return {"Authorization": f"Bearer {token}"} if token else {}


def carries_token(url: str) -> bool:
    """Whether a request to `url` may carry the token: https, or plain http to this host (loopback)."""
    parts = urlsplit(url)
    return parts.scheme == "https" or (parts.scheme == "http" and is_loopback_host(parts.hostname or ""))


def places(environ: Mapping[str, str], uid: int) -> list[str]:
    """The places discovery looks at, as a message lists them."""
    runtime = "$XDG_RUNTIME_DIR" if environ.get("XDG_RUNTIME_DIR") else None
    return ["--token-file", "$BEARER_TOKEN", "$BEARER_TOKEN_FILE", *access.discovery_files(runtime, uid)]


def discover(token_file: str | None, environ: Mapping[str, str] | None = None,
             uid: int | None = None) -> TokenSource | None:
    """The first place that holds a token, or None. A file named explicitly (the option, the configuration,
    $BEARER_TOKEN_FILE) that cannot be read is an error naming it: the user meant it."""
    env = os.environ if environ is None else environ
    uid = os.getuid() if uid is None else uid
    if token_file:
        return _named(token_file, "--token-file")
    if env.get("BEARER_TOKEN", "").strip():
        return TokenSource("$BEARER_TOKEN", value=env["BEARER_TOKEN"])
    if env.get("BEARER_TOKEN_FILE"):
        return _named(env["BEARER_TOKEN_FILE"], "$BEARER_TOKEN_FILE")
    for path in access.discovery_files(env.get("XDG_RUNTIME_DIR"), uid):
        source = TokenSource(path, path=path)
        if source.current():
            return source
    return None


def _named(path: str, how: str) -> TokenSource:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            if not f.read(64 * 1024).strip():
                raise UsageError(f"{how} {path}", "empty: no token in it")
    except OSError as exc:
        raise UsageError(f"{how} {path}", f"cannot read ({exc.strerror})") from None
    return TokenSource(path, path=path)


def refused_text(problem: str, source: TokenSource | None, environ: Mapping[str, str] | None = None,
                 uid: int | None = None, *, withheld_from: str | None = None) -> str:
    """The repository's refusal, with where bt-get looked for the token, which one it sent, or why it sent
    none (`withheld_from`: a plain-http URL across a network)."""
    if source is not None and withheld_from is not None:
        return (f"{problem}; the token from {source.where} was not sent: bt-get sends it only over https "
                f"(or to this host), and {withheld_from} is plain http")
    if source is None:
        env = os.environ if environ is None else environ
        looked = ", ".join(places(env, os.getuid() if uid is None else uid))
        return f"{problem}; no token found (looked at {looked})"
    return f"{problem} (the token from {source.where})"
