"""A gateway's call forwarded as JSON to a remote server (supervisor/transports/_forward_remote.py,
supervisor/server/_wire.py): the same answers as through the SDK's session, every shape.

As tests/test_gateway_forward.py does for local servers: each test sends the same requests
through two gateways in front of the same kind of servers, one forwarding and one not
(the SDK's path), compares what each answered, and counts what was forwarded and which
answers were kept as JSON — so a test cannot pass with the lane off.

The servers: tests/shaped_server.py served over Streamable HTTP (the session-based
protocol, a process of its own: JSON answers, or event streams that carry a log message
and a request of the server's own before the answer), and tests/reference_server.py
served in this process over Streamable HTTP (2026-07-28), and the echo fixture over legacy
SSE and over WebSocket.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio

from supervisor import open_supervisor
from supervisor.faults import CallHistory
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway._relay import Relay
from supervisor.testing.servers import make_server, start_http
from supervisor.tools._forwarded import Forwarded
from supervisor.transports._forward import FIRST_ID
from supervisor.transports._forward_remote import RemoteForwarding
from supervisor.transports._ws import serve_websocket
from tests.reference_server import build
from tests.test_gateway import TOKEN
from tests.test_gateway_fast import exchange
from tests.test_gateway_fidelity import AUTO_APPROVED, NEWS, WAIT, raw_call
from tests.test_gateway_forward import (  # (no_tracer_provider: for each test here too)
    NOT_PLAIN,
    PLAIN,
    SHAPED,
    TEXT,
    _forwarding,
    given_up,
    no_tracer_provider,  # noqa: F401
    shaped,
)

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

Requests = list[tuple[dict[str, Any], dict[str, str]]]


@pytest.fixture
def lanes(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """What the remote forwarding lane did: the requests it sent (``sent``: their method
    and the headers they carried, named in lower case) and the answers kept as JSON (``kept``)."""
    seen: dict[str, list[Any]] = {"sent": [], "kept": []}
    request, of = RemoteForwarding.request, Forwarded.of.__func__  # type: ignore[attr-defined]

    async def sent(
        self: RemoteForwarding, method: str, params: dict[str, Any], headers: Any
    ) -> dict[str, Any]:
        seen["sent"].append((method, {k.lower(): v for k, v in (headers or {}).items()}))
        return await request(self, method, params, headers)

    def kept(cls: type[Forwarded], json: dict[str, Any]) -> Forwarded:
        seen["kept"].append(json)
        return of(cls, json)

    monkeypatch.setattr(RemoteForwarding, "request", sent)
    monkeypatch.setattr(Forwarded, "of", classmethod(kept))
    return seen


@asynccontextmanager
async def shaped_over_http() -> AsyncIterator[str]:
    """The URL of tests/shaped_server.py served over Streamable HTTP, for as long as the
    block runs."""
    process = await trio.lowlevel.open_process(
        [sys.executable, str(SHAPED), "http"], stdout=subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        said = b""
        with trio.fail_after(WAIT):
            while not said.endswith(b"\n"):
                chunk = await process.stdout.receive_some(1)
                assert chunk, "the shaped server ended before it said its URL"
                said += chunk
        yield said.decode().strip()
    finally:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


@asynccontextmanager
async def gateway(
    forward: bool, history: CallHistory | None = None, **limits: object
) -> AsyncIterator[str]:
    """The URL of an HTTP gateway, forwarding or not, in front of ``shaped`` (over
    Streamable HTTP), ``ref`` (over Streamable HTTP), ``legacy`` and ``socket`` (the echo
    fixture over legacy SSE and over WebSocket), each served anew, under the supervisor's
    ``limits``."""
    relay = Relay()
    async with shaped_over_http() as shaped_url, trio.open_nursery() as backing:
        ref = await start_http(backing, build().streamable_http_app())
        legacy = await start_http(backing, make_server("echo"), transport="sse")
        socket = await backing.start(partial(serve_websocket, make_server("echo")))
        servers = {
            "shaped": {"type": "http", "url": shaped_url, "approve": False},
            "ref": {"type": "http", "url": ref.url, "autoApprove": [*AUTO_APPROVED, "arguments"]},
            "legacy": {"type": "sse", "url": legacy.url, "approve": False},
            "socket": {"type": "ws", "url": socket, "approve": False},
        }
        config: dict[str, object] = {"mcpServers": servers}
        if limits:
            config["supervisor"] = {"limits": limits}
        with _forwarding(forward):
            async with (
                open_supervisor(config, history=history, **relay.client_options()) as sup,  # type: ignore[arg-type]
                trio.open_nursery() as nursery,
            ):
                gateway = Gateway(sup, relay=relay)
                await nursery.start(gateway.run)
                await sup.tools()
                info = await nursery.start(
                    partial(serve_http, gateway, "127.0.0.1", 0, token=TOKEN)
                )
                yield info.url
                nursery.cancel_scope.cancel()
        backing.cancel_scope.cancel()


async def both(requests: Requests) -> tuple[list[Any], list[Any]]:
    async with gateway(True) as url:
        forwarded = await exchange(url, requests)
    async with gateway(False) as url:
        through_sdk = await exchange(url, requests)
    return forwarded, through_sdk


async def test_every_shape_of_answer_over_http_is_passed_on_as_through_the_sdk(
    lanes: dict[str, list[Any]],
) -> None:
    """Each answer of a session-based server over Streamable HTTP, plain or not, valid or
    not, as a JSON body or at the end of an event stream that first carries a log message
    and a request of the server's own, comes to the gateway's client the same forwarded
    as through the SDK's session; the plain ones kept as JSON."""
    streamed = [*PLAIN[:4], *NOT_PLAIN[:3]]
    requests = [shaped(result) for result in [*PLAIN, *NOT_PLAIN]]
    requests += [shaped(result, sse=True) for result in streamed]
    forwarded, through_sdk = await both(requests)
    assert forwarded == through_sdk
    assert [method for method, _ in lanes["sent"]] == ["tools/call"] * len(requests)
    assert lanes["kept"] == [*PLAIN, *PLAIN[:4]]
    # the session-based protocol's header, and no 2026-07-28 one
    assert all(h == {"mcp-protocol-version": "2025-11-25"} for _, h in lanes["sent"])
    first = forwarded[0][2]["result"]
    assert first["content"] == [TEXT] and first["_meta"]["mcp-supervisor/server"] == "shaped"


