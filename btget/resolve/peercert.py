"""Whether a fetch goes on the restricted peer wire, and with which certificate: decided before any transfer.

A dataset is fetched as an SSL torrent of the federation's peer CA (torrents.peerca) when it is restricted
(`[access] restricted` names its scope) or when the user's peer certificate names it. Everything that would
only make every handshake fail in silence is said here, in one line, first: a restricted dataset and no
certificate, a certificate expired, of another CA, for other datasets, or not matching its key.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from pathlib import Path

import aiohttp

from torrents.config import default_state_dir
from torrents.errors import BtswarmError, ConfigError
from torrents.servicekit.httpclient import client_session

from btget.resolve.bearer import TokenSource, carries_token

FLAGS = "--peer-cert, --peer-key and --peer-ca (or [get] peer_cert, peer_key, peer_ca)"


class RestrictedError(BtswarmError):
    """A restricted dataset this run cannot fetch (no certificate, or one that cannot trade it)."""


def peer_cert_for(name: str, restricted: bool, ca: str, cert: str, key: str,
                  now: dt.datetime) -> tuple[str, str, str]:
    """(peer CA, certificate, key) files to fetch `name` with, or () to fetch it as a public dataset."""
    if not cert and not key:
        if restricted:
            raise RestrictedError(name, f"a restricted dataset (members only): give your peer certificate with "
                                        f"{FLAGS}")
        return ()
    if not (ca and cert and key):
        raise ConfigError("--peer-cert", f"needs all three of {FLAGS}")
    from torrents import peerca  # here: `cryptography` costs every public fetch's start a tenth of a CPU-second

    pems = {}
    for flag, path in (("--peer-ca", ca), ("--peer-cert", cert), ("--peer-key", key)):
        try:
            pems[flag] = Path(path).read_bytes()
        except OSError as exc:
            raise ConfigError(flag, f"{path}: cannot read ({exc.strerror})") from None
    names = peerca.cert_names(pems["--peer-cert"])
    if not restricted and name not in names and peerca.EVERY_DATASET not in names:
        return ()  # a public dataset: the certificate is not for it and not needed
    try:
        peerca.check_usable(pems["--peer-cert"], pems["--peer-key"], pems["--peer-ca"], name, now, cert)
    except peerca.PeerCertError as exc:
        raise RestrictedError(name, f"cannot fetch this restricted dataset: {exc}") from None
    return ca, cert, key


def request_from_repo(repo: str, ca_file: str, name: str, state: str | None = None,
                      token: TokenSource | None = None) -> tuple[str, str]:
    """A certificate for `name` from the repository (POST /api/peer-certificate, btrepo/peercerts.py):
    (certificate, key) files under bt-get's state directory. The key is made here once and never sent;
    only a CSR naming `name` is, with the user's bearer token (the repository signs for what it reads)."""
    from torrents import peerca

    directory = Path(state or default_state_dir("get")) / "peer"
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    key_path = directory / "peer.key"
    if not key_path.exists():
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(peerca.new_key())
    csr = peerca.new_csr(key_path.read_bytes(), [name], holder="bt-get")
    cert = asyncio.run(_post_csr(repo, ca_file, csr, name, token))
    cert_path = directory / (name.replace(":", "_").replace("/", "_") + ".pem")
    tmp = cert_path.with_name(f"{cert_path.name}.{os.getpid()}.tmp")  # workers renewing at once
    tmp.write_bytes(cert)
    os.replace(tmp, cert_path)
    return str(cert_path), str(key_path)


def renewer(repo: str, ca_file: str, name: str, token: TokenSource | None = None):
    """A PeerCerts `load` that asks the repository again (the same key, a fresh CSR, the token as it is now):
    a T3's renewal."""
    def load() -> tuple[bytes, bytes]:
        cert, key = request_from_repo(repo, ca_file, name, token=token)
        return Path(cert).read_bytes(), Path(key).read_bytes()
    return load


async def _post_csr(repo: str, ca_file: str, csr: bytes, name: str, token: TokenSource | None) -> bytes:
    url = repo.rstrip("/") + "/api/peer-certificate"
    headers = {"Content-Type": "application/pkcs10",
               **(token.header() if token is not None and carries_token(url) else {})}
    async with client_session(ca_file) as session:
        try:
            async with session.post(url, data=csr, headers=headers,
                                    timeout=aiohttp.ClientTimeout(total=30)) as resp:
                body = await resp.read()
                if resp.status != 200:
                    try:
                        why = (await resp.json(content_type=None))["error"]
                    except (ValueError, KeyError, TypeError):
                        why = f"HTTP {resp.status}"
                    raise RestrictedError(name, f"the repository gave no peer certificate: {why}")
                return body
        except aiohttp.ClientError as exc:
            raise RestrictedError(name, f"cannot ask {url} for a peer certificate ({exc})") from None
