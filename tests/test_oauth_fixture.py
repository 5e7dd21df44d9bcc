"""The OAuth-protected MCP server fixture (``open_oauth_server``), its IdP and its browser,
driven by hand with plain httpx2 requests: every flow a client under test will take."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import sys
import time
import webbrowser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import jwt
import pytest
import trio
from mcp.shared.auth import JWT_BEARER_GRANT_TYPE

from supervisor.testing.servers import open_oauth_server, start_http
from supervisor.testing.servers._oauth import OAuthFixture, generate_key_pair

from . import oauth_browser

SCOPES = ["read", "write", "admin", "offline_access"]
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
REDIRECT = "http://127.0.0.1:8765/callback"


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).decode().rstrip("=")


def basic(client_id: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()}


def client_assertion(private_pem: str, client_id: str, audience: str) -> dict[str, str]:
    now = int(time.time())
    claims = {"iss": client_id, "sub": client_id, "aud": audience, "iat": now, "exp": now + 60}
    token = jwt.encode({**claims, "jti": secrets.token_hex(8)}, private_pem, algorithm="ES256")
    return {"client_assertion_type": ASSERTION_TYPE, "client_assertion": token}


async def register(http: httpx2.AsyncClient, fx: OAuthFixture, **meta: Any) -> dict[str, Any]:
    body = {"redirect_uris": [REDIRECT], "client_name": "test", **meta}
    response = await http.post(fx.registration_endpoint, json=body)
    assert response.status_code == 201, response.text
    return response.json()


async def authorize(
    http: httpx2.AsyncClient, fx: OAuthFixture, client_id: str, challenge: str, **params: str
) -> dict[str, str]:
    """The authorization redirect's query (the endpoint approves at once)."""
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "st-1",
        "resource": fx.url,
        **params,
    }
    response = await http.get(fx.authorization_endpoint, params=query)
    assert response.status_code == 302, response.text
    location = response.headers["location"]
    assert location.startswith(REDIRECT.split("?")[0])
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


async def token(
    http: httpx2.AsyncClient,
    fx: OAuthFixture,
    form: dict[str, str],
    headers: dict[str, str] | None = None,
    status: int = 200,
) -> dict[str, Any]:
    response = await http.post(fx.token_endpoint, data=form, headers=headers or {})
    assert response.status_code == status, response.text
    return response.json()


async def code_flow(
    http: httpx2.AsyncClient, fx: OAuthFixture, scope: str | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Register, authorize with PKCE, redeem the code: (client info, token response)."""
    client = await register(http, fx)
    verifier, challenge = pkce()
    redirect = await authorize(http, fx, client["client_id"], challenge, **_opt(scope=scope))
    assert redirect["iss"] == fx.issuer and redirect["state"] == "st-1"
    form = {
        "grant_type": "authorization_code",
        "code": redirect["code"],
        "redirect_uri": REDIRECT,
        "code_verifier": verifier,
        "client_id": client["client_id"],
        "client_secret": client["client_secret"],
        "resource": fx.url,
    }
    return client, await token(http, fx, form)


def _opt(**params: str | None) -> dict[str, str]:
    return {k: v for k, v in params.items() if v is not None}


async def call(
    http: httpx2.AsyncClient, fx: OAuthFixture, access_token: str | None, tool: str = "whoami"
) -> httpx2.Response:
    """A 2026-07-28 (stateless) ``tools/call`` on ``/mcp``."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    arguments = {"text": "hi"} if tool == "echo" else {}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta},
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
    }
    if access_token is not None:
        headers["Authorization"] = f"Bearer {access_token}"
    return await http.post(fx.url, json=body, headers=headers)


async def whoami(http: httpx2.AsyncClient, fx: OAuthFixture, access_token: str) -> dict[str, Any]:
    response = await call(http, fx, access_token)
    assert response.status_code == 200, response.text
    return response.json()["result"]["structuredContent"]


