"""What a client sees of a backing server through the gateway is what it sees of the
server directly: its log messages, its completions, its capabilities — over stdio and
Streamable HTTP backing connections, with either protocol era on each side.

The backing server is tests/reference_server.py (every feature compared here); each
test asks it the same things directly and through ``serve_http``'s gateway, and
compares the answers (the gateway's log messages name the server in their logger).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated

from supervisor import open_supervisor
from supervisor.faults import CallHistory
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway._relay import Relay
from supervisor.server import per_server
from supervisor.testing.servers import start_http
from tests.reference_server import (
    CAPABILITIES,
    CONFIRM_STATE,
    PROMPTS_TTL_MS,
    SECRET,
    TOOLS_TTL_MS,
    build,
)
from tests.test_gateway import TOKEN, fixture, http_client, text

# Logging is deprecated by 2026-07-28 (SEP-2577); it is still a feature to pass on.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

REFERENCE = Path(__file__).with_name("reference_server.py")
WAIT = 10.0
AUTO_APPROVED = [
    *("chatter", "announce_later", "echo", "wait", "cancelled", "touch", "ask_briefly"),
    *("confirm", "job", "job_status", "rename_header", "sample", "count", "capabilities"),
    "needs_sampling",
]
NEWS, GARDEN = "note:///news", "note:///garden"

Logged = list[tuple[str, str | None, Any]]


@asynccontextmanager
async def backing(transport: str) -> AsyncIterator[dict[str, object]]:
    """The reference server's config entry: a subprocess over stdio, or served over
    Streamable HTTP in this process (for as long as the block runs)."""
    if transport == "stdio":
        yield {"command": sys.executable, "args": [str(REFERENCE)]}
        return
    async with trio.open_nursery() as nursery:
        served = await start_http(nursery, build().streamable_http_app())
        yield {"type": "http", "url": served.url}
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def direct_client(
    entry: dict[str, object], mode: str, **options: Any
) -> AsyncIterator[Client]:
    """An SDK client straight to the reference server of ``entry``."""
    if "url" in entry:
        async with (
            httpx2.AsyncClient() as http,
            Client(
                streamable_http_client(str(entry["url"]), http_client=http), mode=mode, **options
            ) as client,
        ):
            yield client
        return
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=str(entry["command"]), args=list(entry["args"]))  # type: ignore[call-overload]
    async with Client(params, mode=mode, **options) as client:
        yield client


@asynccontextmanager
async def gateway_url(
    servers: dict[str, object],
    backing_mode: str,
    history: CallHistory | None = None,
    **gateway_options: Any,
) -> AsyncIterator[str]:
    """The URL of a gateway over HTTP in front of ``servers`` (config entries by name),
    the supervisor speaking ``backing_mode`` to them and relaying to the clients, its
    calls recorded in ``history`` if given; ``gateway_options`` go to the ``Gateway``."""
    relay = Relay()
    config = {"mcpServers": servers}
    options = relay.client_options()
    async with (
        open_supervisor(config, mode=backing_mode, history=history, **options) as sup,  # type: ignore[arg-type]
        trio.open_nursery() as nursery,
    ):
        gateway = Gateway(sup, relay=relay, **gateway_options)
        await nursery.start(gateway.run)
        await sup.tools()
        info = await nursery.start(partial(serve_http, gateway, "127.0.0.1", 0, token=TOKEN))
        yield info.url
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def gateway_client(
    entry: dict[str, object],
    backing_mode: str,
    mode: str,
    history: CallHistory | None = None,
    **options: Any,
) -> AsyncIterator[Client]:
    """An SDK client to a gateway over HTTP whose one backing server is ``entry``
    (named ``ref``), the supervisor speaking ``backing_mode`` to it."""
    servers = {"ref": {**entry, "autoApprove": AUTO_APPROVED}}
    async with (
        gateway_url(servers, backing_mode, history) as url,
        http_client(url, mode=mode, **options) as client,
    ):
        yield client


def raw_call(
    name: str,
    arguments: dict[str, object],
    *,
    capabilities: dict[str, object] | None = None,
    headers: dict[str, str] | None = None,
    meta: dict[str, object] | None = None,
    **params: object,
) -> tuple[dict[str, object], dict[str, str]]:
    """A 2026-07-28 ``tools/call`` of ``name`` as a client posts it to the gateway: its
    JSON body (``params`` added to its params, ``meta`` to its ``_meta``) and its headers
    (``headers`` over the usual ones, which name what the body does)."""
    meta = {
        types.PROTOCOL_VERSION_META_KEY: "2026-07-28",
        types.CLIENT_CAPABILITIES_META_KEY: capabilities or {},
        **(meta or {}),
    }
    call = {"name": name, "arguments": arguments, "_meta": meta, **params}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
    usual = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
        "Mcp-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }
    return body, {**usual, **(headers or {})}


async def killed_and_back(sup: Any, name: str) -> None:
    """Kill server ``name``'s process (-9) and wait until a new one is connected."""
    pid = sup.status()[name].pid
    assert pid is not None
    async with sup.subscribe("mcp.connected") as events:
        os.kill(pid, signal.SIGKILL)
        with trio.fail_after(WAIT):
            async for _ in events:
                if sup.status()[name].pid not in (None, pid):
                    return


def collector(into: Logged, arrived: trio.Event | None = None) -> Any:
    async def logged(params: types.LoggingMessageNotificationParams) -> None:
        into.append((params.level, params.logger, params.data))
        if arrived is not None:
            arrived.set()

    return logged


