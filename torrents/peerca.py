"""The federation's peer CA: who may trade a restricted dataset's pieces on the peer wire.

A restricted dataset is seeded and fetched as a libtorrent SSL torrent whose root certificate is this
CA's (given when the torrent is added, so the info-hash is the public one). libtorrent then accepts a
peer only over TLS, only with a certificate signed by that root, and only when one of the certificate's
DNS subject alternative names is the torrent's name (`scope:name`) or `*`. So a certificate is a list of
datasets its holder may trade:

- a site (T2) holds one for `*` from its operators, valid for weeks;
- a T3 makes its own key and a certificate request (CSR) naming the datasets it wants, and gets back a
  certificate for those names, valid for hours (a stolen key is worth no more than that, and only for
  those datasets); its key never leaves it.

libtorrent takes one root PEM per torrent, not a bundle, and checks only leaf certificates it signed
directly: no intermediate CAs, and a CA rotation is a planned switch (docs/deploy-site.md). Keys are
EC P-256 (what TLS 1.3 handshakes cheapest). Pure: PEM bytes in, PEM bytes out, time passed in.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path
from typing import Any, Iterable, NamedTuple, Sequence

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from torrents.errors import BtswarmError, ConfigError

EVERY_DATASET = "*"  # a site's certificate: libtorrent's wildcard, every torrent of the CA
CA_DAYS = 3650
SITE_LIFETIME = dt.timedelta(days=30)
T3_LIFETIME = dt.timedelta(hours=12)
MAX_NAMES = 1000  # one CSR names at most this many datasets (a certificate is sent in every handshake)
RENEW_AT = 2 / 3  # a holder asks for a new certificate once this share of its lifetime is gone
# libtorrent's set_ssl_certificate_buffer refuses a certificate without DH parameters, though TLS 1.3 with
# EC keys never uses them: the public RFC 7919 group ffdhe2048 (`openssl genpkey -genparam -algorithm DH
# -pkeyopt group:ffdhe2048`), nothing secret, the same for everyone.
DH_PARAMS = b"""-----BEGIN DH PARAMETERS-----
MIIBCAKCAQEA//////////+t+FRYortKmq/cViAnPTzx2LnFg84tNpWp4TZBFGQz
+8yTnc4kmz75fS/jY2MMddj2gbICrsRhetPfHtXV/WVhJDP1H18GbtCFY2VVPe0a
87VXE15/V8k1mE8McODmi3fipona8+/och3xWKE2rec1MKzKT0g6eXq8CrGCsyT7
YdEIqUuyyOP7uWrat2DX9GgdT0Kj3jlN9K5W7edjcrsZCwenyO4KbXCeAvzhzffi
7MA0BM0oNC9hkXL+nOmFg/+OTxIy7vKBg8P+OxtMb61zO7X8vC7CIAXFjvGDfRaD
ssbzSibBsu/6iGtCOGEoXJf//////////wIBAg==
-----END DH PARAMETERS-----
"""
_BACKDATE = dt.timedelta(minutes=5)  # clocks a few minutes apart still accept a certificate just issued


class PeerCertError(BtswarmError):
    """A peer certificate, key, CSR or CA that cannot be used."""


class Issued(NamedTuple):
    cert: bytes  # PEM
    not_before: dt.datetime
    not_after: dt.datetime
    names: tuple[str, ...]


def new_key() -> bytes:
    """A fresh EC P-256 private key, PEM (PKCS#8, unencrypted: the file's mode protects it)."""
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def new_ca(name: str, now: dt.datetime, days: int = CA_DAYS) -> tuple[bytes, bytes]:
    """A federation peer CA named `name`: (key PEM, certificate PEM). The key stays with its operators."""
    key_pem = new_key()
    key = _key(key_pem, "peer CA key")
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name),
                         x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "btswarm peer CA")])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE).not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return key_pem, cert.public_bytes(serialization.Encoding.PEM)


def new_csr(key_pem: bytes, names: Iterable[str], holder: str = "btswarm peer") -> bytes:
    """A certificate request for the key's holder to trade `names` (dataset names, or `*`), PEM."""
    checked = check_names(names)
    key = _key(key_pem, "peer key")
    csr = (x509.CertificateSigningRequestBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, holder[:64])]))
           .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in checked]), critical=False)
           .sign(key, hashes.SHA256()))
    return csr.public_bytes(serialization.Encoding.PEM)


def csr_names(csr_pem: bytes) -> tuple[str, ...]:
    """The dataset names a CSR asks for, after its signature is checked (a CSR proves its key's holder)."""
    try:
        csr = x509.load_pem_x509_csr(csr_pem)
    except ValueError as exc:
        raise PeerCertError("certificate request", f"not a PEM CSR ({exc})") from None
    if not csr.is_signature_valid:
        raise PeerCertError("certificate request", "its signature does not match its key")
    try:
        san = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        raise PeerCertError("certificate request", "names no dataset (no subject alternative name)") from None
    return check_names(san.get_values_for_type(x509.DNSName))


