"""OAuth end to end: the supervisor against real OAuth-protected MCP servers on 127.0.0.1
(the SDK's authorization server and bearer-protected Streamable HTTP endpoint), the
browser played by a redirect handler that follows the redirect (``$BROWSER`` in
test_cli_auth.py)."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import sqlite3
import stat
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
import structlog
import trio
import trio.testing
from mcp.shared.auth import JWT_BEARER_GRANT_TYPE, AuthorizationCodeResult

from supervisor import log, open_supervisor
from supervisor.auth._backends import TABLE
from supervisor.auth._renewal import Renewals
from supervisor.auth._store import AuthStore
from supervisor.dashboard._feed import feed_message
from supervisor.errors import (
    AuthorizationFailed,
    AuthRequired,
    CallMayHaveTakenEffect,
    SupervisorError,
)
from supervisor.monitor import status_table
from supervisor.testing import capture_events
from supervisor.testing.servers import open_oauth_server
from supervisor.testing.servers._oauth import generate_key_pair

SCOPES = ["read", "write", "admin", "offline_access"]


class Browser:
    """Plays the user's browser: GET the authorization URL, follow its redirect to the
    loopback callback (its parameters changed by ``tamper``). Counts its openings."""

    def __init__(self, *, tamper: dict[str, str] | None = None) -> None:
        self.opened: list[str] = []
        self.tamper = tamper or {}
        self.pages: list[tuple[int, str]] = []

    async def __call__(self, url: str) -> None:
        self.opened.append(url)
        async with httpx2.AsyncClient() as http:
            answer = await http.get(url)
            assert answer.status_code in (302, 303, 307), answer.text
            location = httpx2.URL(answer.headers["location"])
            if self.tamper:
                location = location.copy_merge_params(self.tamper)
            page = await http.get(location)
            self.pages.append((page.status_code, page.text))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def entry(url: str, **auth: Any) -> dict[str, Any]:
    """A lazy-false, auto-approved remote server; its callback on a free port (tests
    run in parallel: never the shared default 9876)."""
    auth.setdefault("callbackPort", free_port())
    auth = {k: v for k, v in auth.items() if v is not None}
    return {"type": "http", "url": url, "lazy": False, "autoApprove": True, "auth": auth}


def config(url: str, **auth: Any) -> dict[str, Any]:
    return {"mcpServers": {"remote": entry(url, **auth)}}


def supervise(fx: Any, auth_dir: Path, browser: Any) -> Any:
    """A supervisor of ``fx``'s server, its tokens in ``auth_dir``, logging in at once
    through ``browser``."""
    return open_supervisor(config(fx.url), auth_dir=auth_dir, oauth_redirect_handler=browser)


async def whoami(sup: Any, server: str = "remote") -> dict[str, Any]:
    result = await sup.call(f"{server}_whoami", {})
    return json.loads(result.text)


async def connected(sup: Any, *names: str, timeout: float = 20) -> None:
    """Wait (on events) until every one of ``names`` (default: all) is connected: an
    automatic login ends with a connection."""
    names = names or tuple(sup.servers)
    with trio.fail_after(timeout):
        async with sup.subscribe("*") as events:
            while any(sup.status()[n].status != "connected" for n in names):
                await events.__anext__()


def broker(sup: Any, name: str = "remote") -> Any:
    return sup._auth.broker(name)


def rows(auth_dir: Path, kind: str = "tokens") -> dict[str, dict[str, Any]]:
    """The ``kind`` rows of the auth directory's token store (``tokens.db``), by key."""
    database = auth_dir / "tokens.db"
    if not database.exists():
        return {}
    with contextlib.closing(sqlite3.connect(database)) as connection:
        found = connection.execute(
            f"SELECT key, data FROM {TABLE} WHERE kind = ?", (kind,)
        ).fetchall()
    return {key: json.loads(data) for key, data in found}


def stored(auth_dir: Path) -> dict[str, Any]:
    (row,) = rows(auth_dir).values()
    return row


async def test_first_login_then_stored_tokens_without_a_browser(tmp_path: Path) -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        browser = Browser()
        async with (
            supervise(fx, tmp_path, browser) as sup,
            capture_events(sup, "mcp.auth.*", "mcp.connected") as seen,
        ):
            await seen.wait_for("mcp.connected", timeout=20, server="remote")
            me = await whoami(sup)
            assert me["subject"] == "test-user" and "read" in me["scopes"]
        (completed,) = [e for e in seen.events if e.kind == "mcp.auth.completed"]
        assert completed.issuer == fx.issuer and "read" in completed.scopes
        assert len(browser.opened) == 1
        assert browser.pages[0][0] == 200 and "Logged in" in browser.pages[0][1]
        assert fx.provider.registrations == 1  # dynamic client registration
        query = httpx2.URL(browser.opened[0]).params
        assert query["code_challenge_method"] == "S256" and query["state"]
        assert query["resource"] == fx.url  # RFC 8707
        # A fresh supervisor: the stored tokens, no browser, no new registration.
        again = Browser()
        async with supervise(fx, tmp_path, again) as sup:
            await sup.connect_all()
            assert sup.status()["remote"].status == "connected"
            await whoami(sup)
        assert again.opened == []
        assert (fx.provider.registrations, fx.provider.authorizations) == (1, 1)