async def test_metadata_and_unauthenticated_401() -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx, httpx2.AsyncClient() as http:
        assert fx.url == fx.issuer + "/mcp"
        resource = (await http.get(fx.resource_metadata_url)).json()
        assert resource["resource"] == fx.url
        assert resource["authorization_servers"] == [fx.issuer]
        meta = (await http.get(fx.metadata_url)).json()
        assert meta["issuer"] == fx.issuer
        assert meta["code_challenge_methods_supported"] == ["S256"]
        assert meta["scopes_supported"] == SCOPES
        assert meta["authorization_response_iss_parameter_supported"] is True
        assert {"authorization_code", "refresh_token", "client_credentials"} <= set(
            meta["grant_types_supported"]
        )
        assert JWT_BEARER_GRANT_TYPE in meta["grant_types_supported"]
        assert "private_key_jwt" in meta["token_endpoint_auth_methods_supported"]
        assert meta["registration_endpoint"] == fx.registration_endpoint

        response = await call(http, fx, None)
        assert response.status_code == 401
        challenge = response.headers["www-authenticate"]
        assert f'resource_metadata="{fx.resource_metadata_url}"' in challenge
        assert (await call(http, fx, "not-a-token")).status_code == 401
        assert fx.mcp_statuses[401] == 2


async def test_metadata_knobs() -> None:
    async with (
        open_oauth_server(
            advertise_s256=False, advertise_iss=False, resource_scopes_supported=["read"]
        ) as fx,
        httpx2.AsyncClient() as http,
    ):
        meta = (await http.get(fx.metadata_url)).json()
        assert "code_challenge_methods_supported" not in meta
        assert meta["authorization_response_iss_parameter_supported"] is False
        fx.advertise_s256 = True
        meta = (await http.get(fx.metadata_url)).json()
        assert meta["code_challenge_methods_supported"] == ["S256"]
        resource = (await http.get(fx.resource_metadata_url)).json()
        assert resource["scopes_supported"] == ["read"]


async def test_code_flow_then_whoami_and_counters() -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx, httpx2.AsyncClient() as http:
        client, tokens = await code_flow(http, fx, scope="read write")
        assert tokens["token_type"] == "Bearer" and tokens["expires_in"] == 3600
        assert tokens["scope"] == "read write" and tokens["refresh_token"]
        me = await whoami(http, fx, tokens["access_token"])
        assert me == {
            "client_id": client["client_id"],
            "scopes": ["read", "write"],
            "subject": "test-user",
            "resource": fx.url,
        }
        echoed = await call(http, fx, tokens["access_token"], "echo")
        assert echoed.json()["result"]["content"][0]["text"] == "hi"

        provider = fx.provider
        assert provider.registrations == 1 and provider.authorizations == 1
        assert provider.token_requests == {"authorization_code": 1}
        assert provider.redirect_uris == [REDIRECT]
        assert provider.resources == [fx.url] and provider.scopes == [["read", "write"]]
        assert provider.token_resources == [fx.url]
        assert "client_secret" not in provider.token_params[0]


async def test_pkce_iss_and_resource_checks() -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx, httpx2.AsyncClient() as http:
        client = await register(http, fx)
        verifier, challenge = pkce()
        redirect = await authorize(http, fx, client["client_id"], challenge)
        form = {
            "grant_type": "authorization_code",
            "code": redirect["code"],
            "redirect_uri": REDIRECT,
            "code_verifier": "wrong-" + verifier,
            "client_id": client["client_id"],
            "client_secret": client["client_secret"],
        }
        assert (await token(http, fx, form, status=400))["error"] == "invalid_grant"

        fx.wrong_iss = True
        redirect = await authorize(http, fx, client["client_id"], challenge)
        assert redirect["iss"] != fx.issuer
        fx.wrong_iss = False
        fx.config.send_iss = False
        assert "iss" not in await authorize(http, fx, client["client_id"], challenge)

        redirect = await authorize(http, fx, client["client_id"], challenge, resource="http://x/")
        assert redirect["error"] == "invalid_target"
        fx.config.deny_authorization = True
        redirect = await authorize(http, fx, client["client_id"], challenge)
        assert redirect == {
            "error": "access_denied",
            "error_description": redirect["error_description"],
            "state": "st-1",
        }
        # a loopback redirect URI matches its registration on any port (RFC 8252)
        fx.config.deny_authorization = False
        other_port = REDIRECT.replace("8765", "9999")
        query = {
            "response_type": "code",
            "client_id": client["client_id"],
            "redirect_uri": other_port,
            "code_challenge": challenge,
        }
        response = await http.get(fx.authorization_endpoint, params=query)
        assert response.headers["location"].startswith(other_port + "?code=")


async def test_expired_token_is_refused() -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx, httpx2.AsyncClient() as http:
        _, tokens = await code_flow(http, fx)
        assert (await call(http, fx, tokens["access_token"])).status_code == 200
        fx.provider.expire_access_tokens()
        response = await call(http, fx, tokens["access_token"])
        assert response.status_code == 401
        assert "resource_metadata=" in response.headers["www-authenticate"]


