"""Workload identity (SEP-1933): the ``workload_identity`` grant — RFC 7523's jwt-bearer
grant with the workload's own JWT, from a file the platform rotates or a variable —
against the OAuth fixture's authorization server, which trusts a test platform's key."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
from mcp.shared.auth import JWT_BEARER_GRANT_TYPE

from supervisor import open_supervisor
from supervisor.config import load_config
from supervisor.errors import AuthorizationFailed, ConfigError
from supervisor.testing import EventTimeout, capture_events
from supervisor.testing.servers import open_oauth_server
from supervisor.testing.servers._oauth import OAuthFixture, generate_key_pair, workload_token

SCOPES = ["read", "write"]
PLATFORM = "https://k8s.platform.test"
CLIENT = "nightly-job"


@attrs.frozen
class Platform:
    """The test platform: the key it signs workload tokens with, and its issuer."""

    key: str
    issuer: str = PLATFORM

    def token(self, audience: str, **claims: Any) -> str:
        return workload_token(self.key, issuer=self.issuer, audience=audience, **claims)


@asynccontextmanager
async def wif_server(**knobs: Any) -> AsyncIterator[tuple[OAuthFixture, Platform]]:
    """The fixture's server, its authorization server trusting the platform's workload
    tokens, and the public client ``nightly-job`` allowed the jwt-bearer grant."""
    knobs.setdefault("scopes_supported", SCOPES)
    async with open_oauth_server(**knobs) as fx:
        private, public = generate_key_pair()
        fx.provider.trust_workloads(PLATFORM, public)
        fx.provider.add_client(
            CLIENT, token_endpoint_auth_method="none", grant_types=[JWT_BEARER_GRANT_TYPE]
        )
        yield fx, Platform(private)


def config(url: str, **auth: Any) -> dict[str, Any]:
    auth = {"grant": "workload_identity", "clientId": CLIENT, **auth}
    server = {"type": "http", "url": url, "lazy": False, "autoApprove": True, "auth": auth}
    return {"mcpServers": {"remote": server}}


async def whoami(sup: Any) -> dict[str, Any]:
    return json.loads((await sup.call("remote_whoami", {})).text)


@pytest.mark.parametrize("source", ["file", "env"])
async def test_connects_and_calls_with_the_workload_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    """The workload's JWT is the grant (RFC 7523 §2.1): one token request, the public
    client named by ``client_id``, no secret; the server sees the workload's subject."""
    async with wif_server() as (fx, platform):
        jwt = platform.token(fx.issuer, subject="system:serviceaccount:jobs:nightly")
        if source == "file":
            (tmp_path / "token").write_text(jwt + "\n")
            where: dict[str, str] = {"assertionFile": "token"}  # relative to the config
        else:
            monkeypatch.setenv("WORKLOAD_JWT", jwt)
            where = {"assertionEnv": "WORKLOAD_JWT"}
        path = tmp_path / "mcp.json"
        path.write_text(json.dumps(config(fx.url, scopes=["read"], **where)))
        async with open_supervisor(path, auth_dir=tmp_path / "auth") as sup:
            await sup.connect_all()
            me = await whoami(sup)
        assert me["client_id"] == CLIENT
        assert me["subject"] == "system:serviceaccount:jobs:nightly"
        assert me["scopes"] == ["read"]
        assert fx.provider.token_requests == {JWT_BEARER_GRANT_TYPE: 1}
        assert fx.provider.workload_grants == 1
        (sent,) = fx.provider.token_params
        assert sent["client_id"] == CLIENT and sent["scope"] == "read"
        assert sent["resource"] == fx.url
        assert "client_secret" not in sent and fx.provider.registrations == 0


