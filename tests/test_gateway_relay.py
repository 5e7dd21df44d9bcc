"""Backing servers' sampling, elicitation and roots requests, relayed by the gateway to
its client whose call is waiting — or refused with the proper error when that client
cannot answer them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

from supervisor import open_supervisor
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway._http import HttpGatewayInfo
from supervisor.gateway._relay import Relay
from tests.test_gateway import TOKEN, http_client, text

# The fixture server asks for sampling and roots, which 2026-07-28 deprecates (SEP-2577).
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def asking_app() -> MCPServer:
    """Tools that ask their client mid-call and answer with what they were told (or the
    error they got)."""
    app = MCPServer("asker")

    @app.tool()
    async def ask_model(ctx: Context) -> str:
        message = types.SamplingMessage(
            role="user", content=types.TextContent(type="text", text="a haiku")
        )
        try:
            result = await ctx.session.create_message(
                messages=[message], max_tokens=20, related_request_id=ctx.request_id
            )
        except MCPError as exc:
            return f"refused: {exc.error.message}"
        return f"model said: {result.content.text}"  # type: ignore[union-attr]

    @app.tool()
    async def ask_user(ctx: Context) -> str:
        try:
            result = await ctx.session.elicit_form("Your name?", NAME_SCHEMA, ctx.request_id)
        except MCPError as exc:
            return f"refused: {exc.error.message}"
        return f"user said: {result.action} {result.content}"

    @app.tool()
    async def ask_roots(ctx: Context) -> str:
        try:
            result = await ctx.session.list_roots()
        except MCPError as exc:
            return f"refused: {exc.error.message}"
        return "roots: " + " ".join(str(root.uri) for root in result.roots)

    return app


@asynccontextmanager
async def relaying_gateway() -> AsyncIterator[HttpGatewayInfo]:
    """A gateway over HTTP whose supervisor hands its backing server's requests to the
    relay (the supervisor speaks the session-based protocol to it, where a server asks
    mid-call)."""
    relay = Relay()
    async with (
        open_supervisor(
            {"mcpServers": {}}, apps={"a": asking_app()}, mode="legacy", **relay.client_options()
        ) as sup,
        trio.open_nursery() as nursery,
    ):
        gateway = Gateway(sup, relay=relay)
        await nursery.start(gateway.run)
        await sup.tools()
        yield await nursery.start(partial(serve_http, gateway, "127.0.0.1", 0, token=TOKEN))
        nursery.cancel_scope.cancel()


async def test_the_waiting_client_answers_the_backing_servers_requests() -> None:
    """A session-based client that declared sampling, elicitation and roots gets the
    backing server's requests while its call runs, and its answers reach the server."""
    asked: list[str] = []

    async def sampling(context: object, params: types.CreateMessageRequestParams) -> object:
        asked.append("sampling")
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="old pond"),
            model="test-model",
        )

    async def elicitation(context: object, params: types.ElicitRequestParams) -> object:
        asked.append(f"elicitation {params.message}")  # type: ignore[union-attr]
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def roots(context: object) -> object:
        asked.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/project")])

    async with (
        relaying_gateway() as info,
        http_client(
            info.url,
            mode="legacy",
            sampling_callback=sampling,
            elicitation_callback=elicitation,
            list_roots_callback=roots,
        ) as client,
    ):
        assert text(await client.call_tool("a_ask_model", {})) == "model said: old pond"
        said = text(await client.call_tool("a_ask_user", {}))
        assert said == "user said: accept {'name': 'Ada'}"
        assert text(await client.call_tool("a_ask_roots", {})) == "roots: file:///work/project"
    assert asked == ["sampling", "elicitation Your name?", "roots"]