async def test_needs_auth_is_a_state_calls_fail_fast_then_login(tmp_path: Path) -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        async with open_supervisor(config(fx.url), auth_dir=tmp_path) as sup:
            await sup.connect_all()
            record = sup.status()["remote"]
            assert record.status == "needs_auth"
            assert "auth login remote" in (record.last_error or "")
            assert record.restarts == 0 and record.retry_attempt == 0  # no restart spent
            with pytest.raises(AuthRequired) as caught:
                await sup.call("remote_whoami", {})
            assert "mcp-supervisor auth login remote" in caught.value.cli_message
            browser = Browser()
            async with capture_events(sup, "mcp.connected") as seen:
                info = await sup.login("remote", browser)
                await seen.wait_for("mcp.connected", timeout=20)
            assert info.issuer == fx.issuer and "read" in info.scopes
            assert (await whoami(sup))["subject"] == "test-user"
            assert sup.status()["remote"].restarts == 0


async def test_a_login_made_elsewhere_is_picked_up(tmp_path: Path) -> None:
    """A server waiting for a login connects once another process (here: another
    supervisor on the same store) has logged in; nothing else is needed."""
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        cfg = config(fx.url)
        async with open_supervisor(cfg, auth_dir=tmp_path) as waiting:
            await waiting.connect_all()
            assert waiting.status()["remote"].status == "needs_auth"
            async with open_supervisor(cfg, auth_dir=tmp_path) as other:
                await other.login("remote", Browser())
            await connected(waiting, timeout=10)  # the token file is looked at every 2 s
            assert (await whoami(waiting))["subject"] == "test-user"


async def test_silent_refresh_on_401_and_ahead_of_expiry(tmp_path: Path) -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        browser = Browser()
        async with (
            supervise(fx, tmp_path, browser) as sup,
            capture_events(sup, "mcp.auth.*", "mcp.connected") as seen,
        ):
            await seen.wait_for("mcp.connected", timeout=20)
            first = stored(tmp_path)["token"]
            # The server's clock: the token expired. The call is answered all the same.
            fx.provider.expire_access_tokens()
            await whoami(sup)
            assert fx.provider.refreshes == 1
            await seen.wait_for("mcp.auth.refreshed", timeout=5)
            second = stored(tmp_path)["token"]
            # The refresh token was rotated: the new one is on disk, not the old one.
            assert second["refresh_token"] != first["refresh_token"]
            assert second["access_token"] != first["access_token"]
            # Ours: the token is about to expire, so it is renewed before it is sent.
            broker(sup).clock = lambda: time.time() + 3590  # 10 s before its expiry
            await whoami(sup)
            assert fx.provider.refreshes == 2
            assert len(browser.opened) == 1  # never a new login
            assert sup.status()["remote"].restarts == 0


async def test_a_server_added_live_to_a_broker_is_named_in_its_events(tmp_path: Path) -> None:
    """A reconfiguration that adds a server of the same resource and account shares the
    running broker: its renewals are then told to that server too."""
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        async with supervise(fx, tmp_path, Browser()) as sup:
            await connected(sup)
            servers = {"remote": entry(fx.url), "second": entry(fx.url)}
            await sup.reconfigure({"mcpServers": servers})
            await connected(sup)
            assert broker(sup, "second") is broker(sup)
            async with capture_events(sup, "mcp.auth.refreshed") as seen:
                fx.provider.expire_access_tokens()
                await whoami(sup)
                await seen.wait_for("mcp.auth.refreshed", server="remote", timeout=10)
                await seen.wait_for("mcp.auth.refreshed", server="second", timeout=10)
            assert fx.provider.refreshes == 1


async def test_renewed_tokens_are_redacted_for_two_generations_only(tmp_path: Path) -> None:
    """A supervisor that runs for months renews its token thousands of times: each new
    token is redacted from the moment it arrives, with the one it replaced, and older
    ones are let go, so the redactor does not grow without bound."""
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        async with supervise(fx, tmp_path, Browser()) as sup:
            await connected(sup)
            tokens = [stored(tmp_path)["token"]]
            for _ in range(3):
                fx.provider.expire_access_tokens()
                await whoami(sup)
                tokens.append(stored(tmp_path)["token"])
            assert fx.provider.refreshes == 3
            secrets = [[t["access_token"], t["refresh_token"]] for t in tokens]
            assert len({s for pair in secrets for s in pair}) == 8  # all rotated
            for pair in secrets[:2]:
                assert not any(s in log.redactor for s in pair)
            for pair in secrets[2:]:
                assert all(s in log.redactor for s in pair)


async def test_rotated_refresh_token_is_used_by_a_fresh_process(tmp_path: Path) -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        async with supervise(fx, tmp_path, Browser()) as sup:
            await connected(sup)
            fx.provider.expire_access_tokens()
            await whoami(sup)  # refreshed: the old refresh token is now void
        fx.provider.expire_access_tokens()
        browser = Browser()
        async with supervise(fx, tmp_path, browser) as sup:
            await sup.connect_all()
            assert sup.status()["remote"].status == "connected"
            await whoami(sup)
        assert fx.provider.refreshes == 2 and browser.opened == []


