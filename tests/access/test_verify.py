"""Tokens verified against a real issuer over https: each refusal with its own message, rotation."""

from __future__ import annotations

import time

import pytest

from btswarm.testbed.issuer import AUDIENCE, SigningKey
from tests.access.issuer_support import access_for, forged, hmac_signed, unsigned
from tests.deploy.deployment import make_pki
from torrents import tokens
from torrents.errors import TokenRefused
from torrents.servicekit.issuers import MIN_REFETCH, Issuers

pytestmark = pytest.mark.slow


@pytest.fixture
async def verifier(issuer, pki):
    v = Issuers(access_for(issuer, pki))
    yield v
    await v.close()


async def refusal(verifier, token: str) -> TokenRefused:
    with pytest.raises(TokenRefused) as err:
        await verifier.verify(token)
    return err.value


async def test_a_good_token_reads_its_scope(verifier, issuer):
    for alg in ("RS256", "ES256"):
        grant = await verifier.verify(issuer.mint("storage.read:/atlas storage.create:/atlas", alg=alg))
        assert grant.issuer == issuer.url and grant.paths == ("/atlas",)
        grant.check_reads("atlas:data18.AOD")
        with pytest.raises(TokenRefused) as err:
            grant.check_reads("cms:Run2018A")
        assert (err.value.status, err.value.scope) == (403, "storage.read:/cms")
        assert str(err.value) == ("cms:Run2018A: the token may not read it: it needs storage.read:/cms "
                                  "(the token has storage.read:/atlas)")
    assert issuer.fetches == 1  # the keys were kept


async def test_each_refusal_has_its_own_message(verifier, issuer, stranger):
    expired_at = time.time() - 3600
    cases = {
        "expired": (issuer.mint(now=expired_at - 600, lifetime=600), f"expired at {tokens.when(int(expired_at))} "
                                                                    "(60 min ago)"),
        "audience": (issuer.mint(aud="https://elsewhere.example"),
                     f"audience 'https://elsewhere.example' is not this federation's ({AUDIENCE})"),
        "issuer": (stranger.mint(), f"issuer {stranger.url} is not trusted here (trusted: {issuer.url})"),
        "forged": (forged(issuer.mint("storage.read:/cms"), scope="storage.read:/"), "bad signature: not signed by "
                   f"issuer {issuer.url}'s key {issuer.keys[0].kid!r}"),
        "none": (unsigned(issuer.mint()), "unsigned (alg: none): only tokens signed with RS256 or ES256 are accepted"),
        "hmac": (hmac_signed(issuer.mint(), issuer.keys[0].jwk()["n"].encode()),
                 "signed with HS256: only RS256 and ES256 are accepted"),
        "not-wlcg": (issuer.mint(**{"wlcg.ver": None}), "not a WLCG token (wlcg.ver None; expected 1.0)"),
        "future": (issuer.mint(now=time.time() + 3600), "not valid before"),
        "garbage": ("not.a-token", "not a JWT"),
    }
    for what, (token, message) in cases.items():
        err = await refusal(verifier, token)
        assert err.status == 401 and err.error == "invalid_token", what
        assert str(err).startswith(f"token: {message}"), (what, str(err))
        challenge = tokens.www_authenticate(err)
        assert challenge.startswith('Bearer realm="btswarm", error="invalid_token", error_description="'), challenge


async def test_a_rotated_key_stops_verifying_once_the_kept_keys_run_out(issuer, pki):
    now = [time.time()]
    verifier = Issuers(access_for(issuer, pki, keys_lifetime=60), clock=lambda: now[0])
    try:
        old = issuer.mint(lifetime=3600)
        await verifier.verify(old)
        issuer.rotate()
        await verifier.verify(old)  # still kept: a rotation takes effect within keys_lifetime
        new = issuer.mint(lifetime=3600)
        assert "does not publish" in str(await refusal(verifier, new))  # the keys were fetched just now
        now[0] += MIN_REFETCH
        await verifier.verify(new)  # an unknown key id fetches again, at most once per MIN_REFETCH
        assert issuer.fetches == 2
        now[0] += 61
        err = await refusal(verifier, old)
        assert "which issuer" in str(err) and "does not publish" in str(err)
        await verifier.verify(new)
    finally:
        await verifier.close()


async def test_an_issuer_that_does_not_answer_is_a_503_not_a_pass(issuer, pki):
    config = access_for(issuer, pki)
    token = issuer.mint()
    await issuer.__aexit__()
    verifier = Issuers(config)
    try:
        err = await refusal(verifier, token)
        assert err.status == 503 and f"issuer {issuer.url}'s keys are unavailable" in str(err)
    finally:
        await verifier.close()


async def test_an_issuer_away_keeps_its_kept_keys_until_their_lifetime_ends(issuer, pki):
    now = [time.time()]
    verifier = Issuers(access_for(issuer, pki, keys_lifetime=60), clock=lambda: now[0])
    try:
        good = issuer.mint(lifetime=3600)
        await verifier.verify(good)
        await issuer.__aexit__()  # the issuer goes away
        now[0] += MIN_REFETCH
        stranger_key = SigningKey.new("RS256")
        err = await refusal(verifier, issuer.mint(key=stranger_key))  # an unknown key id: asked, no answer
        assert err.status == 401 and "does not publish" in str(err)
        await verifier.verify(good)  # the kept keys still serve
        now[0] += 60  # their lifetime is over: refused, never verified with keys the issuer may have withdrawn
        err = await refusal(verifier, good)
        assert err.status == 503 and "keys are unavailable" in str(err)
    finally:
        await verifier.close()


async def test_the_issuer_certificate_is_checked(issuer, pki, tmp_path):
    other = make_pki(tmp_path / "other", ["127.0.0.1"], name="another CA")
    config = access_for(issuer, pki)
    verifier = Issuers(type(config)(restricted=config.restricted, issuers=config.issuers, ca_file=str(other.ca)))
    try:
        err = await refusal(verifier, issuer.mint())
        assert err.status == 503 and "certificate not trusted" in str(err) and "[access] ca_file" in str(err)
    finally:
        await verifier.close()