async def test_the_rotated_file_is_read_at_each_token_request(tmp_path: Path) -> None:
    """The platform rotates the file: the token renewed when it expires is asked for
    with the JWT there now, by the same grant (never a refresh token)."""
    async with wif_server() as (fx, platform):
        token = tmp_path / "token"
        token.write_text(platform.token(fx.issuer, subject="first"))
        cfg = config(fx.url, assertionFile=str(token))
        async with open_supervisor(cfg, auth_dir=tmp_path / "auth") as sup:
            await sup.connect_all()
            assert (await whoami(sup))["subject"] == "first"
            token.write_text(platform.token(fx.issuer, subject="rotated"))
            fx.provider.expire_access_tokens()  # the server refuses it: renewed
            assert (await whoami(sup))["subject"] == "rotated"
        assert fx.provider.token_requests == {JWT_BEARER_GRANT_TYPE: 2}
        assert fx.provider.refreshes == 0


async def test_a_confidential_client_authenticates_as_the_server_lists(tmp_path: Path) -> None:
    """A client with a secret authenticates as the authorization server's metadata
    lists (here only ``client_secret_post``), the workload's JWT still the grant."""
    async with wif_server(token_endpoint_auth_methods=["client_secret_post"]) as (fx, platform):
        fx.provider.add_client(
            "confidential",
            "c-secret-value",
            token_endpoint_auth_method="client_secret_post",
            grant_types=[JWT_BEARER_GRANT_TYPE],
        )
        (tmp_path / "token").write_text(platform.token(fx.issuer))
        cfg = config(
            fx.url,
            clientId="confidential",
            clientSecret="c-secret-value",
            assertionFile=str(tmp_path / "token"),
        )
        async with open_supervisor(cfg, auth_dir=tmp_path / "auth") as sup:
            await sup.connect_all()
            assert (await whoami(sup))["client_id"] == "confidential"
        assert fx.provider.token_requests == {JWT_BEARER_GRANT_TYPE: 1}