async def chatter(client: Client, mode: str, level: str | None) -> None:
    """Call ``chatter`` as a client of that era asks for ``level``: ``logging/setLevel``
    first on the session-based protocol, the request's own opt-in on 2026-07-28."""
    if level is not None and mode == "legacy":
        await client.set_logging_level(level)  # type: ignore[arg-type]
    assert text(await client.call_tool(f"{client.tool_prefix}chatter", {})) == "chattered"


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("backing_mode", ["legacy", "auto"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_call_s_log_messages_reach_its_client_as_they_do_directly(
    transport: str, backing_mode: str, mode: str
) -> None:
    """``chatter`` logs at debug, info and warning; asking for ``info`` (setLevel on
    the session-based protocol, the request's ``_meta`` on 2026-07-28) the client gets
    the info and warning messages, directly and through the gateway alike — whichever
    era the gateway speaks to the server — the gateway's logger naming the server."""
    direct: Logged = []
    through: Logged = []
    level_option = {} if mode == "legacy" else {"log_level": "info"}
    async with backing(transport) as entry:
        async with direct_client(
            entry, mode, logging_callback=collector(direct), **level_option
        ) as c:
            c.tool_prefix = ""  # type: ignore[attr-defined]
            await chatter(c, mode, "info")
        async with gateway_client(
            entry, backing_mode, mode, logging_callback=collector(through), **level_option
        ) as c:
            c.tool_prefix = "ref_"  # type: ignore[attr-defined]
            await chatter(c, mode, "info")
    assert direct == [
        ("info", "chat", "message 2 at info"),
        ("warning", "chat", "message 3 at warning"),
    ]
    assert through == [(level, f"ref/{logger}", data) for level, logger, data in direct]


async def test_without_a_level_asked_a_session_client_gets_what_the_server_sends() -> None:
    """A session-based client that never sent ``logging/setLevel`` gets every message
    the server sends during its call, as it would directly."""
    through: Logged = []
    async with (
        backing("stdio") as entry,
        gateway_client(entry, "legacy", "legacy", logging_callback=collector(through)) as c,
    ):
        assert text(await c.call_tool("ref_chatter", {})) == "chattered"
    assert [level for level, _, _ in through] == ["debug", "info", "warning"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_unsolicited_log_message_reaches_the_clients_that_asked_for_its_level(
    transport: str,
) -> None:
    """``announce_later`` logs a notice after its call has returned: no call is waiting
    for it, so it goes to each session-based client whose level lets it through —
    directly and through the gateway alike."""
    for_direct: Logged = []
    through: Logged = []
    async with backing(transport) as entry:
        arrived = trio.Event()
        async with direct_client(
            entry, "legacy", logging_callback=collector(for_direct, arrived)
        ) as c:
            await c.set_logging_level("notice")
            assert text(await c.call_tool("announce_later", {})) == "soon"
            with trio.fail_after(WAIT):
                await arrived.wait()
        arrived = trio.Event()
        async with gateway_client(
            entry, "legacy", "legacy", logging_callback=collector(through, arrived)
        ) as c:
            await c.set_logging_level("notice")
            assert text(await c.call_tool("ref_announce_later", {})) == "soon"
            with trio.fail_after(WAIT):
                await arrived.wait()
    assert for_direct == [("notice", "news", "announced")]
    assert through == [("notice", "ref/news", "announced")]


async def test_a_client_that_asked_for_a_higher_level_does_not_get_the_notice() -> None:
    """The gateway filters for each client by the level it asked: the backing server is
    asked for the most verbose level any client wants, here ``notice`` — a client that
    asked for ``error`` does not get the notice another one asked for."""
    quiet: Logged = []
    loud: Logged = []
    arrived = trio.Event()
    async with backing("stdio") as entry:
        servers = {"ref": {**entry, "autoApprove": AUTO_APPROVED}}
        async with (
            gateway_url(servers, "legacy") as url,
            http_client(url, mode="legacy", logging_callback=collector(quiet)) as a,
            http_client(url, mode="legacy", logging_callback=collector(loud, arrived)) as b,
        ):
            await a.set_logging_level("error")
            await b.set_logging_level("notice")
            assert text(await a.call_tool("ref_announce_later", {})) == "soon"
            with trio.fail_after(WAIT):
                await arrived.wait()
            assert text(await a.call_tool("ref_chatter", {})) == "chattered"
    assert loud == [("notice", "ref/news", "announced")]
    assert quiet == []  # nor chatter's debug, info and warning, asked for at notice


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_completions_are_the_server_s_own_through_the_gateway(
    transport: str, mode: str
) -> None:
    """Completing the prompt ``greet``'s ``name`` (by its merged name through the
    gateway) and the template ``note:///{topic}``'s ``topic`` (with a context argument)
    gives what the server gives directly."""
    prompt_direct = types.PromptReference(type="ref/prompt", name="greet")
    template = types.ResourceTemplateReference(type="ref/resource", uri="note:///{topic}")
    answers: dict[str, list[list[str]]] = {"direct": [], "through": []}
    async with backing(transport) as entry:
        async with direct_client(entry, mode) as c:
            assert c.server_capabilities.completions is not None
            for ref, value, context in (
                (prompt_direct, "G", None),
                (template, "g", {"style": "formal"}),
            ):
                got = await c.complete(ref, {"name": "x", "value": value}, context)
                answers["direct"].append(got.completion.values)
        async with gateway_client(entry, mode, mode) as c:
            assert c.server_capabilities.completions is not None
            prompts = [p.name for p in (await c.list_prompts()).prompts]
            assert prompts == ["ref_greet", "ref_confirm_prompt"]
            prompt = types.PromptReference(type="ref/prompt", name="ref_greet")
            for ref, value, context in ((prompt, "G", None), (template, "g", {"style": "formal"})):
                got = await c.complete(ref, {"name": "x", "value": value}, context)
                answers["through"].append(got.completion.values)
    assert answers["direct"] == [
        ["Grace", "Greta"],
        ["formal:garden", "formal:gateway", "formal:grammar"],
    ]
    assert answers["through"] == answers["direct"]


async def test_completing_a_prompt_nobody_offers_is_an_invalid_params_error() -> None:
    async with backing("stdio") as entry, gateway_client(entry, "legacy", "legacy") as c:
        ref = types.PromptReference(type="ref/prompt", name="nobody_s")
        with pytest.raises(Exception) as caught:
            await c.complete(ref, {"name": "x", "value": ""})
    assert getattr(caught.value, "code", None) == types.INVALID_PARAMS
    assert "nobody_s" in str(caught.value)


async def test_the_gateway_declares_logging_and_completions_only_when_a_server_does() -> None:
    """The reference server declares logging and completions, so does a gateway in front
    of it; one in front of the echo fixture (which declares neither) declares neither."""
    async with backing("stdio") as entry, gateway_client(entry, "legacy", "legacy") as c:
        assert c.server_capabilities.logging is not None
        assert c.server_capabilities.completions is not None
    async with gateway_client(fixture("echo"), "legacy", "legacy") as c:
        assert c.server_capabilities.logging is None
        assert c.server_capabilities.completions is None


async def test_a_level_set_is_asked_again_of_a_restarted_server_and_logs_name_it() -> None:
    """``sup.set_log_level`` reaches the server now and each incarnation after: a server
    killed and restarted still sends only warnings; ``per_server`` tells the logging
    callback which server each message is from."""
    logged: list[tuple[str, str, Any]] = []

    def logs_of(server: str) -> Any:
        async def log(params: types.LoggingMessageNotificationParams) -> None:
            logged.append((server, params.level, params.data))

        return log

    config = {"mcpServers": {"ref": {"command": sys.executable, "args": [str(REFERENCE)]}}}
    async with open_supervisor(config, mode="legacy", logging_callback=per_server(logs_of)) as sup:
        await sup.tools()
        await sup.set_log_level("warning")
        await sup.call("ref_chatter", approve=_yes)
        await killed_and_back(sup, "ref")
        await sup.call("ref_chatter", approve=_yes)
    assert logged == [("ref", "warning", "message 3 at warning")] * 2


async def _yes(request: object) -> bool:
    return True


async def test_a_server_that_completes_nothing_answers_an_empty_list() -> None:
    """The rich fixture has prompts but declares no completions: completing its prompt
    through a gateway that also serves the reference server gives no values, not an
    error."""
    ref = {"command": sys.executable, "args": [str(REFERENCE)]}
    servers = {"ref": ref, "notes": fixture("rich")}
    async with gateway_url(servers, "legacy") as url, http_client(url, mode="legacy") as c:
        assert c.server_capabilities.completions is not None
        ref_prompt = types.PromptReference(type="ref/prompt", name="notes_summarize")
        got = await c.complete(ref_prompt, {"name": "title", "value": "A"})
        assert got.completion.values == []


async def cancel_a_wait(client: Client, tool: str) -> None:
    """Call ``tool`` (the reference server's ``wait``) and give up on it once it has
    reported that it runs: the SDK client's abandoning of a request is its cancelling
    (``notifications/cancelled``; on 2026-07-28 over HTTP, the response stream closed)."""
    running = trio.Event()

    async def progressed(progress: float, total: float | None, message: str | None) -> None:
        running.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(client.call_tool, tool, {}, progress_callback=progressed))
        with trio.fail_after(WAIT):
            await running.wait()
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("backing_mode", ["legacy", "auto"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_call_its_client_gives_up_on_is_cancelled_at_the_server(
    transport: str, backing_mode: str, mode: str
) -> None:
    """A client that cancels a running call has it cancelled at the backing server —
    directly and through the gateway alike, whichever era on either side — and the
    gateway's history records it as indefinite (it may have taken effect), never as
    not executed."""
    history = CallHistory()
    async with backing(transport) as entry, direct_client(entry, mode) as c:
        await cancel_a_wait(c, "wait")
        assert text(await c.call_tool("cancelled", {})) == "cancelled"
    async with (  # a server of its own: the first one knows of a cancelled wait
        backing(transport) as entry,
        gateway_client(entry, backing_mode, mode, history=history) as c,
    ):
        await cancel_a_wait(c, "ref_wait")
        assert text(await c.call_tool("ref_cancelled", {})) == "cancelled"
    waits = [record for record in history.calls if record.tool == "ref_wait"]
    assert [record.outcome for record in waits] == ["info"]


class Updates:
    """A session-based client's ``notifications/resources/updated``, as its message
    handler gets them."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.arrived = trio.Event()

    async def handler(self, message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))
            self.arrived.set()


async def subscribed_updates(client: Client, mode: str, touch: str, updates: Updates) -> list[str]:
    """Subscribe to news, have news and then garden touched; then to garden alone, have
    news and then garden touched: the updates the client hears, in order — with
    ``resources/subscribe`` on the session-based protocol, a listen stream on 2026-07-28.
    Subscribed to one URI at a time, it hears only that one."""
    heard: list[str] = []
    for uri, other in ((NEWS, GARDEN), (GARDEN, NEWS)):
        if mode == "legacy":
            updates.arrived = trio.Event()
            await client.subscribe_resource(uri)
            await client.call_tool(touch, {"uri": other})
            await client.call_tool(touch, {"uri": uri})
            with trio.fail_after(WAIT):
                await updates.arrived.wait()
            await client.unsubscribe_resource(uri)
            continue
        async with client.listen(resource_subscriptions=[uri]) as subscription:
            await client.call_tool(touch, {"uri": other})
            await client.call_tool(touch, {"uri": uri})
            with trio.fail_after(WAIT):
                async for event in subscription:
                    assert isinstance(event, ResourceUpdated)
                    heard.append(event.uri)
                    break
    return updates.uris if mode == "legacy" else heard


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("backing_mode", ["legacy", "auto"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_subscribed_resource_s_updates_reach_its_subscriber_only(
    transport: str, backing_mode: str, mode: str
) -> None:
    """Subscribing to a resource (``resources/subscribe``, or a listen stream on
    2026-07-28) brings its updates and not another's — directly and through the gateway
    alike, whichever era on either side; unsubscribing stops them. The gateway declares
    subscriptions as its server does."""
    direct, through = Updates(), Updates()
    async with backing(transport) as entry:
        async with direct_client(entry, mode, message_handler=direct.handler) as c:
            assert c.server_capabilities.resources.subscribe  # type: ignore[union-attr]
            heard_directly = await subscribed_updates(c, mode, "touch", direct)
        async with gateway_client(entry, backing_mode, mode, message_handler=through.handler) as c:
            assert c.server_capabilities.resources.subscribe  # type: ignore[union-attr]
            heard_through = await subscribed_updates(c, mode, "ref_touch", through)
    assert heard_directly == [NEWS, GARDEN]
    assert heard_through == heard_directly


async def test_an_update_goes_to_the_subscribed_client_alone() -> None:
    """Of two clients of one gateway, the one subscribed hears the update; the other,
    subscribed to nothing, does not (checked after the first heard it and the second
    made a round trip of its own)."""
    subscribed, other = Updates(), Updates()
    async with backing("stdio") as entry:
        servers = {"ref": {**entry, "autoApprove": AUTO_APPROVED}}
        async with (
            gateway_url(servers, "legacy") as url,
            http_client(url, mode="legacy", message_handler=subscribed.handler) as a,
            http_client(url, mode="legacy", message_handler=other.handler) as b,
        ):
            await a.subscribe_resource(NEWS)
            await b.call_tool("ref_touch", {"uri": NEWS})
            with trio.fail_after(WAIT):
                await subscribed.arrived.wait()
            await b.call_tool("ref_touch", {"uri": GARDEN})
    assert subscribed.uris == [NEWS]
    assert other.uris == []


async def test_an_unknown_resource_cannot_be_subscribed_to() -> None:
    """A URI no backing server lists nor has a template for is the protocol's
    resource-not-found error (-32002), as for a read."""
    from mcp.shared.exceptions import MCPError

    async with backing("stdio") as entry, gateway_client(entry, "legacy", "legacy") as c:
        with pytest.raises(MCPError) as caught:
            await c.subscribe_resource("elsewhere:///x")
    assert caught.value.error.code == -32002


@pytest.mark.parametrize("backing_mode", ["legacy", "auto"])
async def test_a_subscription_outlives_a_restart_of_its_server(backing_mode: str) -> None:
    """``sup.subscribe_resource`` is asked again of each new connection before it counts
    as connected: after a kill -9 and the restart, an update of the subscribed resource
    is still published as ``mcp.resource.updated``, naming the server."""
    config = {"mcpServers": {"ref": {"command": sys.executable, "args": [str(REFERENCE)]}}}
    async with open_supervisor(config, mode=backing_mode) as sup:
        await sup.tools()
        assert await sup.subscribe_resource(NEWS) == "ref"
        pid = sup.status()["ref"].pid
        assert pid is not None
        async with sup.subscribe("mcp.connected", "mcp.resource.updated") as events:
            os.kill(pid, signal.SIGKILL)
            with trio.fail_after(WAIT):
                async for _ in events:
                    if sup.status()["ref"].pid not in (None, pid):
                        break
            await sup.call("ref_touch", {"uri": NEWS}, approve=_yes)
            with trio.fail_after(WAIT):
                async for event in events:
                    if event.kind == "mcp.resource.updated":
                        break
    assert (event.server, event.uri) == ("ref", NEWS)  # type: ignore[attr-defined]


def recording_headers(app: Any, seen: list[tuple[str | None, str | None]]) -> Any:
    """``app`` (ASGI), noting the ``Mcp-Method`` and ``Mcp-Name`` headers of each POST."""

    async def recorded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            seen.append((headers.get("mcp-method"), headers.get("mcp-name")))
        await app(scope, receive, send)

    return recorded


async def test_a_2026_call_reaches_its_server_under_the_server_s_own_name_headers() -> None:
    """On 2026-07-28 the request's ``Mcp-Method`` and ``Mcp-Name`` headers name what its
    body does: the gateway's request to the backing server names the tool as that server
    knows it (``chatter``), not by the gateway's merged name (``ref_chatter``)."""
    seen: list[tuple[str | None, str | None]] = []
    async with trio.open_nursery() as nursery:
        served = await start_http(nursery, recording_headers(build().streamable_http_app(), seen))
        entry = {"type": "http", "url": served.url}
        async with gateway_client(entry, "auto", "auto") as c:
            assert text(await c.call_tool("ref_chatter", {})) == "chattered"
        nursery.cancel_scope.cancel()
    assert ("tools/call", "chatter") in seen
    assert not [name for _, name in seen if name is not None and name.startswith("ref_")]


@pytest.mark.parametrize(
    ("method", "name", "why"),
    [("tools/list", "ref_chatter", "Mcp-Method"), ("tools/call", "ref_other", "Mcp-Name")],
)
async def test_headers_that_disagree_with_the_body_are_refused(
    method: str, name: str, why: str
) -> None:
    """A 2026-07-28 request whose ``Mcp-Method`` or ``Mcp-Name`` header disagrees with
    its body is refused before anything runs: ``400`` with the protocol's header-mismatch
    error (``-32020``) naming the header."""
    body, headers = raw_call("ref_chatter", {}, headers={"Mcp-Method": method, "Mcp-Name": name})
    history = CallHistory()
    async with backing("stdio") as entry:
        servers = {"ref": {**entry, "autoApprove": AUTO_APPROVED}}
        async with gateway_url(servers, "legacy", history) as url, httpx2.AsyncClient() as http:
            answer = await http.post(url, json=body, headers=headers)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == -32020 and why.lower() in error["message"].lower()
    assert history.calls == []


async def test_a_param_header_that_disagrees_with_the_argument_is_refused() -> None:
    """``touch``'s ``uri`` is declared to travel in the ``Mcp-Param-Uri`` header as well:
    a 2026-07-28 call whose header says another URI than its body is refused (``400``,
    ``-32020``) before it runs — the gateway gives the SDK each served tool's schema by
    its merged name — while one that agrees runs."""

    def request(uri_header: str) -> tuple[dict[str, object], dict[str, str]]:
        return raw_call("ref_touch", {"uri": NEWS}, headers={"Mcp-Param-Uri": uri_header})

    async with backing("stdio") as entry:
        servers = {"ref": {**entry, "autoApprove": AUTO_APPROVED}}
        async with gateway_url(servers, "legacy") as url, httpx2.AsyncClient() as http:
            body, headers = request(GARDEN)
            refused = await http.post(url, json=body, headers=headers)
            body, headers = request(NEWS)
            agreed = await http.post(url, json=body, headers=headers)
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == -32020
    assert agreed.status_code == 200 and "touched" in agreed.text


async def test_a_call_refused_for_headers_of_a_stale_schema_is_sent_again_once() -> None:
    """A 2026-07-28 backing server that changes which header carries an argument
    without announcing it refuses the next call unseen (``-32020``): the gateway lists
    its tools again and sends the call once more, with the header its schema now names
    — what the SDK's own client does — and the call runs once."""
    async with backing("http") as entry, gateway_client(entry, "auto", "auto") as c:
        assert text(await c.call_tool("ref_rename_header", {})) == "renamed"
        assert text(await c.call_tool("ref_touch", {"uri": NEWS})) == "touched"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_merged_lists_may_be_cached_as_long_as_their_shortest_part(transport: str) -> None:
    """A 2026-07-28 client sees the reference server's ``ttlMs`` and ``cacheScope``
    directly and through a gateway in front of it alone; in front of it and a server
    that says nothing of caching, the merged lists are stale at once and private; a
    session-based backing connection says nothing either."""
    async with backing(transport) as entry:
        async with direct_client(entry, "auto") as c:
            tools, prompts = await c.list_tools(), await c.list_prompts()
        direct = (tools.ttl_ms, tools.cache_scope, prompts.ttl_ms, prompts.cache_scope)
        async with gateway_client(entry, "auto", "auto") as c:
            tools, prompts = await c.list_tools(), await c.list_prompts()
        alone = (tools.ttl_ms, tools.cache_scope, prompts.ttl_ms, prompts.cache_scope)
        servers = {"ref": entry, "notes": fixture("rich")}
        async with gateway_url(servers, "auto") as url, http_client(url, mode="auto") as c:
            tools, prompts = await c.list_tools(), await c.list_prompts()
        mixed = (tools.ttl_ms, tools.cache_scope, prompts.ttl_ms, prompts.cache_scope)
        async with gateway_client(entry, "legacy", "auto") as c:
            tools = await c.list_tools()
        session_based = (tools.ttl_ms, tools.cache_scope)
    assert direct == (TOOLS_TTL_MS, "public", PROMPTS_TTL_MS, "private")
    assert alone == direct
    assert mixed == (0, "private", 0, "private")
    assert session_based == (0, "private")


async def test_a_subscription_never_acknowledged_holds_nothing_up() -> None:
    """A 2026-07-28 server that takes resource subscriptions but never acknowledges the
    stream: subscribing returns after the request timeout (1 s here), calls are served
    meanwhile, and after a kill -9 the new connection comes up all the same — it does
    not wait for its subscriptions longer than that."""
    entry = {"command": sys.executable, "args": [str(REFERENCE), "mute-subscriptions"]}
    config = {"mcpServers": {"ref": {**entry, "timeout": 1, "autoApprove": AUTO_APPROVED}}}
    async with open_supervisor(config, mode="auto") as sup:
        await sup.tools()
        with trio.fail_after(WAIT):
            assert await sup.subscribe_resource(NEWS) == "ref"
        assert (await sup.call("ref_chatter")).text == "chattered"
        pid = sup.status()["ref"].pid
        assert pid is not None
        async with sup.subscribe("mcp.connected") as events:
            os.kill(pid, signal.SIGKILL)
            with trio.fail_after(WAIT):
                async for _ in events:
                    break
        assert sup.status()["ref"].pid not in (None, pid)
        assert (await sup.call("ref_chatter")).text == "chattered"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_question_its_server_gives_up_on_is_cancelled_at_the_client(
    transport: str,
) -> None:
    """A backing server that asks its client something (elicitation) and gives up on the
    question cancels it: the client's handler is cancelled — directly and through the
    gateway alike (the gateway's relayed question is cancelled at its own client) — and
    the tool answers that it gave up."""

    def cancellable(asked: trio.Event, cancelled: trio.Event) -> Any:
        async def elicit(context: object, params: types.ElicitRequestParams) -> Any:
            asked.set()
            try:
                await trio.sleep_forever()
            finally:
                cancelled.set()

        return elicit

    results = []
    async with backing(transport) as entry:
        for through in (False, True):
            asked, cancelled = trio.Event(), trio.Event()
            handler = cancellable(asked, cancelled)
            opened = (
                gateway_client(entry, "legacy", "legacy", elicitation_callback=handler)
                if through
                else direct_client(entry, "legacy", elicitation_callback=handler)
            )
            async with opened as c:
                name = "ref_ask_briefly" if through else "ask_briefly"
                results.append(text(await c.call_tool(name, {})))
                with trio.fail_after(WAIT):
                    await cancelled.wait()
            assert asked.is_set()
    assert results == ["gave up", "gave up"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("backing_mode", ["legacy", "auto"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_input_a_server_asks_for_is_answered_by_the_client_as_directly(
    transport: str, backing_mode: str, mode: str
) -> None:
    """``confirm`` asks its client to confirm — an elicitation request on the
    session-based protocol, an ``input_required`` round on 2026-07-28 — and the client's
    elicitation handler answers it, directly and through the gateway alike, whichever
    era on either side: a 2026-07-28 client answers the round itself (the server's
    ``requestState`` back to it untouched), a session-based one is asked by the
    gateway; a session-based server's request to a 2026-07-28 client (which takes no
    requests) is asked of it in a round while the call is held."""
    asked: list[str] = []

    async def elicit(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept")

    answers = []
    async with backing(transport) as entry:
        async with direct_client(entry, backing_mode, elicitation_callback=elicit) as c:
            direct = text(await c.call_tool("confirm", {}))
        async with gateway_client(entry, backing_mode, mode, elicitation_callback=elicit) as c:
            answers.append(text(await c.call_tool("ref_confirm", {})))
    expected = "accept" if backing_mode == "legacy" else f"accept after {CONFIRM_STATE}"
    assert direct == expected
    assert answers == [expected]
    assert asked == ["Confirm?", "Confirm?"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("backing_mode", ["legacy", "auto"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_server_s_sampling_is_answered_by_the_client_s_model_as_directly(
    transport: str, backing_mode: str, mode: str
) -> None:
    """``sample`` asks its client's model for a haiku — ``sampling/createMessage`` on
    the session-based protocol, an ``input_required`` round on 2026-07-28 — and answers
    what it wrote: directly and through the gateway alike, whichever era on either
    side (a session-based server's request to a 2026-07-28 client asked in a round)."""
    asked: list[str] = []

    async def sample(
        context: object, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        asked.append(str(getattr(params.messages[0].content, "text", "")))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="old pond, a frog"),
            model="scripted",
        )

    async with backing(transport) as entry:
        async with direct_client(entry, backing_mode, sampling_callback=sample) as c:
            direct = text(await c.call_tool("sample", {}))
        async with gateway_client(entry, backing_mode, mode, sampling_callback=sample) as c:
            through = text(await c.call_tool("ref_sample", {}))
    assert direct == "old pond, a frog"
    assert through == direct
    assert asked == ["A haiku, please."] * 2


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("backing_mode", ["legacy", "auto"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_call_s_progress_reaches_its_client_as_it_does_directly(
    transport: str, backing_mode: str, mode: str
) -> None:
    """``count`` reports progress 1, 2 and 3 of 3: a client that asked for progress gets
    the same three notifications, in order, directly and through the gateway."""

    async def counted(client: Client, tool: str) -> list[tuple[float, float | None, str | None]]:
        seen: list[tuple[float, float | None, str | None]] = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            seen.append((done, total, message))

        assert text(await client.call_tool(tool, {}, progress_callback=progress)) == "counted"
        return seen

    async with backing(transport) as entry:
        async with direct_client(entry, backing_mode) as c:
            direct = await counted(c, "count")
        async with gateway_client(entry, backing_mode, mode) as c:
            through = await counted(c, "ref_count")
    assert direct == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert through == direct


async def test_input_a_client_did_not_declare_is_not_asked_of_it() -> None:
    """A 2026-07-28 client without elicitation is not handed the server's elicitation
    round: the call is a tool error naming what it lacks."""
    async with backing("stdio") as entry, gateway_client(entry, "auto", "auto") as c:
        result = await c.call_tool("ref_confirm", {})
    assert result.is_error
    assert "did not declare (elicitation)" in text(result)


async def asked_through(client: Client, prefix: str) -> tuple[str, str]:
    """What ``confirm_prompt`` and :data:`SECRET` answer ``client`` (the prompt under
    ``prefix``): the text of the prompt's message, and of the resource."""
    prompt = await client.get_prompt(f"{prefix}confirm_prompt")
    read = await client.read_resource(SECRET)
    [message] = prompt.messages
    [contents] = read.contents
    return getattr(message.content, "text", ""), getattr(contents, "text", "")


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("backing_mode", ["legacy", "auto"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_input_a_prompt_or_a_read_asks_for_is_answered_by_the_client_as_directly(
    transport: str, backing_mode: str, mode: str
) -> None:
    """``confirm_prompt`` and the resource ``note:///secret`` ask their client to
    confirm, as ``confirm`` does: directly and through the gateway alike, whichever era
    on either side, the client's elicitation handler answers — a 2026-07-28 client the
    server's round itself (``prompts/get`` and ``resources/read`` are passed on as
    ``tools/call`` is), a session-based one asked by the gateway, and a session-based
    server's request to a 2026-07-28 client asked of it in a round while the request is
    held."""
    asked: list[str] = []

    async def elicit(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept")

    async with backing(transport) as entry:
        async with direct_client(entry, backing_mode, elicitation_callback=elicit) as c:
            direct = await asked_through(c, "")
        async with gateway_client(entry, backing_mode, mode, elicitation_callback=elicit) as c:
            through = await asked_through(c, "ref_")
    expected = "accept" if backing_mode == "legacy" else f"accept after {CONFIRM_STATE}"
    assert direct == (expected, expected)
    assert through == direct
    assert asked == ["Confirm?"] * 4


async def test_a_prompt_s_round_reaches_a_2026_client_sealed_and_bound_to_it() -> None:
    """The round of ``confirm_prompt`` a 2026-07-28 client gets through the gateway has
    the server's input request as it is and the gateway's own ``requestState`` (sealed:
    not the server's ``round-1``); answered with it, the prompt is the server's; the
    same state on a read of the secret (another request) is refused, as is one
    tampered with."""
    confirm = {"confirm": types.ElicitResult(action="accept")}

    async def unasked(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise AssertionError("the rounds are this test's own")

    async with (
        backing("stdio") as entry,
        gateway_client(entry, "auto", "auto", elicitation_callback=unasked) as c,
    ):
        first = await c.session.get_prompt("ref_confirm_prompt", allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        assert first.request_state is not None and CONFIRM_STATE not in first.request_state
        [(key, request)] = (first.input_requests or {}).items()
        assert key == "confirm" and request.method == "elicitation/create"
        got = await c.session.get_prompt(
            "ref_confirm_prompt",
            input_responses=confirm,  # type: ignore[arg-type]
            request_state=first.request_state,
            allow_input_required=True,
        )
        assert isinstance(got, types.GetPromptResult)
        assert getattr(got.messages[0].content, "text", "") == f"accept after {CONFIRM_STATE}"
        for uri, state in ((SECRET, first.request_state), (SECRET, "v1.forged")):
            with pytest.raises(MCPError) as caught:
                await c.session.read_resource(
                    uri,
                    input_responses=confirm,  # type: ignore[arg-type]
                    request_state=state,
                    allow_input_required=True,
                )
            assert caught.value.code == types.INVALID_PARAMS
            assert "requestState" in str(caught.value)


async def test_input_a_client_did_not_declare_is_not_asked_of_it_for_a_prompt_or_read() -> None:
    """A 2026-07-28 client without elicitation is not handed the round of a prompt or a
    resource read either: the protocol's missing-capability error (-32021) names what
    it lacks."""
    async with backing("stdio") as entry, gateway_client(entry, "auto", "auto") as c:
        for request in (
            partial(c.get_prompt, "ref_confirm_prompt"),
            partial(c.read_resource, SECRET),
        ):
            with pytest.raises(MCPError) as caught:
                await request()
            assert caught.value.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
            assert "did not declare (elicitation)" in str(caught.value)
            data = caught.value.error.data or {}
            assert data["requiredCapabilities"] == {"elicitation": {}}


async def test_input_rounds_pass_through_tool_search_s_call_too() -> None:
    """With ``--tool-search`` a 2026-07-28 client calls ``ref_confirm`` through the
    meta-tool ``call``: the server's round reaches it, and its answer the server, as
    when the tool is called by name."""

    async def accept(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept")

    async with backing("stdio") as entry:
        servers = {"ref": {**entry, "autoApprove": AUTO_APPROVED}}
        async with (
            gateway_url(servers, "auto", tool_search=True) as url,
            http_client(url, mode="auto", elicitation_callback=accept) as c,
        ):
            result = await c.call_tool("call", {"name": "ref_confirm", "arguments": {}})
    assert text(result) == f"accept after {CONFIRM_STATE}"


async def _no_model(context: object, params: types.CreateMessageRequestParams) -> Any:
    return types.ErrorData(code=types.INVALID_REQUEST, message="no model here")


async def _no_form(context: object, params: types.ElicitRequestParams) -> Any:
    return types.ElicitResult(action="decline")


async def _no_roots(context: object) -> Any:
    return types.ListRootsResult(roots=[])


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize(
    "declared",
    [
        {},
        {"elicitation_callback": _no_form},
        {"sampling_callback": _no_model, "list_roots_callback": _no_roots},
        {"sampling_callback": _no_model, "elicitation_callback": _no_form},
    ],
    ids=["nothing", "elicitation", "sampling+roots", "sampling+elicitation"],
)
async def test_a_2026_server_is_told_the_caller_s_capabilities_as_directly(
    transport: str, mode: str, declared: dict[str, Any]
) -> None:
    """Under 2026-07-28 each request declares its client's capabilities: a call through
    the gateway declares its caller's (of those the gateway can relay), not the
    gateway's own — the server sees what it would see of that client directly, so it
    asks only for what the caller can give; and the tasks extension, which the gateway
    follows itself for a caller that does not. The caller's era does not matter."""
    async with backing(transport) as entry:
        async with direct_client(entry, "auto", **declared) as c:
            direct = json.loads(text(await c.call_tool("capabilities", {})))
        async with gateway_client(entry, "auto", mode, **declared) as c:
            through = json.loads(text(await c.call_tool("ref_capabilities", {})))
    assert set(through.pop("extensions")) == {"io.modelcontextprotocol/tasks"}
    assert set(through) == {
        {"sampling_callback": "sampling", "elicitation_callback": "elicitation"}.get(
            option, "roots"
        )
        for option in declared
    }
    assert through == direct


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_read_declares_the_caller_s_capabilities_too(mode: str) -> None:
    """A resource read (as a prompt got) through the gateway declares its caller's
    capabilities to a 2026-07-28 server, as a call does."""
    declared = {"elicitation_callback": _no_form}
    async with backing("stdio") as entry:
        async with direct_client(entry, "auto", **declared) as c:
            direct = json.loads((await c.read_resource(CAPABILITIES)).contents[0].text)
        async with gateway_client(entry, "auto", mode, **declared) as c:
            read = await c.read_resource(CAPABILITIES)
            through = json.loads(read.contents[0].text)  # type: ignore[union-attr]
    assert set(through.pop("extensions")) == {"io.modelcontextprotocol/tasks"}
    assert through == direct == {"elicitation": direct["elicitation"]}


async def test_a_session_based_server_is_told_the_gateway_s_own_capabilities() -> None:
    """The session-based protocol declares capabilities once, at the handshake: the
    gateway's own (all it can relay), whoever calls; a caller that cannot answer what
    the server then asks gets the error its relay says (see the tests above)."""
    async with backing("stdio") as entry, gateway_client(entry, "legacy", "auto") as c:
        seen = json.loads(text(await c.call_tool("ref_capabilities", {})))
    assert {"sampling", "elicitation", "roots"} <= set(seen)


def test_only_what_both_declare_is_passed_on_as_the_caller_declared_it() -> None:
    """Of the gateway's own capabilities, each the caller declared too, as the caller
    declared it; of the named maps (extensions, experimental), the names both have, as
    the gateway declares them."""
    from supervisor.transports._encoding import passed_capabilities

    own = {
        "sampling": {},
        "elicitation": {"form": {}, "url": {}},
        "roots": {"listChanged": True},
        "extensions": {"io.modelcontextprotocol/tasks": {}, "io.modelcontextprotocol/ui": {}},
    }
    caller = {
        "sampling": {"tools": {}},
        "elicitation": {"form": {}},
        "experimental": {"x": {}},
        "extensions": {"io.modelcontextprotocol/tasks": {"v": 1}, "com.example/other": {}},
    }
    assert passed_capabilities(own, caller) == {
        "sampling": {"tools": {}},
        "elicitation": {"form": {}},
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    }
    assert passed_capabilities(own, {}) == {}


def test_each_caller_s_request_declares_its_own_caller_s_capabilities() -> None:
    """Requests made for callers in turn each declare what their own caller declared,
    however they alternate (what was passed on for the last caller is kept, for the same
    two declarations only)."""
    from supervisor.transports._encoding import declaring

    own = {"sampling": {}, "elicitation": {"form": {}}}
    params = {"name": "t", "_meta": {types.CLIENT_CAPABILITIES_META_KEY: own, "k": 1}}
    first, second = {"sampling": {}}, {"elicitation": {"form": {}}}
    declared = [
        declaring(params, caller)["_meta"][types.CLIENT_CAPABILITIES_META_KEY]
        for caller in (first, first, second, first, {}, second)
    ]
    sampling, eliciting = {"sampling": {}}, {"elicitation": {"form": {}}}
    assert declared == [sampling, sampling, eliciting, sampling, {}, eliciting]
    assert params["_meta"][types.CLIENT_CAPABILITIES_META_KEY] is own  # (not changed)
    other = {"sampling": {}}
    assert (
        declaring({"_meta": {types.CLIENT_CAPABILITIES_META_KEY: other}}, second)["_meta"][
            types.CLIENT_CAPABILITIES_META_KEY
        ]
        == {}
    )


async def test_answers_a_caller_brings_without_a_round_s_state_reach_the_server() -> None:
    """A 2026-07-28 caller may bring answers (``inputResponses``) with no
    ``requestState`` — the server gave none, or the caller answers ahead: they are its
    own, and reach the server as they would directly (``confirm`` takes them: "accept
    after None"), not dropped for the server to ask again. The gateway's own approval
    answer is not among what is passed on."""
    answer = {"confirm": {"action": "accept"}, "mcp-supervisor/approval": {"action": "decline"}}
    body, headers = raw_call(
        "ref_confirm", {}, capabilities={"elicitation": {}}, inputResponses=answer
    )
    async with backing("stdio") as entry:
        servers = {"ref": {**entry, "autoApprove": AUTO_APPROVED}}
        async with gateway_url(servers, "auto") as url, httpx2.AsyncClient() as http:
            said = (await http.post(url, json=body, headers=headers)).json()
    assert said["result"]["content"][0]["text"] == "accept after None"


@pytest.mark.parametrize("declared", [False, True])
async def test_a_capability_the_server_requires_is_the_caller_s_error_as_directly(
    declared: bool,
) -> None:
    """A 2026-07-28 server that refuses a call for a capability its caller did not
    declare (``-32021``, ``requiredCapabilities``) is heard by that caller as directly: the
    protocol's error, HTTP 400, the server's data with it — not a tool result; declared,
    the call runs."""
    capabilities: dict[str, object] = {"sampling": {}} if declared else {}
    body, headers = raw_call("ref_needs_sampling", {}, capabilities=capabilities)
    async with backing("stdio") as entry:
        servers = {"ref": {**entry, "autoApprove": AUTO_APPROVED}}
        async with gateway_url(servers, "auto") as url, httpx2.AsyncClient() as http:
            answer = await http.post(url, json=body, headers=headers)
    if declared:
        assert answer.json()["result"]["content"][0]["text"] == "sampled"
        return
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert error["data"] == {"requiredCapabilities": {"sampling": {}}}
    assert "needs sampling" in error["message"]