async def test_a_revoked_refresh_token_leads_to_a_new_login(tmp_path: Path) -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        browser = Browser()
        async with supervise(fx, tmp_path, browser) as sup:
            await connected(sup)
            fx.provider.revoke_all_refresh_tokens()
            fx.provider.expire_access_tokens()
            async with capture_events(sup, "mcp.auth.*", "mcp.connected") as seen:
                # The refresh fails: this call was refused unseen, and says why.
                with pytest.raises(AuthRequired):
                    await whoami(sup)
                await seen.wait_for("mcp.auth.completed", timeout=20)
                await seen.wait_for("mcp.connected", timeout=20)
            assert "mcp.auth.refreshed" not in [e.kind for e in seen.events]  # it failed
            assert (await whoami(sup))["subject"] == "test-user"
            assert len(browser.opened) == 2  # one new login, not a loop
            assert fx.provider.token_requests["refresh_token"] == 1
            record = sup.status()["remote"]
            assert record.status == "connected" and record.restarts == 0


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post"])
async def test_pre_registered_client(tmp_path: Path, method: str) -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        redirect = f"http://127.0.0.1:{free_port()}/callback"
        fx.provider.add_client(
            "pre-registered",
            "s3cret-value",
            token_endpoint_auth_method=method,
            redirect_uris=[redirect],
        )
        browser = Browser()
        async with open_supervisor(
            config(
                fx.url,
                clientId="pre-registered",
                clientSecret="s3cret-value",
                tokenEndpointAuthMethod=method,
                redirectUri=redirect,
                callbackPort=None,
            ),
            auth_dir=tmp_path,
            oauth_redirect_handler=browser,
        ) as sup:
            await connected(sup)
            assert (await whoami(sup))["client_id"] == "pre-registered"
        assert fx.provider.registrations == 0
        assert rows(tmp_path, "clients") == {}  # the config's client is not copied
        # The method is the one configured: the other one is refused by the server.
        other = {"client_secret_basic": "client_secret_post"}.get(method, "client_secret_basic")
        async with (
            open_supervisor(
                config(
                    fx.url,
                    clientId="pre-registered",
                    clientSecret="s3cret-value",
                    tokenEndpointAuthMethod=other,
                    redirectUri=redirect,
                    callbackPort=None,
                ),
                auth_dir=tmp_path / "other",
                oauth_redirect_handler=Browser(),
            ) as sup,
            capture_events(sup, "mcp.auth.failed") as seen,
        ):
            failed = await seen.wait_for("mcp.auth.failed", timeout=20)
            assert "invalid_client" in failed.error


async def test_client_credentials_with_a_secret(tmp_path: Path) -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        fx.provider.add_client("machine", "m-secret-value", grant_types=["client_credentials"])
        async with open_supervisor(
            config(
                fx.url,
                grant="client_credentials",
                clientId="machine",
                clientSecret="m-secret-value",
                issuer=fx.issuer,
            ),
            auth_dir=tmp_path,
        ) as sup:
            await sup.connect_all()
            assert (await whoami(sup))["client_id"] == "machine"
            fx.provider.expire_access_tokens()
            await whoami(sup)  # no refresh token: a new client-credentials grant
        assert fx.provider.token_requests["client_credentials"] == 2
        assert fx.provider.authorizations == 0


async def test_client_credentials_with_a_private_key_jwt(tmp_path: Path) -> None:
    private, public = generate_key_pair()
    key = tmp_path / "key.pem"
    key.write_text(private)
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        fx.provider.add_client(
            "signer",
            token_endpoint_auth_method="private_key_jwt",
            public_key_pem=public,
            grant_types=["client_credentials"],
        )
        async with open_supervisor(
            config(
                fx.url,
                grant="client_credentials",
                clientId="signer",
                privateKeyFile=str(key),
                signingAlgorithm="ES256",
            ),
            auth_dir=tmp_path / "auth",
        ) as sup:
            await sup.connect_all()
            assert (await whoami(sup))["client_id"] == "signer"
        assert fx.provider.token_requests["client_credentials"] == 1


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post"])
async def test_client_credentials_authenticate_as_the_authorization_server_lists(
    tmp_path: Path, method: str
) -> None:
    """Without ``tokenEndpointAuthMethod``, the client authenticates with its secret as
    the authorization server's metadata lists (``token_endpoint_auth_methods_supported``):
    one that takes only ``client_secret_post`` gets the secret in the body."""
    async with open_oauth_server(
        scopes_supported=SCOPES, token_endpoint_auth_methods=[method]
    ) as fx:
        fx.provider.add_client(
            "machine",
            "m-secret-value",
            token_endpoint_auth_method=method,
            grant_types=["client_credentials"],
        )
        cfg = config(
            fx.url, grant="client_credentials", clientId="machine", clientSecret="m-secret-value"
        )
        async with open_supervisor(cfg, auth_dir=tmp_path) as sup:
            await sup.connect_all()
            assert (await whoami(sup))["client_id"] == "machine"
        assert fx.provider.token_requests["client_credentials"] == 1


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post"])
async def test_the_jwt_bearer_grant_authenticates_as_the_authorization_server_lists(
    tmp_path: Path, method: str
) -> None:
    """The identity-assertion grant too: an authorization server that takes only
    ``client_secret_basic`` is not sent the secret in the body (it would answer 401
    ``invalid_client``), and one that takes only ``client_secret_post`` gets it there."""
    async with open_oauth_server(
        scopes_supported=SCOPES, idp=True, token_endpoint_auth_methods=[method]
    ) as fx:
        assert fx.idp is not None
        fx.idp.add_client("cli-app", None, mcp_client_id="enterprise")
        idp = {"tokenEndpoint": fx.idp.token_endpoint, "clientId": "cli-app"}
        await connect_as_alice_through_the_idp(fx, tmp_path, idp, method)
        assert fx.provider.token_requests[JWT_BEARER_GRANT_TYPE] == 1