REFUSALS = {
    # case: (the token's claims or how it is made, the config's scopes, what is said)
    "expired": (
        {"expires_in": -30},  # within the leeway: sent, the authorization server judges
        None,
        "invalid_grant",
        ["JWT assertion is expired", "it expired at", "the platform has not renewed it"],
    ),
    "wrong audience": (
        {"audience": "https://wrong.example"},
        None,
        "invalid_grant",
        ["JWT assertion audience is invalid", "its audience is https://wrong.example"],
    ),
    "unknown signer": (
        {"signer": "another"},
        None,
        "invalid_grant",
        ["Signature verification failed", "trusts the platform that issued it"],
    ),
    "unknown issuer": (
        {"issuer": "https://other.platform.test"},
        None,
        "invalid_grant",
        ["unknown assertion issuer 'https://other.platform.test'", "trusts the platform"],
    ),
    "scope": (
        {},
        ["admin"],
        "invalid_scope",
        ["Unsupported scope admin", "check auth.scopes"],
    ),
    "client": (
        {"client": "not-allowed"},
        None,
        "unauthorized_client",
        ["not allowed", "'not-allowed' may not use this grant"],
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
async def test_a_refusal_surfaces_once_with_its_error(tmp_path: Path, case: str) -> None:
    """Each refusal (RFC 6749 §5.2) fails the server's authorization once, naming the
    server, the token's file and the authorization server's error, with what to do: no
    second token request (a call fails fast), and no other grant."""
    claims, scopes, error, said = REFUSALS[case]
    async with wif_server() as (fx, platform):
        fx.provider.add_client("not-allowed", token_endpoint_auth_method="none")
        if claims.get("signer"):
            platform = Platform(generate_key_pair()[0])  # same issuer, another key
        if claims.get("issuer"):
            platform = Platform(platform.key, claims["issuer"])  # a platform not trusted
        audience = claims.get("audience", fx.issuer)
        token = tmp_path / "token"
        token.write_text(platform.token(audience, expires_in=claims.get("expires_in", 3600)))
        cfg = config(
            fx.url,
            assertionFile=str(token),
            clientId=claims.get("client", CLIENT),
            scopes=scopes,
        )
        if scopes is None:
            del cfg["mcpServers"]["remote"]["auth"]["scopes"]
        async with (
            open_supervisor(cfg, auth_dir=tmp_path / "auth") as sup,
            capture_events(sup, "mcp.auth.failed") as seen,
        ):
            failed = await seen.wait_for("mcp.auth.failed", timeout=20)
            await sup.connect_all()  # returns once the server has settled: auth_failed
            record = sup.status()["remote"]
            assert record.status == "auth_failed"
            with pytest.raises(AuthorizationFailed) as refused:
                await sup.call("remote_whoami", {})
            assert refused.value.oauth_error == error
            message = str(refused.value)
            assert message.startswith("MCP server 'remote': ")
            assert (
                f"the workload token in {token} is refused by the authorization server" in message
            )
            for text in (message, failed.error, record.last_error or ""):
                assert f"(HTTP 400, {error}" in text, text
                for words in said:
                    assert words in text, text
            assert len([e for e in seen.events if e.kind == "mcp.auth.failed"]) == 1
        assert fx.provider.token_requests == {JWT_BEARER_GRANT_TYPE: 1}
        assert fx.provider.workload_grants == 1


async def test_the_authorization_servers_words_are_escaped(tmp_path: Path) -> None:
    """The error description is the authorization server's: a terminal control in it
    (here echoed from a scope) is shown escaped, in the error and the event."""
    async with wif_server() as (fx, platform):
        (tmp_path / "token").write_text(platform.token(fx.issuer))
        cfg = config(fx.url, assertionFile=str(tmp_path / "token"), scopes=["x\x1b]0;owned\x07"])
        async with (
            open_supervisor(cfg, auth_dir=tmp_path / "auth") as sup,
            capture_events(sup, "mcp.auth.failed") as seen,
        ):
            failed = await seen.wait_for("mcp.auth.failed", timeout=20)
            await sup.connect_all()
            error = sup.status()["remote"].last_error or ""
        for text in (failed.error, error):
            assert "\x1b" not in text and "\x07" not in text
            assert "Unsupported scope x\\x1b]0;owned\\x07" in text


@pytest.mark.parametrize("problem", ["missing", "empty", "unset"])
async def test_no_workload_token_fails_without_a_token_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, problem: str
) -> None:
    """A missing or empty file, an unset variable: the server's authorization fails
    saying where it looked (the platform has not written it); nothing is sent."""
    monkeypatch.delenv("NO_SUCH_WORKLOAD_JWT", raising=False)
    token = tmp_path / "token"
    if problem == "empty":
        token.write_text("\n")
    where = (
        {"assertionEnv": "NO_SUCH_WORKLOAD_JWT"}
        if problem == "unset"
        else {"assertionFile": str(token)}
    )
    expected = {
        "missing": f"cannot read the workload token from {token}",
        "empty": f"the workload token file {token} is empty",
        "unset": "the workload token: environment variable NO_SUCH_WORKLOAD_JWT is not set",
    }[problem]
    async with wif_server() as (fx, _):
        async with (
            open_supervisor(config(fx.url, **where), auth_dir=tmp_path / "auth") as sup,
            capture_events(sup, "mcp.auth.failed") as seen,
        ):
            failed = await seen.wait_for("mcp.auth.failed", timeout=20)
            await sup.connect_all()
            assert expected in failed.error
            assert "the platform has not written it" in failed.error
            assert sup.status()["remote"].status == "auth_failed"
        assert fx.provider.token_requests == {}


def errors_of(auth: dict[str, Any]) -> list[str]:
    document = {"mcpServers": {"s": {"url": "https://h/mcp", "auth": auth}}}
    with pytest.raises(ConfigError) as info:
        load_config(document, environ={})  # type: ignore[arg-type]
    return str(info.value).splitlines()


def test_config_rules() -> None:
    """The grant's needs, with field paths: clientId and exactly one of assertionFile
    and assertionEnv, which no other grant takes; no private key, idp or perUser."""
    grant = {"grant": "workload_identity"}
    assert errors_of(grant) == [
        "mcpServers.s.auth: the workload_identity grant needs clientId (the client the "
        "authorization server knows the workload as)",
        "mcpServers.s.auth: the workload_identity grant needs assertionFile or assertionEnv "
        "(where the workload's JWT is)",
    ]
    both = {**grant, "clientId": "c", "assertionFile": "t", "assertionEnv": "T"}
    assert errors_of(both) == [
        "mcpServers.s.auth: sets assertionFile and assertionEnv: the workload's JWT is read "
        "from one of them",
    ]
    assert errors_of({"grant": "client_credentials", "clientId": "c", "clientSecret": "s",
                      "assertionEnv": "T"}) == [
        'mcpServers.s.auth.assertionEnv: is for the workload_identity grant only ("grant": '
        '"workload_identity")',
    ]  # fmt: skip
    extras = {
        **grant,
        "clientId": "c",
        "assertionFile": "t",
        "privateKeyFile": "k.pem",
        "perUser": True,
        "idp": {"tokenEndpoint": "https://idp/token", "clientId": "i", "idTokenEnv": "T"},
    }
    assert errors_of(extras) == [
        "mcpServers.s.auth.privateKeyFile: does not go with the workload_identity grant (the "
        "workload's JWT is the grant; a client secret, if the authorization server wants "
        "one, authenticates the client)",
        "mcpServers.s.auth.idp: is for the identity_assertion grant; the workload_identity "
        "grant needs no identity provider (the workload's own JWT is the grant)",
        "mcpServers.s.auth.perUser: does not go with the workload_identity grant (its "
        "tokens are the workload's own, not each caller's)",
    ]
    public = {**grant, "clientId": "c", "assertionFile": "t", "clientSecret": "s"}
    assert errors_of({**public, "tokenEndpointAuthMethod": "none"}) == [
        'mcpServers.s.auth.tokenEndpointAuthMethod: is "none" (a public client), and a '
        "client secret is given: drop one of them",
    ]
    auth = load_config(
        {"mcpServers": {"s": {"url": "https://h/mcp", "auth": {**grant, "clientId": "c",
                                                                "assertionEnv": "T"}}}},
        environ={},
    ).servers["s"].auth  # fmt: skip
    assert auth is not None
    assert (auth.grant, auth.client_id, auth.assertion_env) == ("workload_identity", "c", "T")
    assert auth.assertion_file is None


async def test_the_token_is_renewed_ahead_of_its_expiry_with_the_file_there_then(
    tmp_path: Path,
) -> None:
    """A token about to expire is renewed before it is sent (no 401 first), by the
    same grant with the JWT in the file then."""
    async with wif_server(access_token_ttl=3600) as (fx, platform):
        token = tmp_path / "token"
        token.write_text(platform.token(fx.issuer, subject="first"))
        async with open_supervisor(
            config(fx.url, assertionFile=str(token)), auth_dir=tmp_path / "auth"
        ) as sup:
            await sup.connect_all()
            assert (await whoami(sup))["subject"] == "first"
            token.write_text(platform.token(fx.issuer, subject="second"))
            # Ours: the token is about to expire, so it is renewed before it is sent.
            sup._auth.broker("remote").clock = lambda: time.time() + 3590
            assert (await whoami(sup))["subject"] == "second"
        assert fx.provider.token_requests == {JWT_BEARER_GRANT_TYPE: 2}
        assert fx.mcp_statuses[401] == 1  # the first request's, before any token


async def test_after_a_refusal_a_login_asks_again_with_the_fixed_token(tmp_path: Path) -> None:
    """A refused server waits in ``auth_failed``, not asking again by itself; once the
    platform writes a good token, ``login`` asks again — one more request — and the
    server connects."""
    async with wif_server() as (fx, platform):
        token = tmp_path / "token"
        token.write_text(platform.token(fx.issuer, expires_in=-30))
        async with (
            open_supervisor(
                config(fx.url, assertionFile=str(token)), auth_dir=tmp_path / "auth"
            ) as sup,
            capture_events(sup, "mcp.auth.failed", "mcp.connected") as seen,
        ):
            await seen.wait_for("mcp.auth.failed", timeout=20)
            await sup.connect_all()
            assert sup.status()["remote"].status == "auth_failed"
            # Longer than a reconnection's first delay and a look at the token store: the
            # server waits, it does not try again.
            with pytest.raises(EventTimeout):
                await seen.wait_for("mcp.auth.failed", timeout=3)
            assert fx.provider.token_requests == {JWT_BEARER_GRANT_TYPE: 1}
            token.write_text(platform.token(fx.issuer, subject="fixed"))
            await sup.login("remote")
            await seen.wait_for("mcp.connected", timeout=20)
            assert (await whoami(sup))["subject"] == "fixed"
        assert fx.provider.token_requests == {JWT_BEARER_GRANT_TYPE: 2}


def test_only_the_last_two_tokens_read_stay_secrets(tmp_path: Path) -> None:
    """A platform that rotates hourly for months does not grow the redactor: a token
    read is held with the one before it, and the one before that let go."""
    from supervisor.auth._workload import AssertionSource

    held: set[str] = set()  # as the supervisor's redaction scope holds them: a set
    source = AssertionSource("token", None, tmp_path, remember=held.add, forget=held.discard)
    for n in range(5):
        (tmp_path / "token").write_text(f"jwt-{n}\n")
        assert source.read() == f"jwt-{n}"
        assert source.read() == f"jwt-{n}"  # read again, unrotated: held once
    assert held == {"jwt-3", "jwt-4"}
    assert source.where == f"the workload token in {tmp_path / 'token'}"


async def test_the_token_goes_to_the_configured_issuer_only(tmp_path: Path) -> None:
    """With ``issuer`` set, a server whose metadata leads to another authorization
    server gets no workload token: the flow stops before the token request."""
    async with wif_server() as (fx, platform):
        (tmp_path / "token").write_text(platform.token(fx.issuer))
        cfg = config(
            fx.url, assertionFile=str(tmp_path / "token"), issuer="https://auth.example.com"
        )
        async with (
            open_supervisor(cfg, auth_dir=tmp_path / "auth") as sup,
            capture_events(sup, "mcp.auth.failed") as seen,
        ):
            failed = await seen.wait_for("mcp.auth.failed", timeout=20)
        assert f"the authorization server found is {fx.issuer}" in failed.error
        assert "not the configured issuer https://auth.example.com" in failed.error
        assert fx.provider.token_requests == {}


async def test_a_token_expired_a_while_ago_is_not_sent(tmp_path: Path) -> None:
    """A JWT that expired more than a minute ago (the leeway for the authorization
    server's clock) is not sent: the server's authorization fails saying when it expired
    and that the platform has not renewed it."""
    async with wif_server() as (fx, platform):
        token = tmp_path / "token"
        token.write_text(platform.token(fx.issuer, expires_in=-600))
        async with (
            open_supervisor(
                config(fx.url, assertionFile=str(token)), auth_dir=tmp_path / "auth"
            ) as sup,
            capture_events(sup, "mcp.auth.failed") as seen,
        ):
            failed = await seen.wait_for("mcp.auth.failed", timeout=20)
            await sup.connect_all()
            assert sup.status()["remote"].status == "auth_failed"
        assert f"the workload token in {token} expired at " in failed.error
        assert "the platform has not renewed it (it was not sent)" in failed.error
        assert fx.provider.token_requests == {}
