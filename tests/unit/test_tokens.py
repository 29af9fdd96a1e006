"""The pure token checks (torrents/tokens.py) in milliseconds: a key made here, no issuer, no network."""

from __future__ import annotations

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from torrents import tokens
from torrents.access import AccessConfig
from torrents.errors import TokenRefused

ISS, AUD, NOW = "https://iam.example", "https://btswarm.example", 1_800_000_000.0
CONFIG = AccessConfig(restricted=("atlas",), issuers={ISS: AUD})
KEY = ec.generate_private_key(ec.SECP256R1())
PUBLIC = {"k1": jwt.PyJWK.from_json(jwt.algorithms.ECAlgorithm.to_jwk(KEY.public_key()), algorithm="ES256")}


def claims(**changes):
    base = {"iss": ISS, "aud": AUD, "exp": NOW + 600, "iat": NOW, "nbf": NOW, "wlcg.ver": "1.0",
            "sub": "alice", "scope": "storage.read:/atlas storage.create:/atlas/user/alice"}
    return {k: v for k, v in {**base, **changes}.items() if v is not None}


def token(**changes) -> str:
    return jwt.encode(claims(**changes), KEY, algorithm="ES256", headers={"kid": "k1"})


def verified(t: str, now: float = NOW) -> tokens.Grant:
    seen = tokens.inspect(t, CONFIG)
    return tokens.check_claims(tokens.verify_signature(t, seen, PUBLIC), CONFIG, now)


def refused(t: str, now: float = NOW) -> TokenRefused:
    with pytest.raises(TokenRefused) as err:
        verified(t, now)
    return err.value


def test_a_good_token_and_what_it_reads():
    grant = verified(token())
    assert (grant.issuer, grant.subject, grant.paths, grant.expires) == (ISS, "alice", ("/atlas",), NOW + 600)
    grant.check_reads("atlas:d1")
    assert verified(token(aud=["other", AUD])).paths == ("/atlas",)  # an audience list may hold ours
    assert verified(token(), now=NOW + 600 + 59).paths  # within the leeway


@pytest.mark.parametrize("changes, now, message", [
    ({}, NOW + 600 + 61, "token: expired at 2027-01-15 08:10:00 UTC (61 s ago)"),
    ({}, NOW + 4 * 3600, "token: expired at 2027-01-15 08:10:00 UTC (3 h ago)"),
    ({"exp": None}, NOW, "token: no expiry (exp)"),
    ({"nbf": NOW + 3600}, NOW, "token: not valid before 2027-01-15 09:00:00 UTC (nbf; is a clock wrong?)"),
    ({"aud": "https://else"}, NOW, f"token: audience 'https://else' is not this federation's ({AUD})"),
    ({"aud": None}, NOW, f"token: audience None is not this federation's ({AUD})"),
    ({"wlcg.ver": None}, NOW, "token: not a WLCG token (wlcg.ver None; expected 1.0)"),
])
def test_claims_refused(changes, now, message):
    err = refused(token(**changes), now)
    assert (str(err), err.status, err.error) == (message, 401, "invalid_token")


def test_header_and_issuer_refused_before_any_key():
    assert str(refused(token(iss="https://evil"))) == f"token: issuer https://evil is not trusted here (trusted: {ISS})"
    hs = jwt.encode(claims(), "a secret an attacker knows, 32 bytes+", algorithm="HS256")
    assert str(refused(hs)) == "token: signed with HS256: only RS256 and ES256 are accepted"
    none = jwt.encode(claims(), None, algorithm="none")
    assert str(refused(none)).startswith("token: unsigned (alg: none)")
    other = jwt.encode(claims(), ec.generate_private_key(ec.SECP256R1()), algorithm="ES256", headers={"kid": "k1"})
    assert str(refused(other)) == f"token: bad signature: not signed by issuer {ISS}'s key 'k1'"
    unknown = jwt.encode(claims(), KEY, algorithm="ES256", headers={"kid": "k9"})
    assert "signed with key 'k9', which issuer" in str(refused(unknown))
    assert str(refused("abc")).startswith("token: not a JWT")
    no_kid = jwt.encode(claims(), KEY, algorithm="ES256")
    assert verified(no_kid).paths == ("/atlas",)  # one key published: it is that one
    two = {**PUBLIC, "k2": PUBLIC["k1"]}
    with pytest.raises(TokenRefused, match=r"^token: no key id \(kid\) in its header, and issuer .* publishes 2 keys$"):
        tokens.verify_signature(no_kid, tokens.inspect(no_kid, CONFIG), two)


def test_scope_refusal_is_403_naming_the_scope_needed():
    with pytest.raises(TokenRefused) as err:
        verified(token(scope="storage.read:/cms")).check_reads("atlas:d1")
    assert (err.value.status, err.value.error, err.value.scope) == (403, "insufficient_scope", "storage.read:/atlas")
    assert tokens.www_authenticate(err.value) == (
        'Bearer realm="btswarm", error="insufficient_scope", error_description="the token may not read it: it '
        'needs storage.read:/atlas (the token has storage.read:/cms)", scope="storage.read:/atlas"')
    assert tokens.www_authenticate(tokens.missing("atlas:d1")) == 'Bearer realm="btswarm", scope="storage.read:/atlas"'


@pytest.mark.parametrize("header, found", [
    (None, None), ("", None), ("Bearer abc.def.ghi", "abc.def.ghi"), ("bearer  abc ", "abc"),
    ("Basic dXNlcjpwdw==", None), ("Bearer", None),
])
def test_the_authorization_header(header, found):
    assert tokens.bearer(header) == found
