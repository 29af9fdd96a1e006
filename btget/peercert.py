"""Whether a fetch goes on the restricted peer wire, and with which certificate: decided before any transfer.

A dataset is fetched as an SSL torrent of the federation's peer CA (torrents.peerca) when it is restricted
(`[access] restricted` names its scope) or when the user's peer certificate names it. Everything that would
only make every handshake fail in silence is said here, in one line, first: a restricted dataset and no
certificate, a certificate expired, of another CA, for other datasets, or not matching its key.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from torrents import peerca
from torrents.errors import BtswarmError, ConfigError

FLAGS = "--peer-cert, --peer-key and --peer-ca (or [get] peer_cert, peer_key, peer_ca)"


class RestrictedError(BtswarmError):
    """A restricted dataset this run cannot fetch (no certificate, or one that cannot trade it)."""


def peer_cert_for(name: str, restricted: bool, ca: str, cert: str, key: str,
                  now: dt.datetime) -> tuple[str, str, str]:
    """(peer CA, certificate, key) files to fetch `name` with, or () to fetch it as a public dataset."""
    given = [p for p in (ca, cert, key) if p]
    if not given:
        if restricted:
            raise RestrictedError(name, f"a restricted dataset (members only): give your peer certificate with "
                                        f"{FLAGS}")
        return ()
    if len(given) < 3:
        raise ConfigError("--peer-cert", f"needs all three of {FLAGS}")
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