async def test_a_client_that_cannot_answer_gets_its_server_the_proper_error() -> None:
    """A client without the capabilities — session-based, or 2026-07-28 (which would be
    asked in a round of its held call): the backing server is told "not supported",
    saying why; nothing hangs, nothing is held."""
    for mode in ("legacy", "auto"):
        async with relaying_gateway() as info, http_client(info.url, mode=mode) as client:
            with trio.fail_after(30):
                for tool, what in (("a_ask_model", "Sampling"), ("a_ask_user", "Elicitation")):
                    said = text(await client.call_tool(tool, {}))
                    assert said.startswith(f"refused: {what} not supported: no client"), said
                    assert f"declared {what.lower()}" in said


async def test_a_team_gateway_relays_a_question_only_to_the_caller_it_is_for() -> None:
    """On a team gateway, a backing server's question goes to the caller whose call
    asked it when theirs is the only call waiting on that server; while another caller's
    call waits there too, it goes to neither (it might be the other's), and the server
    is told why — bob is never asked alice's question."""
    from supervisor.config._model import GatewayAuth
    from supervisor.gateway._resource import ResourceGate
    from supervisor.testing.servers import open_oauth_server
    from tests.test_gateway_team import free_port, token_for

    holding, released, done = trio.Event(), trio.Event(), trio.Event()
    app = asking_app()

    @app.tool()
    async def hold() -> str:
        holding.set()  # bob's call is waiting at the gateway: its relay entry is in
        await released.wait()
        return "released"

    @app.tool()
    async def log_it(ctx: Context) -> str:
        await ctx.info("a note for the caller")
        return "logged"

    asked: list[str] = []
    heard: list[str] = []

    def hearing(who: str) -> object:
        async def logged(params: types.LoggingMessageNotificationParams) -> None:
            heard.append(f"{who}: {params.data}")

        return logged

    def answering(who: str) -> object:
        async def elicitation(context: object, params: types.ElicitRequestParams) -> object:
            asked.append(who)
            return types.ElicitResult(action="accept", content={"name": who})

        return elicitation

    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    relay = Relay()
    async with (
        open_oauth_server(jwt_access_tokens=True, resources=[url]) as team,
        open_supervisor(
            {"mcpServers": {}}, apps={"a": app}, mode="legacy", **relay.client_options()
        ) as sup,
        trio.open_nursery() as nursery,
    ):
        gate = ResourceGate.from_config(GatewayAuth(issuer=team.issuer, resource=url))
        gateway = Gateway(sup, relay=relay)
        await nursery.start(gateway.run)
        await sup.tools()
        await nursery.start(partial(serve_http, gateway, "127.0.0.1", port, resource=gate))

        def client_of(who: str) -> Any:
            """``who``'s session-based client, answering and hearing as ``who``."""
            return http_client(
                url,
                mode="legacy",
                token=token_for(team, who, url),
                elicitation_callback=answering(who),
                logging_callback=hearing(who),
            )

        async with client_of("alice") as alice, client_of("bob") as bob:
            with trio.fail_after(30):
                said = text(await alice.call_tool("a_ask_user", {}))
            assert said == "user said: accept {'name': 'alice'}" and asked == ["alice"]
            with trio.fail_after(30):
                assert text(await alice.call_tool("a_log_it", {})) == "logged"
            assert heard == ["alice: a note for the caller"]
            held: list[str] = []

            async def bob_waits() -> None:
                held.append(text(await bob.call_tool("a_hold", {})))
                done.set()

            nursery.start_soon(bob_waits)
            with trio.fail_after(30):
                await holding.wait()
                said = text(await alice.call_tool("a_ask_user", {}))
            assert said.startswith("refused: Elicitation not supported now: calls of several")
            assert asked == ["alice"]  # bob was not asked
            with trio.fail_after(30):
                assert text(await alice.call_tool("a_log_it", {})) == "logged"
            assert heard == ["alice: a note for the caller"]  # that log went to neither
            released.set()
            with trio.fail_after(30):
                await done.wait()
            assert held == ["released"]
        nursery.cancel_scope.cancel()