async def test_a_pre_registered_client_authenticates_as_the_authorization_server_lists(
    tmp_path: Path,
) -> None:
    """The browser login's pre-registered client with a secret as well, at the code
    exchange and at each refresh; an explicit ``tokenEndpointAuthMethod`` still wins."""
    async with open_oauth_server(
        scopes_supported=SCOPES, token_endpoint_auth_methods=["client_secret_post"]
    ) as fx:
        redirect = f"http://127.0.0.1:{free_port()}/callback"
        fx.provider.add_client(
            "pre-registered",
            "s3cret-value",
            token_endpoint_auth_method="client_secret_post",
            redirect_uris=[redirect],
        )
        auth = {
            "clientId": "pre-registered",
            "clientSecret": "s3cret-value",
            "redirectUri": redirect,
            "callbackPort": None,
        }
        async with supervise_config(config(fx.url, **auth), tmp_path / "a") as sup:
            await connected(sup)
            fx.provider.expire_access_tokens()
            assert (await whoami(sup))["client_id"] == "pre-registered"
        assert fx.provider.token_requests["authorization_code"] == 1
        assert fx.provider.refreshes == 1
        explicit = config(fx.url, **auth, tokenEndpointAuthMethod="client_secret_basic")
        async with (
            supervise_config(explicit, tmp_path / "b") as sup,
            capture_events(sup, "mcp.auth.failed") as seen,
        ):
            failed = await seen.wait_for("mcp.auth.failed", timeout=20)
            assert "invalid_client" in failed.error


def supervise_config(cfg: dict[str, Any], auth_dir: Path) -> Any:
    return open_supervisor(cfg, auth_dir=auth_dir, oauth_redirect_handler=Browser())


async def connect_as_alice_through_the_idp(
    fx: Any, tmp_path: Path, idp: dict[str, str], method: str = "client_secret_basic"
) -> None:
    """Register the MCP client ``enterprise`` for the jwt-bearer grant (authenticating by
    ``method``: the default is Basic, the first the fixture's authorization server
    lists), give alice an ID token, and connect with the identity-assertion grant through
    ``idp`` (its ``idTokenFile`` added): the server sees enterprise acting for alice."""
    fx.provider.add_client(
        "enterprise",
        "ent-secret-value",
        grant_types=[JWT_BEARER_GRANT_TYPE],
        token_endpoint_auth_method=method,
    )
    id_token = tmp_path / "id_token"
    id_token.write_text(fx.idp.issue_id_token("alice", audience=idp["clientId"]))
    async with open_supervisor(
        config(
            fx.url,
            grant="identity_assertion",
            clientId="enterprise",
            clientSecret="ent-secret-value",
            idp={**idp, "idTokenFile": str(id_token)},
        ),  # no issuer: discovered from the resource's metadata
        auth_dir=tmp_path / "auth",
    ) as sup:
        await sup.connect_all()
        me = await whoami(sup)
        assert me["client_id"] == "enterprise" and me["subject"] == "alice"


async def test_identity_assertion_grant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with open_oauth_server(scopes_supported=SCOPES, idp=True) as fx:
        assert fx.idp is not None
        fx.idp.add_client("idp-client", "idp-secret-value", mcp_client_id="enterprise")
        monkeypatch.setenv("TEST_IDP_SECRET", "idp-secret-value")
        idp = {
            "tokenEndpoint": fx.idp.token_endpoint,
            "clientId": "idp-client",
            "clientSecretEnv": "TEST_IDP_SECRET",
        }
        await connect_as_alice_through_the_idp(fx, tmp_path, idp)
        assert fx.idp.exchanges == 1
        assert fx.provider.token_requests[JWT_BEARER_GRANT_TYPE] == 1


async def test_identity_assertion_grant_with_a_public_idp_client(tmp_path: Path) -> None:
    """An IdP client without a secret (a public client: RFC 8693 token exchange with its
    ``client_id`` alone) is taken by the config and exchanges the ID token; the IdP saw
    no secret."""
    async with open_oauth_server(scopes_supported=SCOPES, idp=True) as fx:
        assert fx.idp is not None
        fx.idp.add_client("cli-app", None, mcp_client_id="enterprise")  # public
        idp = {"tokenEndpoint": fx.idp.token_endpoint, "clientId": "cli-app"}
        await connect_as_alice_through_the_idp(fx, tmp_path, idp)
        assert fx.idp.exchanges == 1
        (sent,) = fx.idp.exchange_requests
        assert sent["client_id"] == "cli-app" and fx.idp.secrets_seen == 0


async def test_step_up_on_insufficient_scope(tmp_path: Path) -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        browser = Browser()
        async with (
            open_supervisor(
                config(fx.url, scopes=["read"]), auth_dir=tmp_path, oauth_redirect_handler=browser
            ) as sup,
            capture_events(sup, "mcp.auth.*", "mcp.connected") as seen,
        ):
            await seen.wait_for("mcp.connected", timeout=20)
            held = (await whoami(sup))["scopes"]
            assert "read" in held and "admin" not in held
            assert "offline_access" in held  # the server supports it: asked for
            fx.step_up_scopes = {"admin"}
            refused = fx.mcp_statuses[403]
            # SEP-835: the call refused for its scope waits for the new authorization
            # (the login shown through the same redirect handler), then goes once more
            scopes = (await whoami(sup))["scopes"]
            assert {"read", "admin"} <= set(scopes)  # the union: held and challenged
            assert len(browser.opened) == 2
            assert fx.mcp_statuses[403] == refused + 1  # refused once, unseen, then served
            assert sup.status()["remote"].status == "connected"


