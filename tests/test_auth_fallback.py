"""A 2025-03-26 server that publishes no OAuth metadata at all: that version's default
endpoints at its origin (``/authorize``, ``/token``, ``/register``) are used — also when
its ``/token`` answers an empty request with a token, as the MCP conformance suite's
server does — while a server that wants credentials and has no token endpoint keeps
failing at once, saying it offers no OAuth login.

Real servers on 127.0.0.1: the repo's OAuth fixture, and a plain ASGI app refusing
every request, served over HTTP.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor import open_supervisor
from supervisor._serving import lifespan, respond
from supervisor.testing.servers import open_oauth_server, start_http
from tests.test_auth import SCOPES, Browser, config, connected, supervise, whoami


async def test_a_server_without_metadata_whose_token_endpoint_takes_anything(
    tmp_path: Path,
) -> None:
    """No metadata, and ``/token`` answers even an empty request with a token: the login
    runs through the default endpoints all the same — the client registers at
    ``/register``, the browser is sent to ``/authorize``, the code is exchanged at
    ``/token`` — and the server connects."""
    async with open_oauth_server(
        scopes_supported=SCOPES,
        protected_resource_metadata=False,
        as_metadata=False,
        send_iss=False,
        lax_token_endpoint=True,
    ) as fx:
        browser = Browser()
        async with supervise(fx, tmp_path, browser) as sup:
            await connected(sup)
            assert (await whoami(sup))["subject"] == "test-user"
        assert fx.provider.registrations == 1
        (opened,) = browser.opened
        assert opened.startswith(fx.issuer + "/authorize?")
        assert fx.provider.token_requests["authorization_code"] == 1


def refusing(token_status: int, token_answer: bytes) -> Callable[..., Awaitable[None]]:
    """An HTTP server that wants a static credential: 401 ``Bearer`` on its MCP endpoint,
    and ``token_status`` with ``token_answer`` (JSON) at ``/token``; 404 elsewhere."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        more = True
        while more:
            message = await receive()
            more = message["type"] == "http.request" and message.get("more_body", False)
        if scope["path"] == "/mcp":
            challenge = [(b"www-authenticate", b'Bearer error="invalid_token"')]
            await respond(send, 401, b'{"error": "invalid_token"}', b"application/json", challenge)
        elif scope["path"] == "/token":
            await respond(send, token_status, token_answer, b"application/json")
        else:
            await respond(send, 404, b"{}", b"application/json")

    return app


@pytest.mark.parametrize(
    ("token_status", "token_answer"),
    [
        (404, b'{"error": "not found"}'),  # nothing there
        (401, b'{"error": "invalid_token"}'),  # the same refusal as every other path
    ],
)
async def test_a_401_server_with_no_token_endpoint_offers_no_oauth_login(
    tmp_path: Path, token_status: int, token_answer: bytes
) -> None:
    async with trio.open_nursery() as nursery:
        served = await start_http(nursery, refusing(token_status, token_answer))
        async with open_supervisor(
            config(served.url), auth_dir=tmp_path, oauth_redirect_handler=Browser()
        ) as sup:
            with trio.fail_after(20):
                async with sup.subscribe("*") as events:
                    while sup.status()["remote"].status != "failed":
                        await events.__anext__()
            assert "offers no OAuth login" in (sup.status()["remote"].last_error or "")
        nursery.cancel_scope.cancel()
