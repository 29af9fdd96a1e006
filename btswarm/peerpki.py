"""The local federation's peer CA and its sites' certificates (`btswarm up`), kept in STATE/pki/.

What an operator does by hand for a real federation (docs/deploy-site.md), done once per state directory:
the CA is made the first time and kept (so certificates issued from it, T3s' included, stay valid across
runs); each site's key is made where it is used and kept, and its certificate (for `*`, every dataset) is
issued again when missing, from another CA, or past peerca.RENEW_AT of its life. Keys are written 0600.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Iterable, NamedTuple, Sequence

from torrents import peerca

CA_NAME = "btswarm local federation peer CA"
CA_KEY, CA_CERT = "peer-ca.key", "peer-ca.pem"  # under STATE/pki


class PeerFiles(NamedTuple):
    ca: Path
    cert: Path
    key: Path


def ensure(pki: Path, sites: Iterable[str], now: dt.datetime) -> dict[str, PeerFiles]:
    """The peer CA under `pki` (made if absent) and a current certificate for each site: site → its files."""
    pki.mkdir(parents=True, exist_ok=True)
    ca_key_path, ca_path = pki / CA_KEY, pki / CA_CERT
    if not (ca_key_path.exists() and ca_path.exists()):
        ca_key, ca = peerca.new_ca(CA_NAME, now)
        _write(ca_key_path, ca_key, secret=True)
        _write(ca_path, ca)
    ca_key, ca = ca_key_path.read_bytes(), ca_path.read_bytes()
    out = {}
    for site in sites:
        key_path, cert_path = pki / f"{site}.key", pki / f"{site}.pem"
        if not key_path.exists():
            _write(key_path, peerca.new_key(), secret=True)
        if _due(cert_path, key_path, ca, now):
            issued = peerca.issue_for_key(ca_key, ca, key_path.read_bytes(), [peerca.EVERY_DATASET], now,
                                          holder=f"btswarm site {site}")
            _write(cert_path, issued.cert)
        out[site] = PeerFiles(ca_path, cert_path, key_path)
    return out


def ensure_service(pki: Path, label: str, hosts: Sequence[str], now: dt.datetime) -> tuple[Path, Path]:
    """An https certificate from the peer CA for service `label` (`btswarm up --restricted`: the tracker, whose
    https libtorrent checks against the SSL torrent's root, this CA; the repository and the token issuer too, so
    one CA file is every client's): (certificate, key). Its key is kept; the certificate is issued at each start,
    for the addresses of this run."""
    key_path, cert_path = pki / f"{label}.key", pki / f"{label}.pem"
    if not key_path.exists():
        _write(key_path, peerca.new_key(), secret=True)
    ca_key, ca = (pki / CA_KEY).read_bytes(), (pki / CA_CERT).read_bytes()
    _write(cert_path, peerca.issue_service(ca_key, ca, key_path.read_bytes(), hosts, now))
    return cert_path, key_path


def issue_t3(pki: Path, csr: bytes, now: dt.datetime) -> peerca.Issued:
    """A T3's certificate for the datasets its CSR names, from the local federation's CA (`btswarm peer-cert`)."""
    return peerca.issue((pki / CA_KEY).read_bytes(), (pki / CA_CERT).read_bytes(), csr, now)


def _due(cert_path: Path, key_path: Path, ca: bytes, now: dt.datetime) -> bool:
    if not cert_path.exists():
        return True
    cert = cert_path.read_bytes()
    try:
        peerca.check_usable(cert, key_path.read_bytes(), ca, None, now)
    except peerca.PeerCertError:
        return True
    return now >= peerca.renew_at(cert)


def _write(path: Path, data: bytes, secret: bool = False) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if secret else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
