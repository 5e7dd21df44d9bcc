"""The team gateway's access-token check (supervisor.gateway._resource.JWTVerifier), against
a real authorization server on loopback: the test IdP of supervisor.testing (it signs
ES256 JWTs and publishes its metadata and JWKS). A token of that issuer for the gateway's
resource URL is taken, with its subject, scopes and groups; a token for another audience,
an expired one, one signed by another key, one with ``alg`` ``none`` or a shared secret,
one too large, or one that is no JWT is refused, saying why; a key rotation is followed
with one fetch of the JWKS, and made-up key ids cause no more fetches. While the issuer's
keys cannot be fetched, a token whose key is not held is "try again", never "invalid", and
the keys are fetched again within seconds — never in a flood. Whatever a token holds, its
check takes it or refuses it (a property test): an algorithm its key is not for, a
subject that is empty, an ``exp`` that is a string."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import jwt
import pytest
import trio
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from supervisor._util._urls import is_secure_url
from supervisor.gateway._resource import (
    ASYMMETRIC,
    MAX_TOKEN_BYTES,
    RETRY_AFTER,
    JWTVerifier,
    ResourceGate,
    _InvalidToken,
    _Refused,
    _Unreachable,
)
from supervisor.testing.servers import open_oauth_server

RESOURCE = "https://gateway.example.test/mcp"


async def test_a_token_of_the_issuer_for_the_gateway_is_taken_and_others_refused() -> None:
    async with open_oauth_server(idp=True) as fx:
        idp = fx.idp
        assert idp is not None
        verifier = JWTVerifier(issuer=idp.issuer, audience=RESOURCE)
        claims = {"scope": "tools:call tools:list", "groups": ["sre", "data"], "azp": "cli"}
        access = await verifier.check(idp.issue_id_token("alice", audience=RESOURCE, claims=claims))
        assert access.subject == "alice" and access.client_id == "cli"
        assert access.scopes == ["tools:call", "tools:list"]
        assert access.claims == {"iss": idp.issuer, "groups": ["sre", "data"]}
        assert access.resource == RESOURCE
        assert verifier.fetches == 1  # the metadata's jwks_uri, then the JWKS: once

        refused = {
            "audience": idp.issue_id_token("alice", audience="https://other.example/mcp"),
            "expired": idp.issue_id_token("alice", audience=RESOURCE, ttl=-120),
            "no JWT": "not-a-jwt",
            "too large": "x" * (MAX_TOKEN_BYTES + 1),
            "alg none": jwt.encode(
                {"iss": idp.issuer, "sub": "mallory", "aud": RESOURCE, "exp": 2**40},
                None,
                algorithm="none",
            ),
            "shared secret": jwt.encode(
                {"iss": idp.issuer, "sub": "mallory", "aud": RESOURCE, "exp": 2**40},
                "k" * 32,
                algorithm="HS256",
                headers={"kid": idp.kid},
            ),
            "another key": jwt.encode(
                {"iss": idp.issuer, "sub": "mallory", "aud": RESOURCE, "exp": 2**40},
                ec.generate_private_key(ec.SECP256R1()),
                algorithm="ES256",
                headers={"kid": idp.kid},
            ),
        }
        for what, token in refused.items():
            with pytest.raises(_InvalidToken):
                await verifier.check(token)
            assert await verifier.verify_token(token) is None, what
        assert verifier.fetches == 1


async def test_a_key_rotation_is_followed_and_made_up_key_ids_fetch_nothing_more() -> None:
    now = [0.0]
    async with open_oauth_server(idp=True) as fx:
        idp = fx.idp
        assert idp is not None
        verifier = JWTVerifier(issuer=idp.issuer, audience=RESOURCE, clock=lambda: now[0])
        assert (await verifier.check(idp.issue_id_token("a", audience=RESOURCE))).subject == "a"
        # The issuer rotates its key: tokens name the new one.
        idp._key = ec.generate_private_key(ec.SECP256R1())
        idp.public_key = idp._key.public_key()
        idp.kid = "rotated"
        now[0] += verifier.min_refetch
        assert (await verifier.check(idp.issue_id_token("b", audience=RESOURCE))).subject == "b"
        assert verifier.fetches == 2
        for n in range(5):  # made up, within min_refetch of the last fetch
            forged = jwt.encode(
                {"iss": idp.issuer, "sub": "m", "aud": RESOURCE, "exp": 2**40},
                ec.generate_private_key(ec.SECP256R1()),
                algorithm="ES256",
                headers={"kid": f"made-up-{n}"},
            )
            assert await verifier.verify_token(forged) is None
        assert verifier.fetches == 2


#: Keys of the team's AS beside its own EC key, which tests sign with: an RSA key whose JWK
#: names no algorithm, and an EC key whose JWK names ES256.
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
RSA_JWK = {**jwt.algorithms.RSAAlgorithm.to_jwk(RSA_KEY.public_key(), as_dict=True), "kid": "rsa"}
EC_KEY = ec.generate_private_key(ec.SECP256R1())
EC_JWK = {
    **jwt.algorithms.ECAlgorithm.to_jwk(EC_KEY.public_key(), as_dict=True),
    "kid": "ec",
    "alg": "ES256",
}


def access_token(fx: Any, subject: str = "alice") -> str:
    """An access token of the fixture AS (ES256, its own key) for :data:`RESOURCE`."""
    return fx.provider.issue_tokens("cli", ["mcp"], resource=RESOURCE, subject=subject).access_token


def rsa_token(fx: Any, algorithm: str = "RS256", kid: str = "rsa", **claims: Any) -> str:
    """A token signed with :data:`RSA_KEY` (``kid`` in its header) for :data:`RESOURCE`;
    ``claims`` over the usual ones."""
    payload = {"iss": fx.issuer, "sub": "alice", "aud": RESOURCE, "exp": time.time() + 600}
    return jwt.encode({**payload, **claims}, RSA_KEY, algorithm=algorithm, headers={"kid": kid})


async def test_while_the_issuers_keys_cannot_be_fetched_tokens_are_try_again_not_invalid() -> None:
    """At start-up with the AS down: every check says "try again" (the gate's 503), none
    "invalid" (401: MCP clients drop their token and send their user to log in again). A
    failed fetch is tried again after 1 s, then waits doubling to RETRY_AFTER — a flood of
    tokens meanwhile fetches nothing more — and the AS coming back is seen at the next
    retry. A key truly missing from freshly fetched keys is invalid; a rotation during
    another outage is "try again" again, the keys held meanwhile still taken."""
    now = [0.0]
    async with open_oauth_server(jwt_access_tokens=True, jwks_status=503) as fx:
        verifier = JWTVerifier(issuer=fx.issuer, audience=RESOURCE, clock=lambda: now[0])
        alice = access_token(fx)
        made_up = [rsa_token(fx, kid=f"made-up-{n}") for n in range(20)]

        async def flood() -> None:
            for token in [alice, *made_up]:
                with pytest.raises(_Unreachable, match="HTTP 503"):
                    await verifier.check(token)

        await flood()
        assert fx.provider.jwks_requests == 1
        waits = []
        for _ in range(5):  # at each retry time: one fetch, whatever the flood
            waited = 0.0
            while fx.provider.jwks_requests == len(waits) + 1:
                now[0] += 0.25
                waited += 0.25
                await flood()
                assert waited <= RETRY_AFTER
            waits.append(waited)
            assert fx.provider.jwks_requests == len(waits) + 1
        assert waits == [1.0, 2.0, 4.0, RETRY_AFTER, RETRY_AFTER]

        fx.config.jwks_status = 200  # the AS is back: seen at the next retry
        now[0] += RETRY_AFTER
        assert (await verifier.check(alice)).subject == "alice"
        for token in made_up:  # not in the keys just fetched: invalid, no fetch
            with pytest.raises(_InvalidToken, match="the issuer has no key 'made-up-"):
                await verifier.check(token)
        assert fx.provider.jwks_requests == 7

        # Another outage, during a key rotation: the new key's tokens are "try again";
        # the key held still serves its own tokens.
        fx.config.jwks_status = 503
        fx.provider.rotate_jwt_key()
        now[0] += verifier.min_refetch
        rotated = access_token(fx, "bob")
        with pytest.raises(_Unreachable):
            await verifier.check(rotated)
        with pytest.raises(_Unreachable):  # within the retry wait: no fetch, not invalid
            await verifier.check(rotated)
        assert (await verifier.check(alice)).subject == "alice"
        assert fx.provider.jwks_requests == 8
        fx.config.jwks_status = 200
        now[0] += 1.0
        assert (await verifier.check(rotated)).subject == "bob"
        assert fx.provider.jwks_requests == 9


async def test_a_token_signed_with_an_algorithm_its_key_is_not_for_is_refused() -> None:
    """RS256 or PS256 under the kid of the issuer's EC key (PyJWT raised ``TypeError``
    there: an unauthenticated 500), ES384 under a P-256 key, ES256 under an RSA key: each
    refused as invalid, saying why. An RSA key whose JWK names no algorithm verifies
    each RSA algorithm."""
    async with open_oauth_server(jwt_access_tokens=True, more_jwks=[RSA_JWK]) as fx:
        verifier = JWTVerifier(issuer=fx.issuer, audience=RESOURCE)
        ec_kid = fx.provider.jwt_kid
        p384 = ec.generate_private_key(ec.SECP384R1())
        payload = {"iss": fx.issuer, "sub": "mallory", "aud": RESOURCE, "exp": 2**40}
        mismatched = [
            rsa_token(fx, "RS256", kid=ec_kid),
            rsa_token(fx, "PS256", kid=ec_kid),
            rsa_token(fx, "PS512", kid=ec_kid),
            jwt.encode(payload, p384, algorithm="ES384", headers={"kid": ec_kid}),
            jwt.encode(payload, p384, algorithm="ES384", headers={"kid": "rsa"}),
        ]
        for token in mismatched:
            with pytest.raises(_InvalidToken, match="which the issuer's key '.+' is not for"):
                await verifier.check(token)
        for algorithm in ("RS256", "RS512", "PS256", "PS384"):
            assert (await verifier.check(rsa_token(fx, algorithm))).subject == "alice"


async def test_a_token_of_the_issuer_with_an_empty_subject_or_a_date_as_a_string_is_refused() -> (
    None
):
    """RFC 9068 §4 and RFC 7519: ``sub`` names the caller (not empty), and ``exp``,
    ``nbf`` and ``iat`` are numbers — PyJWT alone takes ``"2000000000"``."""
    async with open_oauth_server(jwt_access_tokens=True, more_jwks=[RSA_JWK]) as fx:
        verifier = JWTVerifier(issuer=fx.issuer, audience=RESOURCE)
        later = int(time.time()) + 600
        refused = {
            "names no subject": [
                access_token(fx, ""),
                rsa_token(fx, sub=""),
                rsa_token(fx, sub=" "),
            ],
            "exp is not a NumericDate": [
                rsa_token(fx, exp=str(later)),
                rsa_token(fx, exp=2**60),
            ],
            "nbf is not a NumericDate": [rsa_token(fx, nbf="0"), rsa_token(fx, nbf=True)],
            "iat is not a NumericDate": [rsa_token(fx, iat=str(int(time.time())))],
        }
        for why, tokens in refused.items():
            for token in tokens:
                with pytest.raises(_InvalidToken, match=why):
                    await verifier.check(token)
        fine = rsa_token(fx, exp=later + 0.5, nbf=0, iat=time.time())
        assert (await verifier.check(fine)).expires_at == later


async def test_keys_named_on_plain_http_or_at_no_fetchable_url_are_try_again_never_fetched() -> (
    None
):
    """The issuer's metadata names its ``jwks_uri`` on plain HTTP beyond loopback, or at a
    URL httpx cannot ask (its host no IDNA name: httpx raised ``UnicodeError``, a 500 for
    every request): the keys cannot be had — "try again", naming the URL and the issuer."""
    async with open_oauth_server(jwt_access_tokens=True) as fx:
        token = access_token(fx)
        for jwks_uri, why in (
            ("http://keys.example.test/jwks", "which is not an https:// URL"),
            ("https://a..b/jwks", "is no URL that can be fetched"),
        ):
            fx.config.metadata_overrides = {"jwks_uri": jwks_uri}
            verifier = JWTVerifier(issuer=fx.issuer, audience=RESOURCE)
            with pytest.raises(_Unreachable, match=why) as refused:
                await verifier.check(token)
            assert jwks_uri in str(refused.value) and fx.issuer in str(refused.value)
        assert fx.provider.jwks_requests == 0


def test_a_url_a_server_names_is_held_to_the_configs_rule_for_its_own() -> None:
    """What the config takes as ``jwksUrl`` is what is taken from an issuer's metadata."""
    from supervisor.config import load_config
    from supervisor.errors import ConfigError

    urls = [
        "https://login.example.test/jwks",
        "HTTPS://login.example.test/jwks",
        "http://127.0.0.1:8080/jwks",
        "http://localhost/jwks",
        "http://LOCALHOST/jwks",
        "http://[::1]:9/jwks",
        "http://login.example.test/jwks",
        "http://127.0.0.2/jwks",
        "http://10.0.0.1/jwks",
        "ftp://login.example.test/jwks",
        "https:///jwks",
        "//login.example.test/jwks",
        "login.example.test/jwks",
    ]
    for url in urls:
        auth = {"issuer": "https://login.example.test", "resource": RESOURCE, "jwksUrl": url}
        try:
            load_config({"mcpServers": {}, "supervisor": {"gateway": {"auth": auth}}})
        except ConfigError:
            taken = False
        else:
            taken = True
        assert is_secure_url(url) == taken, url


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
_dates = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.just(int(time.time()) + 600),
    st.just(str(int(time.time()) + 600)),
    _json,
)