def issue(ca_key_pem: bytes, ca_cert_pem: bytes, csr_pem: bytes, now: dt.datetime,
          lifetime: dt.timedelta = T3_LIFETIME, allowed: Sequence[str] | None = None) -> Issued:
    """Sign a CSR: a certificate for the names it asks for, valid from `now` for `lifetime`.

    `allowed` (None: any) are the names its requester may have; a name outside them is refused, not
    dropped, so the requester learns which one. The certificate is never valid after the CA itself."""
    names = csr_names(csr_pem)
    if allowed is not None:
        refused = [n for n in names if n not in set(allowed)]
        if refused:
            raise PeerCertError(refused[0], "not a dataset this requester may read"
                                + (f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""))
    ca_key = _key(ca_key_pem, "peer CA key")
    ca = load_cert(ca_cert_pem, "peer CA certificate")
    if ca_key.public_key().public_numbers() != ca.public_key().public_numbers():
        raise PeerCertError("peer CA key", "does not belong to the peer CA certificate")
    csr = x509.load_pem_x509_csr(csr_pem)
    not_after = min(now + lifetime, ca.not_valid_after_utc)
    # Backdated for skewed clocks, but by no more than a quarter of its life: renew_at stays ahead of now.
    not_before = now - min(_BACKDATE, lifetime / 4)
    cert = (x509.CertificateBuilder().subject_name(csr.subject).issuer_name(ca.subject)
            .public_key(csr.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(not_before).not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return Issued(cert.public_bytes(serialization.Encoding.PEM), not_before, not_after, names)


def issue_for_key(ca_key_pem: bytes, ca_cert_pem: bytes, key_pem: bytes, names: Iterable[str], now: dt.datetime,
                  lifetime: dt.timedelta = SITE_LIFETIME, holder: str = "btswarm site") -> Issued:
    """A certificate for a key the caller holds (an operator issuing a site's, `btswarm up`)."""
    return issue(ca_key_pem, ca_cert_pem, new_csr(key_pem, names, holder), now, lifetime)


def issue_service(ca_key_pem: bytes, ca_cert_pem: bytes, key_pem: bytes, hosts: Sequence[str], now: dt.datetime,
                  lifetime: dt.timedelta = SITE_LIFETIME) -> bytes:
    """A TLS server certificate (IP addresses or host names) from the peer CA, for the tracker's https
    listener: libtorrent checks an SSL torrent's https tracker against the torrent's root, this CA."""
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    ca_key = _key(ca_key_pem, "peer CA key")
    ca = load_cert(ca_cert_pem, "peer CA certificate")
    key = _key(key_pem, "service key")
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE).not_valid_after(min(now + lifetime, ca.not_valid_after_utc))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


def load_cert(pem: bytes, subject: str = "peer certificate") -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError as exc:
        raise PeerCertError(subject, f"not a PEM certificate ({exc})") from None


def cert_names(cert_pem: bytes) -> tuple[str, ...]:
    """The dataset names (or `*`) a peer certificate may trade."""
    cert = load_cert(cert_pem)
    try:
        return tuple(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
                     .get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        return ()


def expires(cert_pem: bytes) -> dt.datetime:
    return load_cert(cert_pem).not_valid_after_utc


def renew_at(cert_pem: bytes) -> dt.datetime:
    """When its holder should have a new one: RENEW_AT of its lifetime gone (a T3's: 8 of 12 hours)."""
    cert = load_cert(cert_pem)
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return start + (end - start) * RENEW_AT


def check_usable(cert_pem: bytes, key_pem: bytes, ca_cert_pem: bytes, name: str | None, now: dt.datetime,
                 subject: str = "peer certificate") -> None:
    """Say (PeerCertError) why this certificate and key cannot trade `name` (None: any dataset it names)
    under this CA at `now`, if they cannot: libtorrent itself only fails the handshakes, with nothing a user
    can read."""
    cert = load_cert(cert_pem, subject)
    ca = load_cert(ca_cert_pem, "peer CA certificate")
    if cert.issuer != ca.subject:
        raise PeerCertError(subject, f"issued by {cert.issuer.rfc4514_string()}, not by the peer CA "
                                     f"{ca.subject.rfc4514_string()}")
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        raise PeerCertError(subject, f"not signed by the peer CA {ca.subject.rfc4514_string()}") from None
    if now >= cert.not_valid_after_utc:
        raise PeerCertError(subject, f"expired at {cert.not_valid_after_utc:%Y-%m-%d %H:%M:%S} UTC")
    if now < cert.not_valid_before_utc:
        raise PeerCertError(subject, f"not valid before {cert.not_valid_before_utc:%Y-%m-%d %H:%M:%S} UTC")
    names = cert_names(cert_pem)
    if name is not None and EVERY_DATASET not in names and name not in names:
        raise PeerCertError(subject, f"not for {name} (it names {', '.join(names[:5]) or 'no dataset'})")
    key = _key(key_pem, "peer key")
    if key.public_key().public_numbers() != cert.public_key().public_numbers():
        raise PeerCertError("peer key", "does not belong to the peer certificate")


def check_names(names: Iterable[str]) -> tuple[str, ...]:
    """Names a certificate can carry: a DNS SAN is IA5 (ASCII), the torrent's name matched exactly."""
    out = tuple(dict.fromkeys(names))
    if not out:
        raise PeerCertError("certificate request", "names no dataset")
    if len(out) > MAX_NAMES:
        raise PeerCertError("certificate request", f"names {len(out)} datasets, at most {MAX_NAMES}")
    for n in out:
        if not n or not n.isascii() or not n.isprintable() or " " in n or len(n) > 255:
            raise PeerCertError(repr(n), "not a dataset name a certificate can carry")
    return out


def _key(pem: bytes, subject: str) -> Any:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise PeerCertError(subject, f"not an unencrypted PEM private key ({exc})") from None
    if not isinstance(key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
        raise PeerCertError(subject, "neither an EC nor an RSA key")
    return key


def read_files(subject: str, named: Sequence[tuple[str, str]]) -> list[bytes]:
    """The PEM files `named` ((setting, path) pairs), read now; one that cannot be read is a ConfigError
    naming `{subject} {setting}` and the path (an operator's renewal may be rewriting it: the caller retries)."""
    out = []
    for setting, path in named:
        try:
            out.append(Path(path).read_bytes())
        except OSError as exc:
            raise ConfigError(f"{subject} {setting}", f"{path}: cannot read ({exc.strerror})") from None
    return out