async def test_errors_over_http_are_said_as_through_the_sdk(lanes: dict[str, list[Any]]) -> None:
    """A server's JSON-RPC error (its code, message and data), a body that is not
    JSON-RPC, an answer over ``maxMessageBytes``, output that breaks the tool's declared
    ``outputSchema``, and a server that exits with the call in flight (it may have taken
    effect) are answered the same forwarded or not."""
    requests = [
        shaped(error={"code": -32000, "message": "boom", "data": {"x": [1]}}),
        shaped(error={"code": -32602, "message": "bad"}, sse=True),
        raw_call("shaped_typed", {"result": {"content": [TEXT], "structuredContent": {"n": 1}}}),
        raw_call("shaped_typed", {"result": {"content": [TEXT], "structuredContent": {"n": "x"}}}),
        raw_call("shaped_typed", {"result": {"content": [TEXT]}}),
        shaped(line="not JSON at all"),
        shaped(result={"content": [TEXT]}),
        shaped(
            line='{"jsonrpc": "2.0", "id": <id>, "result": {"content": [{"type": "text", '
            '"text": "' + "y" * 50_000 + '"}]}}'
        ),
        shaped(exit=True),
    ]
    async with gateway(True, maxMessageBytes=40_000) as url:
        forwarded = await exchange(url, requests)
    async with gateway(False, maxMessageBytes=40_000) as url:
        through_sdk = await exchange(url, requests)
    sized = re.compile(r"\d+ bytes")  # (the ids the two sent it under differ in length)
    for ours, theirs in zip(forwarded, through_sdk, strict=True):
        ours, theirs = (sized.sub("N bytes", json.dumps(a, sort_keys=True)) for a in (ours, theirs))
        assert ours == theirs
    assert len(lanes["sent"]) == len(requests)
    texts = [answer[2]["result"]["content"][0]["text"] for answer in forwarded]
    assert "boom" in texts[0] and "bad" in texts[1] and texts[2] == "hi"
    assert "'x' is not of type 'integer'" in texts[3] and "outputSchema" in texts[4]
    assert texts[6] == "hi"  # (the body that was not JSON-RPC lost nothing else)
    assert "may have taken effect" in texts[8]