async def test_a_step_up_without_a_redirect_handler_waits_for_a_login(tmp_path: Path) -> None:
    """With no redirect handler to show a login, a call refused for its scope is not sent
    again: it fails saying so (it did not run), and the server waits in ``needs_auth``
    for a login, which brings the union of the scopes."""
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        async with open_supervisor(config(fx.url, scopes=["read"]), auth_dir=tmp_path) as sup:
            browser = Browser()
            async with capture_events(sup, "mcp.connected") as seen:
                await sup.login("remote", browser)
                await seen.wait_for("mcp.connected", timeout=20)
            fx.step_up_scopes = {"admin"}
            with pytest.raises(SupervisorError) as refused:
                await whoami(sup)
            assert not isinstance(refused.value, CallMayHaveTakenEffect)
            assert len(browser.opened) == 1
            async with capture_events(sup, "mcp.connected") as seen:
                await sup.login("remote", browser)
                await seen.wait_for("mcp.connected", timeout=20)
            assert {"read", "admin"} <= set((await whoami(sup))["scopes"])


async def test_a_2025_03_26_server_with_metadata_at_its_origin(tmp_path: Path) -> None:
    """No protected-resource metadata; the authorization-server metadata at the MCP
    server's origin names an issuer under a path (``/oauth``): that issuer is the one
    expected of it (it was found at the server's own origin), the login completes, and
    the server connects."""
    async with open_oauth_server(
        scopes_supported=SCOPES, protected_resource_metadata=False, as_issuer_path="/oauth"
    ) as fx:
        async with supervise(fx, tmp_path, Browser()) as sup:
            await connected(sup)
            assert (await whoami(sup))["subject"] == "test-user"
            assert sup.status()["remote"].status == "connected"


async def test_a_2025_03_26_server_without_any_metadata(tmp_path: Path) -> None:
    """No metadata at all: the 2025-03-26 fallback endpoints at the origin
    (``/authorize``, ``/token``, ``/register``) — found to speak OAuth by its token
    endpoint — log in (PKCE S256, which nothing advertised), and the server connects.
    (Such a server names no issuer, and its redirect carries no RFC 9207 ``iss``.)"""
    async with open_oauth_server(
        scopes_supported=SCOPES,
        protected_resource_metadata=False,
        as_metadata=False,
        send_iss=False,
    ) as fx:
        async with supervise(fx, tmp_path, Browser()) as sup:
            await connected(sup)
            assert (await whoami(sup))["subject"] == "test-user"


async def test_an_authorization_server_without_s256_is_refused(tmp_path: Path) -> None:
    async with open_oauth_server(scopes_supported=SCOPES, advertise_s256=False) as fx:
        browser = Browser()
        async with (
            supervise(fx, tmp_path, browser) as sup,
            capture_events(sup, "mcp.auth.*") as seen,
        ):
            await seen.wait_for("mcp.auth.failed", timeout=20)
            record = sup.status()["remote"]
            assert record.status == "auth_failed" and "S256" in (record.last_error or "")
            with pytest.raises(AuthorizationFailed):
                await sup.call("remote_whoami", {})
        assert browser.opened == []


@pytest.mark.parametrize("wrong", ["state", "iss"])
async def test_a_wrong_state_or_issuer_is_rejected(tmp_path: Path, wrong: str) -> None:
    async with open_oauth_server(scopes_supported=SCOPES, wrong_iss=wrong == "iss") as fx:
        browser = Browser(tamper={"state": "forged"} if wrong == "state" else None)
        async with (
            supervise(fx, tmp_path, browser) as sup,
            capture_events(sup, "mcp.auth.*") as seen,
        ):
            failed = await seen.wait_for("mcp.auth.failed", timeout=20)
            assert ("state" if wrong == "state" else "iss") in failed.error.lower()
            assert sup.status()["remote"].status == "auth_failed"
        assert fx.provider.token_requests["authorization_code"] == 0  # no code exchanged


async def test_callback_port_busy_takes_the_next_and_redirect_uri_matches(
    tmp_path: Path,
) -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        busy = _busy_before_a_free_port()  # after the fixture took its own port
        port = busy.getsockname()[1]
        try:
            async with open_supervisor(
                config(fx.url, callbackPort=port),
                auth_dir=tmp_path,
                oauth_redirect_handler=Browser(),
            ) as sup:
                await connected(sup)
            (sent,) = fx.provider.redirect_uris
            assert sent == f"http://127.0.0.1:{port + 1}/callback"
        finally:
            busy.close()


def _busy_before_a_free_port() -> socket.socket:
    """A listening socket on a port whose next port is free (the kernel hands out ports
    near each other, so the next one may be another test's: then another pair is tried)."""
    for _ in range(50):
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        probe = socket.socket()
        try:
            probe.bind(("127.0.0.1", busy.getsockname()[1] + 1))
        except OSError:
            busy.close()
            continue
        finally:
            probe.close()
        return busy
    raise AssertionError("no port with a free next port in 50 tries")


