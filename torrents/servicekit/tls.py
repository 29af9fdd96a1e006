"""TLS for every btswarm service and client, in one place: the contexts, and what a refusal says.

Servers: a section's `tls_cert` and `tls_key` (PEM; the certificate file may
hold the chain) make its HTTP service listen with TLS. Clients verify every
https:// URL by default against the system's CAs; `ca_file` (a PEM bundle,
e.g. a federation's private CA) is trusted in addition to them; like any
setting it may come from the environment, $BTSWARM_<SECTION>_CA_FILE.

libtorrent (a bt-get worker's and a bt-server seed's HTTPS tracker
announces) takes no CA file: it verifies with OpenSSL's default paths, read
once when a session is created, and $SSL_CERT_FILE set before then is
trusted besides the system bundle (measured with the libtorrent 2.1.1 wheel:
set before the session, an announce to a tracker whose certificate our CA
signed is answered; set after it, or unset, it fails with "certificate
verify failed"; a certificate for another IP address fails too). So
`trust_in_libtorrent` sets that variable for this process and the workers
it forks; ltsession turns `validate_https_trackers` on.

Only the standard library: the services build their aiohttp connectors
from these contexts (torrents.servicekit.httpclient.client_session).
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path

from torrents.errors import ConfigError

FLAG_HINT = "--ca-file or $BTSWARM_GET_CA_FILE"  # how bt-get's user gives the CA
LIBTORRENT_CA_ENV = "SSL_CERT_FILE"  # what OpenSSL's default verify paths (and so libtorrent) read


def server_context(cert: str, key: str, section: str, client_ca: str = "") -> ssl.SSLContext | None:
    """The context to listen with, or None for plain HTTP (no cert and no key).

    `client_ca` (a PEM CA, the federation's peer CA): ask every client for a certificate, optional, and let
    through only one that CA signed and that has not expired (what it names, the service decides).
    Checked when the service starts, once every key is read (the loader checks keys one by one).
    """
    if not cert and not key:
        if client_ca:
            raise ConfigError(f"[{section}] peer_ca", "needs tls_cert and tls_key: a peer certificate is "
                                                      "presented only on https")
        return None
    if not cert or not key:
        missing, given = ("tls_key", "tls_cert") if cert else ("tls_cert", "tls_key")
        raise ConfigError(f"[{section}] {missing}", f"needed with {given} (the certificate and its private key, "
                                                    "both PEM files)")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    for name, path in (("tls_cert", cert), ("tls_key", key)):
        _readable(f"[{section}] {name}", path)
    try:
        ctx.load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        raise ConfigError(f"[{section}] tls_cert", f"{cert} and {key} are not a PEM certificate and its private "
                                                   f"key ({exc.reason or exc})") from None
    if client_ca:
        _readable(f"[{section}] peer_ca", client_ca)
        try:
            ctx.load_verify_locations(cafile=client_ca)
        except ssl.SSLError as exc:
            raise ConfigError(f"[{section}] peer_ca", f"{client_ca}: not a PEM CA certificate "
                                                      f"({exc.reason or exc})") from None
        ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


def ca_file(configured: str | None) -> str:
    """The CA bundle to trust besides the system's: the configured one (file, environment or flag), else none."""
    return configured or ""


def client_context(ca: str = "", subject: str = "ca_file") -> ssl.SSLContext:
    """Verify servers against the system's CAs and `ca` (a PEM bundle); hostnames and IP addresses checked."""
    ctx = ssl.create_default_context()
    if ca:
        _readable(subject, ca)
        try:
            ctx.load_verify_locations(cafile=ca)
        except ssl.SSLError as exc:
            raise ConfigError(subject, f"{ca}: not a PEM file of CA certificates ({exc.reason or exc})") from None
    return ctx


def trust_in_libtorrent(ca: str) -> None:
    """Make libtorrent sessions created from now on (here and in forked workers) trust `ca` too."""
    if ca:
        _readable("ca_file", ca)
        os.environ[LIBTORRENT_CA_ENV] = str(Path(ca).resolve())


def hint(section: str) -> str:
    """How a service is given a CA: its section's ca_file, or the environment."""
    return f"[{section}] ca_file or $BTSWARM_{section.upper()}_CA_FILE"


def untrusted(detail: str, hint: str) -> str:
    """The problem said when a server's certificate is not trusted; `hint` says how to give the CA."""
    return f"certificate not trusted ({detail}); give the CA with {hint}"


def certificate_problem(exc: BaseException, hint: str) -> str | None:
    """An untrusted certificate (aiohttp's ClientConnectorCertificateError, ssl's own) as a sentence; else None."""
    cert_error = getattr(exc, "certificate_error", None) or exc
    if isinstance(cert_error, ssl.SSLCertVerificationError):
        return untrusted(cert_error.verify_message or cert_error.reason or "verify failed", hint)
    return None


def libtorrent_problem(message: str, hint: str) -> str | None:
    """A libtorrent tracker error that is a certificate it could not verify, as a sentence; else None."""
    if "certificate verify failed" in message:
        return untrusted("certificate verify failed", hint)
    return None


def _readable(subject: str, path: str) -> None:
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise ConfigError(subject, f"{path}: cannot read ({exc.strerror})") from None