async def test_revocation_endpoint() -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx, httpx2.AsyncClient() as http:
        client, tokens = await code_flow(http, fx)
        form = {
            "token": tokens["access_token"],
            "client_id": client["client_id"],
            "client_secret": client["client_secret"],
        }
        response = await http.post(fx.issuer + "/revoke", data=form)
        assert response.status_code == 200
        assert (await call(http, fx, tokens["access_token"])).status_code == 401
        refresh = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
        del form["token"]
        assert (await token(http, fx, {**refresh, **form}, status=400))["error"] == "invalid_grant"
        assert fx.provider.revocations == 1
        assert fx.provider.token_requests == {"authorization_code": 1, "refresh_token": 1}


async def test_refresh_rotates_and_revocation_fails_it() -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx, httpx2.AsyncClient() as http:
        client, tokens = await code_flow(http, fx, scope="read")
        secret = {"client_id": client["client_id"], "client_secret": client["client_secret"]}
        first = tokens["refresh_token"]
        refreshed = await token(
            http, fx, {"grant_type": "refresh_token", "refresh_token": first, **secret}
        )
        assert refreshed["refresh_token"] != first
        assert refreshed["access_token"] != tokens["access_token"]
        assert (await whoami(http, fx, refreshed["access_token"]))["scopes"] == ["read"]
        old = {"grant_type": "refresh_token", "refresh_token": first, **secret}
        assert (await token(http, fx, old, status=400))["error"] == "invalid_grant"
        assert fx.provider.refreshes == 1
        assert fx.provider.token_requests["refresh_token"] == 2

        fx.provider.revoke_all_refresh_tokens()
        again = {"grant_type": "refresh_token", "refresh_token": refreshed["refresh_token"]}
        answer = await token(http, fx, {**again, **secret}, status=400)
        assert answer["error"] == "invalid_grant"


async def test_refresh_without_rotation() -> None:
    async with (
        open_oauth_server(scopes_supported=SCOPES, rotate_refresh_tokens=False) as fx,
        httpx2.AsyncClient() as http,
    ):
        client, tokens = await code_flow(http, fx)
        form = {
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "client_id": client["client_id"],
            "client_secret": client["client_secret"],
        }
        assert "refresh_token" not in await token(http, fx, form)
        assert "refresh_token" not in await token(http, fx, form)

        # Basic auth with no client_id in the body (RFC 6749 §2.3.1), which the SDK's
        # token handler alone would refuse
        fx.provider.add_client("cli", "pw", redirect_uris=[REDIRECT])
        verifier, challenge = pkce()
        redirect = await authorize(http, fx, "cli", challenge)
        form = {
            "grant_type": "authorization_code",
            "code": redirect["code"],
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
        }
        tokens = await token(http, fx, form, basic("cli", "pw"))
        form = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
        assert (await token(http, fx, form, basic("cli", "pw")))["access_token"]


async def test_step_up_answers_403_with_the_scope() -> None:
    async with (
        open_oauth_server(
            scopes_supported=SCOPES, required_scopes=["read"], scope_in_401=True
        ) as fx,
        httpx2.AsyncClient() as http,
    ):
        unauthenticated = await call(http, fx, None)
        assert 'scope="read"' in unauthenticated.headers["www-authenticate"]
        _, tokens = await code_flow(http, fx, scope="read")
        assert (await call(http, fx, tokens["access_token"])).status_code == 200

        fx.step_up_scopes = {"admin"}
        response = await call(http, fx, tokens["access_token"])
        assert response.status_code == 403
        challenge = response.headers["www-authenticate"]
        assert challenge.startswith('Bearer error="insufficient_scope"')
        assert 'scope="read admin"' in challenge
        assert f'resource_metadata="{fx.resource_metadata_url}"' in challenge

        _, stepped = await code_flow(http, fx, scope="read admin")
        assert (await call(http, fx, stepped["access_token"])).status_code == 200
        fx.step_up_scopes = set()
        assert (await call(http, fx, tokens["access_token"])).status_code == 200
        assert fx.mcp_statuses[403] == 1


