"""torrents.peerca: the federation's peer CA, pure (no network)."""

from __future__ import annotations

import datetime as dt

import pytest

from torrents import peerca
from torrents.peerca import PeerCertError

NOW = dt.datetime(2026, 12, 7, 12, 0, tzinfo=dt.timezone.utc)


@pytest.fixture(scope="module")
def ca():
    return peerca.new_ca("unit CA", NOW)


def test_issue_for_the_names_asked(ca):
    key = peerca.new_key()
    issued = peerca.issue(*ca, peerca.new_csr(key, ["atlas:a", "atlas:b"]), NOW)
    assert issued.names == ("atlas:a", "atlas:b") == peerca.cert_names(issued.cert)
    assert peerca.expires(issued.cert) == NOW + peerca.T3_LIFETIME
    assert peerca.renew_at(issued.cert) < peerca.expires(issued.cert)
    peerca.check_usable(issued.cert, key, ca[1], "atlas:b", NOW)  # no error


def test_renew_at_two_thirds(ca):
    issued = peerca.issue_for_key(*ca, peerca.new_key(), ["*"], NOW, dt.timedelta(hours=3))
    start = NOW - dt.timedelta(minutes=5)
    assert peerca.renew_at(issued.cert) == start + (NOW + dt.timedelta(hours=3) - start) * 2 / 3


def test_refuses_a_name_not_allowed(ca):
    csr = peerca.new_csr(peerca.new_key(), ["atlas:a", "cms:secret"])
    with pytest.raises(PeerCertError, match=r"^cms:secret: not a dataset this requester may read$"):
        peerca.issue(*ca, csr, NOW, allowed=["atlas:a"])


def test_never_outlives_the_ca():
    ca = peerca.new_ca("short CA", NOW, days=1)
    issued = peerca.issue_for_key(*ca, peerca.new_key(), ["*"], NOW, dt.timedelta(days=30))
    assert peerca.expires(issued.cert) == NOW + dt.timedelta(days=1)


@pytest.mark.parametrize("when, name, message", [
    (NOW + dt.timedelta(days=1), "atlas:a", r"peer certificate: expired at 2026-12-08 00:00:00 UTC"),
    (NOW, "atlas:other", r"peer certificate: not for atlas:other \(it names atlas:a\)"),
])
def test_check_usable_says_why(ca, when, name, message):
    key = peerca.new_key()
    cert = peerca.issue_for_key(*ca, key, ["atlas:a"], NOW, dt.timedelta(hours=12)).cert
    with pytest.raises(PeerCertError, match=f"^{message}$"):
        peerca.check_usable(cert, key, ca[1], name, when)


def test_check_usable_another_ca_and_another_key(ca):
    other = peerca.new_ca("other CA", NOW)
    key = peerca.new_key()
    cert = peerca.issue_for_key(*other, key, ["*"], NOW).cert
    with pytest.raises(PeerCertError, match="not by the peer CA"):
        peerca.check_usable(cert, key, ca[1], "atlas:a", NOW)
    mine = peerca.issue_for_key(*ca, key, ["*"], NOW).cert
    with pytest.raises(PeerCertError, match="^peer key: does not belong to the peer certificate$"):
        peerca.check_usable(mine, peerca.new_key(), ca[1], "atlas:a", NOW)


def test_forged_csr_and_garbage():
    csr = bytearray(peerca.new_csr(peerca.new_key(), ["atlas:a"]))
    with pytest.raises(PeerCertError, match="^certificate request: not a PEM CSR"):
        peerca.csr_names(b"hello")
    with pytest.raises(PeerCertError, match="^peer certificate: not a PEM certificate"):
        peerca.expires(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    with pytest.raises(PeerCertError, match="^certificate request: names no dataset$"):
        peerca.new_csr(peerca.new_key(), [])
    with pytest.raises(PeerCertError, match="not a dataset name a certificate can carry"):
        peerca.new_csr(peerca.new_key(), ["atlas:a b"])
    assert bytes(csr).startswith(b"-----BEGIN CERTIFICATE REQUEST-----")


def test_csr_signed_by_another_key_is_refused(ca):
    """A CSR whose public key was swapped after signing: its signature no longer matches."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    good = x509.load_pem_x509_csr(peerca.new_csr(peerca.new_key(), ["atlas:a"]))
    other = x509.load_pem_x509_csr(peerca.new_csr(peerca.new_key(), ["atlas:a"]))
    der = bytearray(good.public_bytes(serialization.Encoding.DER))
    good_key = good.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    other_key = other.public_key().public_bytes(serialization.Encoding.DER,
                                                serialization.PublicFormat.SubjectPublicKeyInfo)
    at = bytes(der).index(good_key)
    der[at:at + len(good_key)] = other_key
    forged = x509.load_der_x509_csr(bytes(der)).public_bytes(serialization.Encoding.PEM)
    with pytest.raises(PeerCertError, match="^certificate request: its signature does not match its key$"):
        peerca.issue(*ca, forged, NOW)


def test_peer_certs_status_and_problems(ca):
    """What bt-server's /api/status says of its certificate: fine, due and not renewed, expired."""
    from torrents.servicekit.ltsession import PeerCerts
    key = peerca.new_key()
    cert = peerca.issue_for_key(*ca, key, ["*"], NOW, dt.timedelta(days=30)).cert
    certs = PeerCerts(ca[1], lambda: (cert, key), "[server] peer_cert")
    assert certs.to_json() == {"names": ["*"], "renewals": 0, "expires": "2027-01-06T12:00:00Z",
                               "renew_at": f"{peerca.renew_at(cert):%Y-%m-%dT%H:%M:%SZ}"}
    assert certs.problem(NOW) is None
    assert not certs.renew_if_due(peerca.renew_at(cert))  # the same file: nothing newer to set
    assert certs.problem(peerca.renew_at(cert)) == ("[server] peer_cert: due for renewal, no newer one given; it "
                                                    "expires at 2027-01-06 12:00:00 UTC")
    assert certs.problem(NOW + dt.timedelta(days=31)) == ("[server] peer_cert: expired at 2027-01-06 12:00:00 UTC: "
                                                          "restricted datasets' new peers are refused")
