"""The team gateway's access-token check (supervisor.gateway._resource.JWTVerifier), against
a real authorization server on loopback: the test IdP of supervisor.testing (it signs
ES256 JWTs and publishes its metadata and JWKS). A token of that issuer for the gateway's
resource URL is taken, with its subject, scopes and groups; a token for another audience,
an expired one, one signed by another key, one with ``alg`` ``none`` or a shared secret,
one too large, or one that is no JWT is refused, saying why; a key rotation is followed
with one fetch of the JWKS, and made-up key ids cause no more fetches."""

from __future__ import annotations

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from supervisor.gateway._resource import MAX_TOKEN_BYTES, JWTVerifier, _InvalidToken
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
