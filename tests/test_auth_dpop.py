"""DPoP (RFC 9449, SEP-1932) end to end: the supervisor's OAuth client against the repo's
OAuth fixture in its DPoP mode (``dpop=True``) on 127.0.0.1 — an authorization server
that binds tokens to the key of the token request's proof, and an MCP endpoint that takes
a bound token only with a valid proof of each request, both able to demand a nonce. The
fixture checks and records every proof; the tests assert on what it recorded."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any

import httpx2
import msgspec
import pytest
import structlog

from supervisor import log, open_supervisor
from supervisor.testing.servers import open_oauth_server
from tests.test_auth import SCOPES, Browser, broker, config, connected, stored, whoami


def dpop_config(url: str, **auth: Any) -> dict[str, Any]:
    return config(url, dpop=True, **auth)


def ath(token: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(token.encode()).digest()).rstrip(b"=").decode()


def valid(fx: Any, where: str) -> list[Any]:
    """The proofs the fixture accepted at ``where`` (``"token"``, ``"mcp"``)."""
    return [p for p in fx.provider.dpop_proofs if p.where == where and p.error is None]


async def test_a_dpop_server_is_logged_in_to_and_called_with_a_proof_per_request(
    tmp_path: Path,
) -> None:
    async with open_oauth_server(scopes_supported=SCOPES, dpop=True) as fx:
        browser = Browser()
        async with open_supervisor(
            dpop_config(fx.url), auth_dir=tmp_path, oauth_redirect_handler=browser
        ) as sup:
            await connected(sup)
            assert (await whoami(sup))["subject"] == "test-user"
            await whoami(sup)
        proofs = fx.provider.dpop_proofs
        assert [p.error for p in proofs] == [None] * len(proofs), proofs
        (exchange,) = valid(fx, "token")
        assert exchange.htm == "POST" and exchange.htu == fx.token_endpoint
        assert exchange.ath is None
        # The token is bound to that key, and every request to the server proves it.
        (access,) = [t for t in fx.provider.access_tokens]
        assert fx.provider.dpop_bindings[access] == exchange.jkt
        calls = valid(fx, "mcp")
        assert len(calls) >= 4  # initialize, initialized, tools/list, two calls...
        assert {p.htu for p in calls} == {fx.url}
        assert {p.htm for p in calls} <= {"POST", "GET", "DELETE"} and "POST" in {
            p.htm for p in calls
        }
        assert {p.ath for p in calls} == {ath(access)}
        assert {p.jkt for p in calls} == {exchange.jkt}
        jtis = [p.jti for p in proofs]
        assert len(set(jtis)) == len(jtis)  # a fresh proof each time
        assert all(p.header["typ"] == "dpop+jwt" and p.header["alg"] == "ES256" for p in proofs)
        assert all("d" not in p.header["jwk"] for p in proofs)
        # What the server saw of the scheme: never the bound token as a Bearer one.
        assert fx.mcp_statuses[401] == 1  # the first, tokenless request only
        row = stored(tmp_path)
        assert row["dpop"]["bound"] is True
        assert row["dpop"]["key"]["kty"] == "EC" and row["dpop"]["key"]["d"]
        assert len(browser.opened) == 1


async def test_the_nonces_the_authorization_server_and_the_server_ask_for_are_followed(
    tmp_path: Path,
) -> None:
    """Each asks for its nonce once: the request it refused is sent again with it, and
    every proof sent there afterwards carries it (the refresh's too), never asked again."""
    knobs = {"dpop": True, "dpop_as_nonce": True, "dpop_rs_nonce": True}
    async with open_oauth_server(scopes_supported=SCOPES, **knobs) as fx:
        async with open_supervisor(
            dpop_config(fx.url), auth_dir=tmp_path, oauth_redirect_handler=Browser()
        ) as sup:
            await connected(sup)
            assert (await whoami(sup))["subject"] == "test-user"
            fx.provider.expire_access_tokens()
            await whoami(sup)
            assert fx.provider.refreshes == 1
            assert sup.status()["remote"].restarts == 0
        nonces = fx.provider.dpop_nonces
        assert fx.provider.dpop_nonce_challenges == {"as": 1, "rs": 1}
        refused = [p for p in fx.provider.dpop_proofs if p.error is not None]
        assert [(p.where, p.error, p.nonce) for p in refused] == [
            ("token", "use_dpop_nonce", None),
            ("mcp", "use_dpop_nonce", None),
        ]
        exchange, refresh = valid(fx, "token")
        assert exchange.nonce == refresh.nonce == nonces["as"]
        assert exchange.jti != refused[0].jti  # the retry is a new proof
        calls = valid(fx, "mcp")
        assert len(calls) >= 4 and {p.nonce for p in calls} == {nonces["rs"]}
        assert fx.provider.token_requests["authorization_code"] == 1  # the one accepted


async def test_the_key_is_kept_with_the_tokens_and_a_restart_refreshes_with_it(
    tmp_path: Path,
) -> None:
    """The refresh token is bound to the key too (the fixture takes it only with a proof
    of that key): a fresh process refreshes the stored token with the stored key, no new
    login."""
    async with open_oauth_server(scopes_supported=SCOPES, dpop=True) as fx:
        async with open_supervisor(
            dpop_config(fx.url), auth_dir=tmp_path, oauth_redirect_handler=Browser()
        ) as sup:
            await connected(sup)
            key = broker(sup).credentials.dpop_key
            await whoami(sup)
        (exchange,) = valid(fx, "token")
        assert exchange.jkt == key.thumbprint
        row = stored(tmp_path)
        refresh_token = row["token"]["refresh_token"]
        assert fx.provider.dpop_bindings[refresh_token] == key.thumbprint
        fx.provider.expire_access_tokens()
        browser = Browser()
        async with open_supervisor(
            dpop_config(fx.url), auth_dir=tmp_path, oauth_redirect_handler=browser
        ) as sup:
            await sup.connect_all()
            assert (await whoami(sup))["subject"] == "test-user"
            assert broker(sup).credentials.dpop_key.thumbprint == key.thumbprint
        assert browser.opened == [] and fx.provider.refreshes == 1
        _, refresh = valid(fx, "token")
        assert refresh.jkt == key.thumbprint
        assert stored(tmp_path)["dpop"]["key"] == row["dpop"]["key"]
        (access,) = [t for t, a in fx.provider.access_tokens.items() if a.expires_at > time.time()]
        assert {p.ath for p in valid(fx, "mcp")[-2:]} == {ath(access)}


async def test_client_credentials_get_a_bound_token(tmp_path: Path) -> None:
    async with open_oauth_server(scopes_supported=SCOPES, dpop=True, dpop_as_nonce=True) as fx:
        fx.provider.add_client("machine", "m-secret-value", grant_types=["client_credentials"])
        auth = {
            "grant": "client_credentials",
            "clientId": "machine",
            "clientSecret": "m-secret-value",
            "issuer": fx.issuer,
        }
        async with open_supervisor(dpop_config(fx.url, **auth), auth_dir=tmp_path) as sup:
            await sup.connect_all()
            assert (await whoami(sup))["client_id"] == "machine"
        (grant,) = valid(fx, "token")
        assert grant.nonce == fx.provider.dpop_nonces["as"]
        (access,) = fx.provider.access_tokens
        assert fx.provider.dpop_bindings[access] == grant.jkt
        assert {p.jkt for p in valid(fx, "mcp")} == {grant.jkt}


async def test_without_the_option_tokens_stay_bearer_ones(tmp_path: Path) -> None:
    async with open_oauth_server(scopes_supported=SCOPES, dpop=True) as fx:
        async with open_supervisor(
            config(fx.url), auth_dir=tmp_path, oauth_redirect_handler=Browser()
        ) as sup:
            await connected(sup)
            await whoami(sup)
        assert fx.provider.dpop_proofs == [] and fx.provider.dpop_bindings == {}
        assert "dpop" not in stored(tmp_path)


async def test_a_token_the_authorization_server_did_not_bind_is_sent_as_a_bearer_one(
    tmp_path: Path,
) -> None:
    """An authorization server without DPoP ignores the proof and answers ``token_type``
    ``Bearer``: the token is presented as one, and the server is reached."""
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        async with open_supervisor(
            dpop_config(fx.url), auth_dir=tmp_path, oauth_redirect_handler=Browser()
        ) as sup:
            await connected(sup)
            assert (await whoami(sup))["subject"] == "test-user"
            fx.provider.expire_access_tokens()
            await whoami(sup)
            assert fx.provider.refreshes == 1
        assert fx.mcp_statuses[401] == 2  # the first, tokenless request; the expired token
        assert stored(tmp_path)["dpop"]["bound"] is False


async def test_the_key_and_the_tokens_never_reach_a_log_or_the_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from supervisor.log import configure_logging

    structlog_config = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    async with open_oauth_server(scopes_supported=SCOPES, dpop=True, dpop_rs_nonce=True) as fx:
        configure_logging(level="debug", force=True)
        try:
            async with open_supervisor(
                dpop_config(fx.url), auth_dir=tmp_path, oauth_redirect_handler=Browser()
            ) as sup:
                await connected(sup)
                fx.provider.expire_access_tokens()
                await whoami(sup)
                key = broker(sup).credentials.dpop_key
                assert key.secret in log.redactor  # registered while the broker holds it
                shown = repr(sup.auth_status("remote")) + repr(key) + repr(broker(sup))
                shown += json.dumps([msgspec.to_builtins(r) for r in sup.status().values()])
        finally:
            structlog.configure(**structlog_config)
            root.handlers[:] = handlers
            root.setLevel(level)
    logs = capsys.readouterr()
    secrets = [key.secret, *fx.provider.access_tokens, *fx.provider.refresh_tokens]
    assert len(secrets) >= 4
    for text in (logs.out + logs.err, shown):
        for secret in secrets:
            assert secret not in text


async def test_the_team_gateway_takes_bearer_tokens_and_says_so_to_a_dpop_caller(
    tmp_path: Path,
) -> None:
    """``mcp-supervisor serve --http`` as a team gateway: a member's token presented with
    the DPoP scheme and a proof is refused, 401 ``invalid_request`` naming Bearer (never
    taken, never a 500); the same token as a Bearer one is taken."""
    from supervisor.auth._dpop import DpopKey
    from tests.test_gateway_team import GROUPS, free_port, served_team, token_for

    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    tools = url.removesuffix("/mcp") + "/tools"
    async with (
        open_oauth_server(jwt_access_tokens=True, resources=[url], groups=GROUPS) as fx,
        served_team(tmp_path, fx, url) as err,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        token = token_for(fx, "alice", url)
        key = DpopKey.generate()
        for method, target in (("GET", tools), ("POST", url)):
            proof = key.proof(method, target, access_token=token)
            headers = {"Authorization": f"DPoP {token}", "DPoP": proof}
            answer = await http.request(method, target, headers=headers, json={})
            assert answer.status_code == 401, answer.text
            challenge = answer.headers["www-authenticate"]
            assert challenge.startswith('Bearer error="invalid_request", error_description="')
            assert "takes Bearer access tokens, not DPoP-bound ones" in challenge
        answer = await http.get(tools, headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200, answer.text
        well_known = url.removesuffix("/mcp") + "/.well-known/oauth-protected-resource/mcp"
        metadata = await http.get(well_known)
        assert "dpop_signing_alg_values_supported" not in metadata.json()
    assert b"Traceback" not in err.data


def test_the_dpop_field_is_a_boolean_off_by_default() -> None:
    from tests.test_config import errors_of, one

    def auth(value: object) -> dict[str, Any]:
        return {"mcpServers": {"s": {"url": "https://h/mcp", "auth": value}}}

    assert one(auth({"dpop": True})).servers["s"].auth.dpop is True
    assert one(auth({})).servers["s"].auth.dpop is False
    assert errors_of(auth({"dpop": "yes"})) == [
        "mcpServers.s.auth.dpop: must be true or false, not a string"
    ]
    exchange = {"dpop": True, "perUser": "token_exchange", "clientId": "gw"}
    assert errors_of(auth(exchange)) == [
        'mcpServers.s.auth.dpop: does not go with "perUser": "token_exchange" (the tokens it '
        "trades for are Bearer ones)"
    ]


async def test_the_fixture_refuses_what_a_wrong_client_would_send() -> None:
    """The fixture is the oracle of the tests above: it refuses a bound token sent as a
    Bearer one, a proof without ``ath``, of another key, for another URL, or sent twice."""
    from supervisor.auth._dpop import DpopKey

    async with (
        open_oauth_server(scopes_supported=SCOPES, dpop=True) as fx,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        fx.provider.add_client("machine", "m-secret", grant_types=["client_credentials"])
        key = DpopKey.generate()
        answer = await http.post(
            fx.token_endpoint,
            data={"grant_type": "client_credentials", "resource": fx.url},
            auth=("machine", "m-secret"),
            headers={"DPoP": key.proof("POST", fx.token_endpoint)},
        )
        assert answer.status_code == 200 and answer.json()["token_type"] == "DPoP"
        token = answer.json()["access_token"]
        mcp = {"Accept": "application/json, text/event-stream"}

        async def send(authorization: str, proof: str | None) -> httpx2.Response:
            headers = {**mcp, "Authorization": authorization}
            if proof is not None:
                headers["DPoP"] = proof
            return await http.post(fx.url, headers=headers, json={})

        good = key.proof("POST", fx.url, access_token=token)
        assert (await send(f"DPoP {token}", good)).status_code != 401
        wrong = {
            "a Bearer one": (f"Bearer {token}", None),
            "no proof": (f"DPoP {token}", None),
            "no ath": (f"DPoP {token}", key.proof("POST", fx.url)),
            "another key": (
                f"DPoP {token}",
                DpopKey.generate().proof("POST", fx.url, access_token=token),
            ),
            "another URL": (
                f"DPoP {token}",
                key.proof("POST", fx.issuer + "/other", access_token=token),
            ),
            "sent twice": (f"DPoP {token}", good),
        }
        for what, (authorization, proof) in wrong.items():
            answer = await send(authorization, proof)
            assert answer.status_code == 401, what
            assert answer.headers["www-authenticate"].startswith("DPoP error="), what