async def test_two_concurrent_logins_share_the_one_listener(tmp_path: Path) -> None:
    async with (
        open_oauth_server(scopes_supported=SCOPES) as a,
        open_oauth_server(scopes_supported=SCOPES) as b,
    ):
        port = free_port()
        both_sent = trio.Event()
        opened: list[str] = []
        browser = Browser()

        async def slow_browser(url: str) -> None:
            opened.append(url)  # both logins are pending before either answers
            if len(opened) == 2:
                both_sent.set()
            await both_sent.wait()
            await browser(url)

        cfg = {
            "mcpServers": {
                "one": entry(a.url, callbackPort=port),
                "two": entry(b.url, callbackPort=port),
            }
        }
        async with open_supervisor(
            cfg, auth_dir=tmp_path, oauth_redirect_handler=slow_browser
        ) as sup:
            await connected(sup, timeout=30)
            await whoami(sup, "one")
            await whoami(sup, "two")
        assert (
            a.provider.redirect_uris
            == b.provider.redirect_uris
            == [f"http://127.0.0.1:{port}/callback"]
        )


def patient(url: str) -> dict[str, Any]:
    """A config whose one server connects within ten minutes (``connect_all`` and
    ``tools()`` would wait that long for it)."""
    cfg = config(url)
    cfg["mcpServers"]["remote"]["timeout"] = 600
    return cfg


async def release_once_waited_on(release: trio.Event) -> None:
    """Set ``release`` once every other task waits (the caller's ``tools()`` among them)."""
    await trio.testing.wait_all_tasks_blocked()
    release.set()


@pytest.mark.parametrize("ask", ["tools", "connect_all"])
async def test_tools_waits_for_the_login_it_started(tmp_path: Path, ask: str) -> None:
    """With a redirect handler, the login a server starts itself is waited for by
    ``tools()`` and ``connect_all()`` (they return once every server has connected or
    failed): a login still being shown when they are called ends with the server's tools
    in the catalog, not an empty one."""
    shown, release = trio.Event(), trio.Event()
    browser = Browser()

    async def slow_browser(url: str) -> None:
        shown.set()
        await release.wait()  # the person takes their time
        await browser(url)

    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        async with open_supervisor(
            patient(fx.url), auth_dir=tmp_path, oauth_redirect_handler=slow_browser
        ) as sup:
            with trio.fail_after(20):
                await shown.wait()
            assert sup.status()["remote"].status == "needs_auth"
            async with trio.open_nursery() as nursery:
                nursery.start_soon(release_once_waited_on, release)
                with trio.fail_after(30):
                    if ask == "tools":
                        names = set(await sup.tools())
                    else:
                        await sup.connect_all()
                        names = {f"remote_{tool.name}" for tool in sup.server("remote").tools}
            assert {"remote_whoami", "remote_echo"} <= names
            assert sup.status()["remote"].status == "connected"
            assert len(browser.opened) == 1


async def test_tools_waits_for_a_login_handle_login_shows(tmp_path: Path) -> None:
    """Without a redirect handler of its own, the supervisor's ``tools()`` waits for the
    login ``handle.login`` is showing meanwhile, as for one it started itself."""
    shown, release = trio.Event(), trio.Event()
    browser = Browser()

    async def slow_browser(url: str) -> None:
        shown.set()
        await release.wait()
        await browser(url)

    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        async with open_supervisor(patient(fx.url), auth_dir=tmp_path) as sup:
            await sup.connect_all()  # nobody logs in yet: at once
            assert sup.status()["remote"].status == "needs_auth"
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sup.login, "remote", slow_browser)
                with trio.fail_after(20):
                    await shown.wait()
                nursery.start_soon(release_once_waited_on, release)
                with trio.fail_after(30):
                    names = set(await sup.tools())
            assert {"remote_whoami", "remote_echo"} <= names
            assert len(browser.opened) == 1


async def test_tools_returns_once_the_login_it_waited_for_fails(tmp_path: Path) -> None:
    """A login that fails ends the wait: ``tools()`` returns with the server
    ``auth_failed``, long before its timeout."""
    shown, release = trio.Event(), trio.Event()

    async def closed_window(url: str) -> None:
        shown.set()
        await release.wait()
        raise RuntimeError("the person closed the window")

    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        async with open_supervisor(
            patient(fx.url), auth_dir=tmp_path, oauth_redirect_handler=closed_window
        ) as sup:
            with trio.fail_after(20):
                await shown.wait()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(release_once_waited_on, release)
                with trio.fail_after(30):
                    catalog = await sup.tools()
            assert len(catalog) == 0
            record = sup.status()["remote"]
            assert record.status == "auth_failed"
            assert "redirect handler raised" in (record.last_error or "")


async def test_tools_does_not_wait_for_a_login_nobody_started(tmp_path: Path) -> None:
    """Without a redirect handler nobody is logging in: ``tools()`` returns at once
    (not at the server's ten-minute timeout) with the server in ``needs_auth``."""
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        async with open_supervisor(patient(fx.url), auth_dir=tmp_path) as sup:
            with trio.fail_after(30):
                catalog = await sup.tools()
            assert len(catalog) == 0
            assert sup.status()["remote"].status == "needs_auth"


async def test_twenty_calls_on_an_expired_token_refresh_once(tmp_path: Path) -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        async with supervise(fx, tmp_path, Browser()) as sup:
            await connected(sup)
            fx.provider.expire_access_tokens()  # each call's token is refused: 401
            async with trio.open_nursery() as nursery:
                for _ in range(20):
                    nursery.start_soon(whoami, sup)
            assert fx.provider.refreshes == 1
            # And on our side of the clock: expired before sending, still one refresh.
            broker(sup).clock = lambda: time.time() + 3601
            async with trio.open_nursery() as nursery:
                for _ in range(20):
                    nursery.start_soon(whoami, sup)
            assert fx.provider.refreshes == 2