async def test_client_credentials_basic_post_and_private_key_jwt() -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx, httpx2.AsyncClient() as http:
        provider = fx.provider
        grants = ["client_credentials"]
        provider.add_client("svc-basic", "s1", grant_types=grants)
        provider.add_client(
            "svc-post", "s2", token_endpoint_auth_method="client_secret_post", grant_types=grants
        )
        private_pem, public_pem = generate_key_pair()
        provider.add_client(
            "svc-jwt",
            token_endpoint_auth_method="private_key_jwt",
            public_key_pem=public_pem,
            grant_types=grants,
        )
        cc = {"grant_type": "client_credentials", "scope": "read", "resource": fx.url}

        by_basic = await token(http, fx, cc, basic("svc-basic", "s1"))
        assert "refresh_token" not in by_basic
        me = await whoami(http, fx, by_basic["access_token"])
        assert me["client_id"] == "svc-basic" and me["scopes"] == ["read"]

        posted = {**cc, "client_id": "svc-post", "client_secret": "s2"}
        by_post = await token(http, fx, posted)
        assert (await whoami(http, fx, by_post["access_token"]))["client_id"] == "svc-post"

        asserted = {**cc, **client_assertion(private_pem, "svc-jwt", fx.issuer)}
        by_jwt = await token(http, fx, asserted)
        assert (await whoami(http, fx, by_jwt["access_token"]))["client_id"] == "svc-jwt"
        assert (await token(http, fx, asserted, status=401))["error"] == "invalid_client"

        wrong_aud = {**cc, **client_assertion(private_pem, "svc-jwt", "http://elsewhere")}
        assert (await token(http, fx, wrong_aud, status=401))["error"] == "invalid_client"
        wrong_secret = await token(http, fx, cc, basic("svc-basic", "nope"), status=401)
        assert wrong_secret["error"] == "invalid_client"
        wrong_method = {**cc, "client_id": "svc-basic", "client_secret": "s1"}
        assert (await token(http, fx, wrong_method, status=401))["error"] == "invalid_client"
        assert provider.token_requests["client_credentials"] == 7


async def test_token_endpoint_auth_methods_knob() -> None:
    """``token_endpoint_auth_methods``: the metadata lists exactly those, and the token
    endpoint refuses a client authenticating another way, whatever it registered for."""
    knob = ["client_secret_basic"]
    async with (
        open_oauth_server(scopes_supported=SCOPES, token_endpoint_auth_methods=knob) as fx,
        httpx2.AsyncClient() as http,
    ):
        meta = (await http.get(fx.metadata_url)).json()
        assert meta["token_endpoint_auth_methods_supported"] == knob
        grants = ["client_credentials"]
        fx.provider.add_client("svc-basic", "s1", grant_types=grants)
        fx.provider.add_client(
            "svc-post", "s2", token_endpoint_auth_method="client_secret_post", grant_types=grants
        )
        cc = {"grant_type": "client_credentials", "resource": fx.url}
        assert "access_token" in await token(http, fx, cc, basic("svc-basic", "s1"))
        posted = {**cc, "client_id": "svc-post", "client_secret": "s2"}
        refused = await token(http, fx, posted, status=401)
        assert refused["error"] == "invalid_client"
        assert "client_secret_post" in refused["error_description"]


async def test_private_key_jwt_for_the_code_grant() -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx, httpx2.AsyncClient() as http:
        private_pem, public_pem = generate_key_pair()
        fx.provider.add_client(
            "web-jwt",
            token_endpoint_auth_method="private_key_jwt",
            public_key_pem=public_pem,
            redirect_uris=[REDIRECT],
        )
        verifier, challenge = pkce()
        redirect = await authorize(http, fx, "web-jwt", challenge)
        form = {
            "grant_type": "authorization_code",
            "code": redirect["code"],
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
            **client_assertion(private_pem, "web-jwt", fx.issuer),
        }
        tokens = await token(http, fx, form)
        assert (await whoami(http, fx, tokens["access_token"]))["client_id"] == "web-jwt"


