"""Per-user backend credentials through a team gateway (``"auth": {"perUser": true}``).

The team's authorization server (the OAuth fixture, issuing JWTs) names the callers;
two backing servers (``crm`` and ``wiki``) are OAuth fixtures of their own, whose
``whoami`` tool answers the subject of the token it was called with. The supervisor's
own login to each (the catalog's) is ``gateway-admin``; each caller's calls reach each
server with that caller's own login, made through the gateway's login page the call
pointed them to — a URL-mode elicitation: the ``-32042`` error for a session-based
client, an ``input_required`` round for a 2026-07-28 one, whose SDK opens it and calls
again. Nothing is sent before the login; one user's login is never another's, nor good
for another server; the caller's token to the gateway never reaches a backing server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
import trio
from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError

from supervisor import open_supervisor
from supervisor.auth._users import user_account
from supervisor.config._model import GatewayAuth
from supervisor.errors import AuthRequired
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway._resource import ResourceGate
from supervisor.testing.servers import open_oauth_server
from tests.test_auth import Browser, connected, entry
from tests.test_gateway import http_client
from tests.test_gateway_team import GROUPS, free_port, token_for

CALL_TIMEOUT = 30


async def open_login(url: str) -> httpx2.Response:
    """Play the user's browser: the gateway's login page, the backing server's
    authorization server (which approves at once), back to the gateway's callback."""
    async with httpx2.AsyncClient(timeout=CALL_TIMEOUT) as http:
        start = await http.get(url)
        assert start.status_code == 302, start.text
        authorize = await http.get(start.headers["location"])
        assert authorize.status_code in (302, 303), authorize.text
        return await http.get(authorize.headers["location"])


def subject_of(result: Any) -> str:
    assert not result.is_error, result
    return json.loads(result.content[0].text)["subject"]


def login_link(error: MCPError) -> str:
    assert error.error.code == types.URL_ELICITATION_REQUIRED, error
    (asked,) = UrlElicitationRequiredError.from_error(error.error).elicitations
    assert asked.mode == "url" and asked.elicitation_id
    return asked.url


@asynccontextmanager
async def per_user_gateway(tmp_path: Path) -> AsyncIterator[tuple[Any, Any, Any, Any, str]]:
    """``(team, crm, wiki, sup, url)``: the team's AS, the two backing servers, the
    supervisor (logged in to both as ``gateway-admin``) and its team gateway's URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with (
        open_oauth_server(jwt_access_tokens=True, resources=[url], groups=GROUPS) as team,
        open_oauth_server(subject="gateway-admin") as crm,
        open_oauth_server(subject="gateway-admin") as wiki,
    ):
        gate = ResourceGate.from_config(GatewayAuth(issuer=team.issuer, resource=url))
        config = {
            "mcpServers": {
                "crm": entry(crm.url, perUser=True),
                "wiki": entry(wiki.url, perUser=True),
            }
        }
        async with (
            open_supervisor(
                config, auth_dir=tmp_path / "auth", oauth_redirect_handler=Browser()
            ) as sup,
            trio.open_nursery() as nursery,
        ):
            await connected(sup)
            gateway = Gateway(sup)
            await nursery.start(gateway.run)
            await sup.tools()
            await nursery.start(partial(serve_http, gateway, "127.0.0.1", port, resource=gate))
            yield team, crm, wiki, sup, url
            nursery.cancel_scope.cancel()


async def test_each_caller_reaches_a_per_user_server_with_their_own_login(
    tmp_path: Path,
) -> None:
    async with per_user_gateway(tmp_path) as (team, crm, wiki, sup, url):
        # The supervisor's own calls (no caller) go with its own login.
        assert subject_of((await sup.call("crm_whoami", {})).raw) == "gateway-admin"
        alice_token = token_for(team, "alice", url)
        async with http_client(url, mode="legacy", token=alice_token) as alice:
            # alice has not logged in to crm: her call is answered with the gateway's
            # login page for it (URL elicitation required), and not sent.
            statuses = sum(crm.mcp_statuses.values())
            with trio.fail_after(CALL_TIMEOUT), pytest.raises(MCPError) as raised:
                await alice.call_tool("crm_whoami", {})
            link = login_link(raised.value)
            assert link.startswith(url.removesuffix("/mcp") + "/auth/login?ticket=")
            assert sum(crm.mcp_statuses.values()) - statuses <= 1  # the session's 401 alone
            crm.config.subject = "alice"  # who logs in at crm's AS in that browser
            page = await open_login(link)
            assert page.status_code == 200 and "logged in" in page.text, page.text
            with trio.fail_after(CALL_TIMEOUT):
                assert subject_of(await alice.call_tool("crm_whoami", {})) == "alice"
            # the link was good once
            async with httpx2.AsyncClient() as http:
                again = await http.get(link)
            assert again.status_code == 400 and "used already" in again.text
            # her crm login is not one for wiki
            with trio.fail_after(CALL_TIMEOUT), pytest.raises(MCPError) as raised:
                await alice.call_tool("wiki_whoami", {})
            assert "/auth/login?ticket=" in login_link(raised.value)

        # bob's client speaks 2026-07-28: the login is an input_required round, whose
        # URL its SDK hands to the elicitation callback — the user opens it — and calls
        # again once it is answered.
        opened: list[str] = []

        async def open_it(context: Any, params: Any) -> types.ElicitResult:
            assert params.mode == "url"
            opened.append(params.url)
            crm.config.subject = "bob"
            page = await open_login(params.url)
            assert page.status_code == 200, page.text
            return types.ElicitResult(action="accept")

        bob_token = token_for(team, "bob", url)
        async with http_client(url, token=bob_token, elicitation_callback=open_it) as bob:
            with trio.fail_after(CALL_TIMEOUT):
                assert subject_of(await bob.call_tool("crm_whoami", {})) == "bob"
        assert len(opened) == 1

        # each login stays its user's; neither user's token to the gateway reached crm
        async with http_client(url, mode="legacy", token=alice_token) as alice:
            with trio.fail_after(CALL_TIMEOUT):
                assert subject_of(await alice.call_tool("crm_whoami", {})) == "alice"
        assert subject_of((await sup.call("crm_whoami", {})).raw) == "gateway-admin"
        issued_by_team = {token_for(team, s, url) for s in ("alice", "bob")}
        assert not issued_by_team & set(crm.provider.access_tokens)
        stored = {
            json.loads(p.read_text())["account"] for p in (tmp_path / "auth/tokens").glob("*")
        }
        assert {user_account("alice"), user_account("bob")} <= stored


async def test_a_per_user_call_outside_a_team_gateway_says_how_to_log_in(tmp_path: Path) -> None:
    """A library call made for a caller, with no team gateway to log them in: refused
    before anything is sent, saying where such logins are made."""
    async with (
        open_oauth_server(subject="gateway-admin") as crm,
        open_supervisor(
            {"mcpServers": {"crm": entry(crm.url, perUser=True)}},
            auth_dir=tmp_path,
            oauth_redirect_handler=Browser(),
        ) as sup,
    ):
        await connected(sup)
        with trio.fail_after(CALL_TIMEOUT), pytest.raises(AuthRequired) as raised:
            await sup.call("crm_whoami", {}, caller="alice")
        assert raised.value.user == "alice" and raised.value.login_url is None
        assert "team gateway" in str(raised.value)