async def test_modes_and_no_token_in_logs_events_or_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from supervisor.log import configure_logging

    auth_dir = tmp_path / "auth"
    structlog_config = structlog.get_config()  # debug logs to this test's stderr, closed after
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        configure_logging(level="debug", force=True)
        try:
            async with (
                open_supervisor(
                    config(fx.url), auth_dir=auth_dir, oauth_redirect_handler=Browser()
                ) as sup,
                capture_events(sup) as seen,
            ):
                await connected(sup)
                fx.provider.expire_access_tokens()
                await whoami(sup)
                status = json.dumps([msgspec_builtins(r) for r in sup.status().values()])
                status += status_table(sup.status())
                info = repr(sup.auth_status("remote"))
                events = json.dumps([msgspec_builtins(e) for e in seen.events])
                feed = feed_message("hello", sup.status(), list(seen.events))  # the dashboard's
        finally:
            structlog.configure(**structlog_config)
            root.handlers[:] = handlers
            root.setLevel(level)
    assert stat.S_IMODE(auth_dir.stat().st_mode) == 0o700
    assert rows(auth_dir) and rows(auth_dir, "clients")
    for path in auth_dir.glob("tokens.db*"):  # the database and its write-ahead log
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    secrets = [t.token for t in fx.provider.access_tokens.values()] + list(
        fx.provider.refresh_tokens
    )
    assert len(secrets) >= 3
    logs = capsys.readouterr()
    for text in (logs.out + logs.err, status, info, events, feed):
        for secret in secrets:
            assert secret not in text
    assert '"kind": "mcp.auth.refreshed"' in events


def msgspec_builtins(value: object) -> object:
    import msgspec

    return msgspec.to_builtins(value)


async def test_step_up_gives_up_when_the_scope_is_never_granted(tmp_path: Path) -> None:
    """An authorization server that keeps granting less than the server demands: a few
    step-ups, then auth_failed saying so, never a loop."""
    async with open_oauth_server(scopes_supported=[*SCOPES, "superuser"]) as fx:
        fx.provider.add_client("machine", "m-secret-value", grant_types=["client_credentials"])
        issue = fx.provider.issue_tokens

        def stingy(client_id: str, scopes: list[str], **kw: Any) -> Any:
            return issue(client_id, [s for s in scopes if s != "superuser"], **kw)

        fx.provider.issue_tokens = stingy  # type: ignore[method-assign]
        async with (
            open_supervisor(
                config(
                    fx.url,
                    grant="client_credentials",
                    clientId="machine",
                    clientSecret="m-secret-value",
                ),
                auth_dir=tmp_path,
            ) as sup,
            capture_events(sup, "mcp.auth.failed") as seen,
        ):
            await connected(sup)
            fx.step_up_scopes = {"superuser"}
            for _ in range(4):
                with pytest.raises(SupervisorError):
                    await whoami(sup)
                if sup.status()["remote"].status == "auth_failed":
                    break
            failed = await seen.wait_for("mcp.auth.failed", timeout=10)
            assert "403 insufficient_scope" in failed.error
            assert sup.status()["remote"].status == "auth_failed"
        assert fx.provider.token_requests["client_credentials"] <= 4


async def test_refreshing_is_the_state_while_a_connection_waits_for_a_refresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        async with supervise(fx, tmp_path, Browser()) as sup:
            await connected(sup)
            b = broker(sup)
            drive, entered, release = Renewals._drive, trio.Event(), trio.Event()

            async def held_drive(self: Renewals, **kw: Any) -> Any:
                entered.set()
                await release.wait()
                return await drive(self, **kw)

            monkeypatch.setattr(Renewals, "_drive", held_drive)  # the flow waits
            b.clock = lambda: time.time() + 3601  # the stored token has expired
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sup.restart, "remote")  # a new connection needs a token
                with trio.fail_after(10):
                    await entered.wait()
                assert sup.status()["remote"].status == "refreshing"
                release.set()
            await connected(sup)
            assert fx.provider.refreshes == 1


async def test_a_url_based_client_id_when_the_server_accepts_one(tmp_path: Path) -> None:
    client_url = "https://client.example/mcp-supervisor.json"
    async with open_oauth_server(scopes_supported=SCOPES, client_id_metadata_documents=True) as fx:
        async with open_supervisor(
            config(fx.url, clientMetadataUrl=client_url),
            auth_dir=tmp_path,
            oauth_redirect_handler=Browser(),
        ) as sup:
            await connected(sup)
            assert (await whoami(sup))["client_id"] == client_url
        assert fx.provider.registrations == 0
    # Not advertised: dynamic registration instead.
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        async with open_supervisor(
            config(fx.url, clientMetadataUrl=client_url),
            auth_dir=tmp_path / "other",
            oauth_redirect_handler=Browser(),
        ) as sup:
            await connected(sup)
            assert (await whoami(sup))["client_id"] != client_url
        assert fx.provider.registrations == 1


async def test_offline_access_only_when_the_server_supports_it(tmp_path: Path) -> None:
    async with open_oauth_server(scopes_supported=["read", "write"]) as fx:
        browser = Browser()
        async with supervise(fx, tmp_path, browser) as sup:
            await connected(sup)
        scope = httpx2.URL(browser.opened[0]).params["scope"].split()
        assert "read" in scope and "offline_access" not in scope