async def test_a_2026_server_over_http_gets_its_headers_and_answers_as_through_the_sdk(
    lanes: dict[str, list[Any]],
) -> None:
    """A 2026-07-28 server over Streamable HTTP: a forwarded call carries the headers the
    session gives each request (``Mcp-Method``, ``Mcp-Name``, an argument's
    ``Mcp-Param-*``), and its answers — a plain result, a tool's error, an
    ``input_required`` round, a task — come the same forwarded or not."""
    requests = [
        raw_call("ref_chatter", {}),
        raw_call(
            "ref_arguments",
            {"region": "eu-west", "query": "q"},
            headers={"Mcp-Param-Region": "eu-west"},
        ),
        raw_call("ref_confirm", {}, capabilities={"elicitation": {"form": {}}}),
        raw_call("ref_job", {}, capabilities={"extensions": {"io.modelcontextprotocol/tasks": {}}}),
    ]
    forwarded, through_sdk = await both(requests)
    assert forwarded == through_sdk
    assert [h.get("mcp-name") for _, h in lanes["sent"]] == [
        "chatter",
        "arguments",
        "confirm",
        "job",
    ]
    mirrored = json.loads(forwarded[1][2]["result"]["content"][0]["text"])
    assert mirrored["arguments"] == {"region": "eu-west", "query": "q"}
    assert "eu-west" in mirrored["headers"].values()
    headers = lanes["sent"][1][1]
    assert headers["mcp-method"] == "tools/call" and headers["mcp-name"] == "arguments"
    assert "eu-west" in headers.values()
    assert forwarded[2][2]["result"]["resultType"] == "input_required"
    assert forwarded[3][2]["result"]["resultType"] == "task"


async def test_a_call_refused_for_a_stale_schema_s_headers_is_forwarded_again_once(
    lanes: dict[str, list[Any]],
) -> None:
    """A 2026-07-28 server that changed which header carries an argument without saying
    so refuses a forwarded call unseen (``-32020``): the tools are listed again, and the
    call is forwarded once more with the header the schema now names, as the session's
    path does."""
    requests = [
        raw_call("ref_rename_header", {}),
        raw_call("ref_touch", {"uri": NEWS}, headers={"Mcp-Param-Uri": NEWS}),
    ]
    forwarded, through_sdk = await both(requests)
    assert forwarded == through_sdk
    assert forwarded[1][2]["result"]["content"] == [{"type": "text", "text": "touched"}]
    touches = [h for _, h in lanes["sent"] if h.get("mcp-name") == "touch"]
    assert len(touches) == 2  # refused unseen, then sent with the header now named
    assert "mcp-param-uri" in touches[0] and "mcp-param-where" in touches[1]


async def test_a_server_over_legacy_sse_or_websocket_answers_as_through_the_sdk(
    lanes: dict[str, list[Any]],
) -> None:
    """Over legacy SSE (each request posted, its answer on the event stream) and over
    WebSocket too, a forwarded call is answered as through the SDK's session, its answer
    kept as JSON."""
    requests = [
        raw_call("legacy_echo", {"text": "hello"}),
        raw_call("legacy_echo", {}),  # (refused by the gate: never sent)
        raw_call("socket_echo", {"text": "there"}),
    ]
    forwarded, through_sdk = await both(requests)
    assert forwarded == through_sdk
    assert [method for method, _ in lanes["sent"]] == ["tools/call"] * 2
    texts = [kept["content"][0]["text"] for kept in lanes["kept"]]
    assert texts == ["hello", "there"]
    assert forwarded[1][2]["result"]["isError"] is True


async def test_a_forwarded_call_its_client_gives_up_on_is_cancelled_at_the_remote_server(
    lanes: dict[str, list[Any]],
) -> None:
    """A call forwarded to a session-based server over HTTP whose client goes away is
    cancelled at the server with the id it was sent under (``notifications/cancelled``,
    posted), and recorded as indefinite."""
    history = CallHistory()
    async with gateway(True, history) as url:
        read, told = await given_up(url)
    assert told == read and int(read) >= FIRST_ID  # the id it was forwarded under
    outcomes = [c.outcome for c in history.calls if c.tool == "shaped_shape"]
    assert outcomes.count("info") == 1 and set(outcomes) == {"info", "ok"}