#: A field a changed token lacks.
_ABSENT = object()


def _changes(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """None (often), or some of ``fields`` given other values, or taken away."""
    optional = {name: values | st.just(_ABSENT) for name, values in fields.items()}
    return st.just({}) | st.fixed_dictionaries({}, optional=optional)


@st.composite
def _tokens(draw: st.DrawFn, issuer: str, ec_kid: str) -> str:
    """A JWT of the issuer for the gateway, signed with the issuer's EC or RSA key (by one
    of the key's algorithms, or another), another key or none, whose header and payload
    are often changed: any field another value (any JSON), or gone."""
    how = draw(st.sampled_from(["ES256", "RS256", "PS256", "RS512", "other key", "junk"]))
    header: dict[str, Any] = {
        "alg": how if how in ASYMMETRIC else "ES256",
        "kid": "rsa" if how.startswith(("RS", "PS")) else "ec",
        "typ": "at+jwt",
    }
    now = int(time.time())
    payload: dict[str, Any] = {
        "iss": issuer,
        "aud": RESOURCE,
        "sub": "alice",
        "exp": now + 600,
        "iat": now,
        "scope": "mcp tools",
        "groups": ["eng"],
        "client_id": "cli",
    }
    header_changes = {
        "alg": st.sampled_from([*ASYMMETRIC, "none", "HS256", "EdDSA"]) | _json,
        "kid": st.sampled_from([ec_kid, "ec", "rsa", "made-up"]) | _json,
        "typ": _json,
        "crit": _json,
        "b64": _json,
        "jku": _json,
    }
    payload_changes = {
        "iss": _json,
        "aud": st.just([RESOURCE, "x"]) | _json,
        "sub": st.sampled_from(["", " ", "bob"]) | _json,
        "exp": _dates,
        "nbf": _dates,
        "iat": _dates,
        "scope": _json,
        "groups": _json,
        "client_id": _json,
        "azp": _json,
    }
    for part, fields in ((header, header_changes), (payload, payload_changes)):
        for name, value in draw(_changes(fields)).items():
            if value is _ABSENT:
                part.pop(name, None)
            else:
                part[name] = value
    signing = (
        _b64(json.dumps(header).encode()) + "." + _b64(json.dumps(payload).encode())
    ).encode()
    if how == "junk":
        signature = draw(st.binary(max_size=80))
    elif how == "other key":
        signature = jwt.get_algorithm_by_name("ES256").sign(
            signing, ec.generate_private_key(ec.SECP256R1())
        )
    else:
        key = EC_KEY if how == "ES256" else RSA_KEY
        signature = jwt.get_algorithm_by_name(how).sign(signing, key)
    return signing.decode() + "." + _b64(signature)


async def test_whatever_a_token_holds_its_check_lets_it_in_or_answers_401() -> None:
    """Arbitrary JWT headers and payloads, signed by the issuer's keys or not: the gate
    answers a caller with a subject, or a 401 — never a 503 (the keys are there) nor an
    error of its own (the 500 a request would get)."""
    async with open_oauth_server(jwt_access_tokens=True, more_jwks=[RSA_JWK, EC_JWK]) as fx:
        gate = ResourceGate(JWTVerifier(fx.issuer, RESOURCE), fx.issuer, RESOURCE)
        ec_kid = fx.provider.jwt_kid
        outcomes: list[str] = []

        async def one(token: str) -> None:
            try:
                caller = await gate.authenticate(f"Bearer {token}")
            except _Refused as refused:
                assert refused.status == 401, refused.message
                outcomes.append("refused")
            else:
                assert isinstance(caller.subject, str) and caller.subject.strip()
                assert caller.expires_at is not None
                outcomes.append("taken")

        @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(_tokens(fx.issuer, ec_kid))
        @example(rsa_token(fx, "RS256", kid=ec_kid))
        @example(rsa_token(fx, "PS256", kid=ec_kid))
        @example(rsa_token(fx, exp=str(int(time.time()) + 600)))
        @example(rsa_token(fx, exp=10**400))
        @example(access_token(fx, ""))
        def examples(token: str) -> None:
            trio.from_thread.run(one, token)

        async with gate.running():
            await trio.to_thread.run_sync(examples)
        assert "taken" in outcomes and "refused" in outcomes