async def test_two_accounts_on_one_server_and_the_configured_directory(tmp_path: Path) -> None:
    """Two accounts of one server: two brokers, two logins (on two callback ports: the
    second waits for the first), two token files that never overwrite each other, in
    the config's ``supervisor.authDir``."""
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        path = tmp_path / "mcp.json"
        path.write_text(
            json.dumps(
                {
                    "supervisor": {"authDir": "tokens-here"},
                    "mcpServers": {
                        "work": entry(fx.url, account="work"),
                        "home": entry(fx.url, account="home"),
                    },
                }
            )
        )
        async with open_supervisor(path, oauth_redirect_handler=Browser()) as sup:
            await connected(sup)
            assert broker(sup, "work") is not broker(sup, "home")
            work, home = await whoami(sup, "work"), await whoami(sup, "home")
            assert work["subject"] == home["subject"] == "test-user"
        found = list(rows(tmp_path / "tokens-here").values())
        assert len(found) == 2
        assert {row["account"] for row in found} == {"work", "home"}
        assert len({row["token"]["access_token"] for row in found}) == 2


async def test_an_embedders_callback_handler_replaces_the_listener(tmp_path: Path) -> None:
    """A GUI app with its own redirect scheme: its redirect handler shows the URL, its
    callback handler hands back the code; no loopback listener is opened."""
    send, receive = trio.open_memory_channel[Any](1)

    async def show(url: str) -> None:
        async with httpx2.AsyncClient() as http:
            answer = await http.get(url)
        await send.send(httpx2.URL(answer.headers["location"]).params)

    async def answer() -> AuthorizationCodeResult:
        params = await receive.receive()
        return AuthorizationCodeResult(
            code=params["code"], state=params["state"], iss=params["iss"]
        )

    redirect = "http://127.0.0.1:1/never-listened"
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        async with open_supervisor(
            config(fx.url, redirectUri=redirect, callbackPort=None),
            auth_dir=tmp_path,
            oauth_redirect_handler=show,
            oauth_callback_handler=answer,
        ) as sup:
            await connected(sup)
            assert sup._auth.logins.port is None  # never listened
            await whoami(sup)
        assert fx.provider.redirect_uris == [redirect]


async def test_credentials_of_another_issuer_are_not_reused(tmp_path: Path) -> None:
    """A stored registration belongs to the authorization server that issued it: when
    the server's issuer is another one, the client registers again."""
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        async with supervise(fx, tmp_path, Browser()) as sup:
            await connected(sup)
        ((key, client),) = rows(tmp_path, "clients").items()
        assert client["issuer"] == fx.issuer
        client["client"]["issuer"] = client["issuer"] = "https://moved-away.example"
        with contextlib.closing(sqlite3.connect(tmp_path / "tokens.db")) as connection:
            connection.execute(
                f"UPDATE {TABLE} SET data = ? WHERE kind = 'clients' AND key = ?",
                (json.dumps(client).encode(), key),
            )
            connection.execute(f"DELETE FROM {TABLE} WHERE kind = 'tokens'")  # none either
            connection.commit()
        async with supervise(fx, tmp_path, Browser()) as sup:
            await connected(sup)
        assert fx.provider.registrations == 2


async def test_a_missing_key_file_fails_that_server_only(tmp_path: Path) -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        fx.provider.add_client("ok-machine", "ok-secret-value", grant_types=["client_credentials"])
        cfg = {
            "mcpServers": {
                "signed": entry(
                    fx.url,
                    grant="client_credentials",
                    clientId="signer",
                    privateKeyFile=str(tmp_path / "missing.pem"),
                    account="signer",
                ),
                "fine": entry(
                    fx.url,
                    grant="client_credentials",
                    clientId="ok-machine",
                    clientSecret="ok-secret-value",
                ),
            }
        }
        async with open_supervisor(cfg, auth_dir=tmp_path / "auth") as sup:
            await sup.connect_all()
            await connected(sup, "fine")
            record = sup.status()["signed"]
            assert record.status == "auth_failed"
            assert "cannot read privateKeyFile" in (record.last_error or "")
            assert "missing.pem" in (record.last_error or "")


async def test_a_legacy_sse_server_logs_in_too(tmp_path: Path) -> None:
    async with open_oauth_server(scopes_supported=SCOPES, transport="sse") as fx:
        cfg = {"mcpServers": {"remote": {**entry(fx.url), "type": "sse"}}}
        browser = Browser()
        async with open_supervisor(cfg, auth_dir=tmp_path, oauth_redirect_handler=browser) as sup:
            await connected(sup)
            assert (await whoami(sup))["subject"] == "test-user"
            fx.provider.expire_access_tokens()
            await sup.restart("remote")  # a new SSE stream, with a refreshed token
            await connected(sup)
            await whoami(sup)
        assert len(browser.opened) == 1 and fx.provider.refreshes == 1


async def test_a_login_kept_in_token_files_by_an_earlier_version_is_used(tmp_path: Path) -> None:
    """An auth directory as earlier versions left it — the tokens and the client
    registration in files — is taken into the token store at the first start: the
    server connects with that login, no browser."""
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        async with supervise(fx, tmp_path, Browser()) as sup:
            await connected(sup)
        files = AuthStore(tmp_path)
        for kind in ("tokens", "clients"):
            for key, row in rows(tmp_path, kind).items():
                files.write(kind, key, row)
        for path in list(tmp_path.glob("tokens.db*")):  # noqa: ASYNC240 - a test's setup
            path.unlink()
        unused = Browser()
        async with supervise(fx, tmp_path, unused) as sup:
            await connected(sup)
            assert (await whoami(sup))["subject"] == "test-user"
        assert unused.opened == [] and fx.provider.authorizations == 1
        assert not list((tmp_path / "tokens").glob("*.json"))
