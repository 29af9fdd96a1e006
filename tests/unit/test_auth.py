"""torrents.auth: HMAC-signed control requests, refused when unsigned, wrong, stale or replayed."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from torrents.auth import H_NONCE, H_SIG, H_SITE, H_TIME, StaleRequest, Verifier, sign
from torrents.errors import AuthError

SECRETS = {"site1": "secret-one", "site2": "secret-two"}
T0 = 1_750_000_000.0
BODY = b'{"info_hash": "' + b"ab" * 20 + b'"}'
PATH = "/api/seeds"


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def verifier(**kwargs) -> tuple[Verifier, Clock]:
    clock = Clock()
    return Verifier(SECRETS, clock=clock, **kwargs), clock


def refused(v: Verifier, method: str, path: str, headers: dict, body: bytes) -> str:
    with pytest.raises(AuthError) as info:
        v.verify(method, path, headers, body)
    return str(info.value)


def test_signature_follows_the_contract():
    headers = sign("secret-one", "site1", "post", "/api/seeds?x=1", BODY, now=T0 + 0.9, nonce="n1")
    message = "\n".join(["POST", "/api/seeds?x=1", str(int(T0)), "n1", hashlib.sha256(BODY).hexdigest()])
    assert headers == {
        H_SITE: "site1", H_TIME: str(int(T0)), H_NONCE: "n1",
        H_SIG: hmac.new(b"secret-one", message.encode(), hashlib.sha256).hexdigest(),
    }
    assert (H_SITE, H_TIME, H_NONCE, H_SIG) == ("X-Btswarm-Site", "X-Btswarm-Timestamp", "X-Btswarm-Nonce",
                                                "X-Btswarm-Signature")


def test_round_trip():
    v, _ = verifier()
    headers = sign("secret-one", "site1", "POST", PATH, BODY, now=T0)
    assert v.verify("POST", PATH, headers, BODY) == "site1"
    headers = sign("secret-two", "site2", "DELETE", f"{PATH}/{'ab' * 20}", now=T0 + 10)
    assert v.verify("DELETE", f"{PATH}/{'ab' * 20}", headers, b"") == "site2"


def test_nonces_are_fresh_by_default():
    a = sign("secret-one", "site1", "POST", PATH, BODY, now=T0)
    b = sign("secret-one", "site1", "POST", PATH, BODY, now=T0)
    assert a[H_NONCE] != b[H_NONCE] and len(a[H_NONCE]) == 32
    v, _ = verifier()
    assert v.verify("POST", PATH, a, BODY) == v.verify("POST", PATH, b, BODY) == "site1"


def test_a_callable_secret_lookup():
    v = Verifier(lambda site: "s" if site == "x" else None, clock=Clock())
    assert v.verify("GET", "/", sign("s", "x", "GET", "/", now=T0), b"") == "x"


@pytest.mark.parametrize("missing", [H_SITE, H_TIME, H_NONCE, H_SIG])
def test_unsigned(missing):
    v, _ = verifier()
    headers = sign("secret-one", "site1", "POST", PATH, BODY, now=T0)
    del headers[missing]
    assert refused(v, "POST", PATH, headers, BODY) == "POST /api/seeds: request is not signed"
    assert refused(v, "POST", PATH, {}, BODY) == "POST /api/seeds: request is not signed"


def test_unknown_site():
    v, _ = verifier()
    headers = sign("secret-one", "site9", "POST", PATH, BODY, now=T0)
    assert refused(v, "POST", PATH, headers, BODY) == "site9: unknown site"


def test_wrong_key():
    v, _ = verifier()
    headers = sign("secret-two", "site1", "POST", PATH, BODY, now=T0)
    assert refused(v, "POST", PATH, headers, BODY) == "site1: bad signature"


@pytest.mark.parametrize("method, path, body", [
    ("POST", PATH, BODY.replace(b"ab", b"cd", 1)),  # tampered body
    ("POST", "/api/seeds/other", BODY),  # tampered path
    ("POST", PATH + "?x=1", BODY),  # tampered query
    ("DELETE", PATH, BODY),  # tampered method
])
def test_tampering(method, path, body):
    v, _ = verifier()
    headers = sign("secret-one", "site1", "POST", PATH, BODY, now=T0)
    assert refused(v, method, path, headers, body) == "site1: bad signature"


def test_tampered_timestamp_or_nonce():
    v, _ = verifier()
    headers = sign("secret-one", "site1", "POST", PATH, BODY, now=T0)
    assert refused(v, "POST", PATH, {**headers, H_TIME: str(int(T0) + 1)}, BODY) == "site1: bad signature"
    assert refused(v, "POST", PATH, {**headers, H_NONCE: "other"}, BODY) == "site1: bad signature"
    assert refused(v, "POST", PATH, {**headers, H_TIME: "soon"}, BODY) == "site1: bad timestamp"


def test_signature_with_non_ascii_characters_is_a_bad_signature_not_a_crash():
    v, _ = verifier()
    headers = sign("secret-one", "site1", "POST", PATH, BODY, now=T0)
    assert refused(v, "POST", PATH, {**headers, H_SIG: "é" * 64}, BODY) == "site1: bad signature"


def test_stale_by_301_seconds_either_way():
    v, clock = verifier()
    headers = sign("secret-one", "site1", "POST", PATH, BODY, now=T0)
    clock.now = T0 + 301
    assert refused(v, "POST", PATH, headers, BODY) == "site1: request timestamp is 301 s off (limit 300 s)"
    clock.now = T0 - 301
    assert refused(v, "POST", PATH, headers, BODY) == "site1: request timestamp is -301 s off (limit 300 s)"


def test_skew_of_300_seconds_is_accepted():
    v, clock = verifier()
    clock.now = T0 + 300
    assert v.verify("POST", PATH, sign("secret-one", "site1", "POST", PATH, BODY, now=T0), BODY) == "site1"
    clock.now = T0 - 300
    assert v.verify("POST", PATH, sign("secret-one", "site1", "POST", PATH, BODY, now=T0), BODY) == "site1"


def test_replayed_nonce():
    v, clock = verifier()
    headers = sign("secret-one", "site1", "POST", PATH, BODY, now=T0)
    assert v.verify("POST", PATH, headers, BODY) == "site1"
    clock.now = T0 + 299
    assert refused(v, "POST", PATH, headers, BODY) == "site1: replayed request"


def test_the_same_nonce_from_another_site_is_not_a_replay():
    v, _ = verifier()
    assert v.verify("POST", PATH, sign("secret-one", "site1", "POST", PATH, BODY, now=T0, nonce="n"), BODY)
    assert v.verify("POST", PATH, sign("secret-two", "site2", "POST", PATH, BODY, now=T0, nonce="n"), BODY)


def test_a_refused_request_does_not_burn_its_nonce():
    v, _ = verifier()
    good = sign("secret-one", "site1", "POST", PATH, BODY, now=T0, nonce="n")
    assert refused(v, "POST", PATH, good, b"tampered") == "site1: bad signature"
    assert v.verify("POST", PATH, good, BODY) == "site1"


def test_nonce_memory_is_bounded_by_count():
    v, _ = verifier(max_nonces=10)
    for i in range(100):
        v.verify("POST", PATH, sign("secret-one", "site1", "POST", PATH, BODY, now=T0, nonce=f"n{i}"), BODY)
    assert len(v._nonces) == 10
    # the newest are still remembered
    assert refused(v, "POST", PATH, sign("secret-one", "site1", "POST", PATH, BODY, now=T0, nonce="n99"),
                   BODY) == "site1: replayed request"


def test_nonce_memory_forgets_what_can_no_longer_be_replayed():
    v, clock = verifier()
    for i in range(50):
        v.verify("POST", PATH, sign("secret-one", "site1", "POST", PATH, BODY, now=T0, nonce=f"n{i}"), BODY)
    assert len(v._nonces) == 50
    clock.now = T0 + 601  # past twice the skew: every one of those requests is stale anyway
    v.verify("POST", PATH, sign("secret-one", "site1", "POST", PATH, BODY, now=clock.now, nonce="late"), BODY)
    assert list(v._nonces) == ["site1\0late"]
    stale = sign("secret-one", "site1", "POST", PATH, BODY, now=T0, nonce="n0")
    assert refused(v, "POST", PATH, stale, BODY) == "site1: request timestamp is 601 s off (limit 300 s)"


def test_a_stale_request_carries_the_signers_clock_offset():
    v, clock = verifier()
    headers = sign("secret-one", "site1", "POST", PATH, BODY, now=T0 + 600.7)  # its clock 10 minutes ahead
    with pytest.raises(StaleRequest) as info:
        v.verify("POST", PATH, headers, BODY)
    assert (info.value.site, round(info.value.offset), info.value.limit) == ("site1", 600, 300)
    assert str(info.value) == "site1: request timestamp is -600 s off (limit 300 s)"


def test_a_stale_request_with_a_wrong_signature_is_a_bad_signature_not_a_clock():
    # Checked in this order, no one without the secret can make a service warn about a site's clock.
    v, _ = verifier()
    headers = sign("not-the-secret", "site1", "POST", PATH, BODY, now=T0 + 600)
    assert refused(v, "POST", PATH, headers, BODY) == "site1: bad signature"