async def test_identity_assertion_via_the_idp() -> None:
    async with (
        open_oauth_server(idp=True, scopes_supported=SCOPES) as fx,
        httpx2.AsyncClient() as http,
    ):
        assert fx.idp is not None
        fx.provider.add_client("ent", "ent-secret", grant_types=[JWT_BEARER_GRANT_TYPE])
        fx.idp.add_client("ent-at-idp", "idp-secret", mcp_client_id="ent")
        exchange = {
            "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
            "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
            "subject_token": fx.idp.issue_id_token("alice"),
            "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
            "audience": fx.issuer,
            "resource": fx.url,
            "scope": "read write",
        }
        response = await http.post(
            fx.idp.token_endpoint, data=exchange, headers=basic("ent-at-idp", "idp-secret")
        )
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["issued_token_type"] == "urn:ietf:params:oauth:token-type:id-jag"
        assert answer["token_type"] == "N_A" and answer["expires_in"] == 300
        id_jag = answer["access_token"]
        assert jwt.get_unverified_header(id_jag)["typ"] == "oauth-id-jag+jwt"
        claims = jwt.decode(id_jag, options={"verify_signature": False})
        assert claims["aud"] == fx.issuer and claims["client_id"] == "ent"
        assert claims["iss"] == fx.idp.issuer and claims["resource"] == fx.url

        grant = {"grant_type": JWT_BEARER_GRANT_TYPE, "assertion": id_jag, "resource": fx.url}
        tokens = await token(http, fx, grant, basic("ent", "ent-secret"))
        assert "refresh_token" not in tokens
        me = await whoami(http, fx, tokens["access_token"])
        assert me["client_id"] == "ent" and me["subject"] == "alice"
        assert me["scopes"] == ["read", "write"]
        replayed = await token(http, fx, grant, basic("ent", "ent-secret"), status=400)
        assert replayed["error"] == "invalid_grant"
        assert fx.provider.identity_assertions == 2

        # the IdP checks its client and the ID token's audience
        posted = {**exchange, "client_id": "ent-at-idp", "client_secret": "wrong"}
        assert (await http.post(fx.idp.token_endpoint, data=posted)).status_code == 401
        foreign = fx.idp.issue_id_token("bob", audience="someone-else")
        posted = {**exchange, "subject_token": foreign}
        posted |= {"client_id": "ent-at-idp", "client_secret": "idp-secret"}
        refused = await http.post(fx.idp.token_endpoint, data=posted)
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"
        assert fx.idp.exchanges == 1 and len(fx.idp.exchange_requests) == 3


class Callback:
    """A tiny loopback listener standing in for the client's redirect URI."""

    def __init__(self) -> None:
        self.queries: list[dict[str, str]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        query = parse_qs(scope["query_string"].decode())
        self.queries.append({k: v[0] for k, v in query.items()})
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"you may close this window"})


async def test_browser_follows_the_redirect_and_tampers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "browser.log"
    async with open_oauth_server(scopes_supported=SCOPES) as fx, trio.open_nursery() as nursery:
        callback = Callback()
        listener = await start_http(nursery, callback)
        redirect_uri = listener.url.removesuffix("/mcp") + "/callback"
        async with httpx2.AsyncClient() as http:
            client = await register(http, fx, redirect_uris=[redirect_uri])
        _, challenge = pkce()
        query = {
            "response_type": "code",
            "client_id": client["client_id"],
            "redirect_uri": redirect_uri,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "s-42",
        }
        url = fx.authorization_endpoint + "?" + urlencode(query)

        # as a client would open it: webbrowser with $BROWSER (run off the event loop)
        monkeypatch.setenv(oauth_browser.LOG_ENV, str(log))
        browser = webbrowser.get(oauth_browser.command())
        assert await trio.to_thread.run_sync(browser.open, url)
        assert callback.queries[-1]["state"] == "s-42"
        assert callback.queries[-1]["iss"] == fx.issuer
        assert callback.queries[-1]["code"] in fx.provider.codes

        env = {**os.environ, oauth_browser.TAMPER_ENV: "state"}
        script = [sys.executable, oauth_browser.__file__, url]
        done = await trio.run_process(script, env=env, capture_stderr=True, check=False)
        assert done.returncode == 0, done.stderr
        assert callback.queries[-1]["state"] == "tampered-s-42"
        env[oauth_browser.TAMPER_ENV] = "iss"
        await trio.run_process(script, env=env, check=True)
        assert callback.queries[-1]["iss"] == oauth_browser.TAMPERED_ISS
        assert log.read_text().splitlines() == [url, url, url]
        assert fx.provider.authorizations == 3
        nursery.cancel_scope.cancel()


def test_browser_refuses_anything_but_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "browser.log"
    monkeypatch.setenv(oauth_browser.LOG_ENV, str(log))
    assert oauth_browser.main(["https://example.com/authorize?x=1"]) == 2
    assert oauth_browser.main(["http://127.0.0.1.example.com/authorize"]) == 2
    assert log.read_text().splitlines() == [
        "https://example.com/authorize?x=1",
        "http://127.0.0.1.example.com/authorize",
    ]
    assert oauth_browser.is_loopback("http://[::1]:80/x")
    assert oauth_browser.is_loopback("http://localhost:1/cb")
    assert json.dumps(oauth_browser.command(background=True)).endswith(' %s &"')
