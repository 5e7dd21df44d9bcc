"""The stateless HTTP gateway's fast lane for handshake-era clients
(supervisor/gateway/_fast_legacy.py): a ``tools/call`` that asks for no progress is
served around the SDK's kernel, not through its HTTP entry — and answers, byte for byte,
what the SDK's entry answers.

Each test posts the same raw requests to two stateless gateways in front of the same
servers (tests/reference_server.py, the ``rich`` and ``slow`` fixtures, each over stdio,
spoken to in the session-based protocol so that their log messages reach the caller),
one with the lane and one without (``serve_http(fast=False)``), and compares status,
headers (but ``date``, and a ``connection: close`` that says when the body arrived) and
body bytes; only the time in a keep-alive comment, and how many of those a long call got,
are left out. A spy records what the lane served itself,
so a test cannot pass with the lane off.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import httpx2
import pytest
import trio
from sse_starlette import EventSourceResponse

from supervisor import open_supervisor
from supervisor.faults import CallHistory
from supervisor.gateway import Gateway, _fast_legacy, serve_http
from supervisor.gateway._fast_legacy import LegacyLane
from supervisor.gateway._relay import Relay
from tests.test_gateway import TOKEN
from tests.test_gateway_fidelity import AUTO_APPROVED, REFERENCE, WAIT

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

VERSION = "2025-11-25"
#: One request: its body (an object, sent as JSON; or bytes, sent as they are) and its
#: headers over the usual ones (a header set to ``None`` is left out; a list of pairs is
#: sent as it is, each pair added).
Request = tuple[dict[str, Any] | bytes, dict[str, str | None] | list[tuple[str, str]]]
_PING = re.compile(rb"(: ping - [^\r\n]*\r\n\r\n)+")
#: A tool name whose call fails in the server's middleware, with an error nothing maps
BROKEN = "broken_on_purpose"


def call(
    name: str,
    arguments: dict[str, Any],
    *,
    request_id: str | int = 1,
    meta: dict[str, Any] | None = None,
    headers: dict[str, str | None] | list[tuple[str, str]] | None = None,
) -> Request:
    """A handshake-era ``tools/call`` of ``name`` as such a client posts it to a
    stateless gateway (no session: no ``initialize`` first)."""
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return body, headers if headers is not None else {}


def _headers(given: dict[str, str | None] | list[tuple[str, str]]) -> list[tuple[str, str]]:
    usual: dict[str, str | None] = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": VERSION,
    }
    if isinstance(given, list):
        return [*((k, v) for k, v in usual.items() if v is not None), *given]
    return [(k, v) for k, v in {**usual, **given}.items() if v is not None]


@asynccontextmanager
async def gateway(fast: bool, history: CallHistory | None = None) -> AsyncIterator[str]:
    """The URL of a stateless HTTP gateway, the lanes on or off, in front of the
    reference server (``ref``), the ``rich`` fixture and the ``slow`` one."""
    relay = Relay()
    fixture = [sys.executable, "-m", "supervisor.testing.servers"]
    servers = {
        "ref": {"command": sys.executable, "args": [str(REFERENCE)], "autoApprove": AUTO_APPROVED},
        "rich": {"command": fixture[0], "args": [*fixture[1:], "rich"], "autoApprove": ["*"]},
        "slow": {"command": fixture[0], "args": [*fixture[1:], "slow"], "autoApprove": ["*"]},
    }
    async with (
        open_supervisor(
            {"mcpServers": servers}, mode="legacy", history=history, **relay.client_options()
        ) as sup,  # type: ignore[arg-type]
        trio.open_nursery() as nursery,
    ):
        served = Gateway(sup, relay=relay)
        served.server.middleware.insert(0, _breaking)
        await nursery.start(served.run)
        await sup.tools()
        serve = partial(serve_http, served, "127.0.0.1", 0, token=TOKEN, fast=fast, stateless=True)
        info = await nursery.start(serve)
        yield info.url
        nursery.cancel_scope.cancel()


async def _breaking(ctx: Any, call_next: Any) -> Any:
    """A server middleware that fails a call of :data:`BROKEN` as a bug would."""
    if ctx.method == "tools/call" and (ctx.params or {}).get("name") == BROKEN:
        raise RuntimeError("broken on purpose")
    return await call_next(ctx)


@pytest.fixture
def lane_served(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the tools whose calls the lane served, in order."""
    served: list[str] = []
    serve = LegacyLane._serve

    async def counted(self: LegacyLane, *args: Any) -> None:
        served.append(args[4]["params"]["name"])  # the parsed request
        await serve(self, *args)

    monkeypatch.setattr(LegacyLane, "_serve", counted)
    return served


async def exchange(url: str, requests: list[Request]) -> list[tuple[int, Any, bytes]]:
    """Post each request in turn: each answer's status, headers (but ``date``, and the
    HTTP server's ``connection: close``, said of an answer it gave before the request's
    body was all read: a matter of when the body arrived) and body, keep-alive comments
    (their time, and how many) made one marker."""
    answers: list[tuple[int, Any, bytes]] = []
    async with httpx2.AsyncClient(timeout=WAIT) as http:
        del http.headers["accept"]  # (its default: a request may go without)
        for body, headers in requests:
            content = body if isinstance(body, bytes) else json.dumps(body).encode()
            answer = await http.post(url, content=content, headers=_headers(headers))
            kept = [
                (k, v)
                for k, v in answer.headers.multi_items()
                if k != "date" and (k, v) != ("connection", "close")
            ]
            answers.append((answer.status_code, kept, _PING.sub(b": ping\r\n\r\n", answer.content)))
    return answers


async def both(requests: list[Request]) -> tuple[list[Any], list[Any]]:
    async with gateway(fast=True) as url:
        fast = await exchange(url, requests)
    async with gateway(fast=False) as url:
        slow = await exchange(url, requests)
    return fast, slow


def events(body: bytes) -> list[Any]:
    """The JSON-RPC messages of an answer's event stream."""
    return [json.loads(line[6:]) for line in body.split(b"\r\n") if line.startswith(b"data: ")]


async def test_calls_answer_byte_for_byte_as_through_the_sdk(lane_served: list[str]) -> None:
    """Plain calls and every way one fails — the backing server's log messages on the
    way, a structured result, arguments the tool's schema refuses, an unknown tool, a
    tool's own error, a backing server's question nobody can answer, a failure nothing
    maps (a bug), a request id that is a string, the gateway's own ``_meta`` — answer
    the same status, headers and bytes with the lane as without; the lane served
    each."""
    requests = [
        call("ref_chatter", {}),
        call("rich_structured_ok", {}),
        call("rich_echo", {"text": 5}),
        call("ref_nothing", {}),
        call("rich_fail", {"message": "boom"}),
        call("ref_confirm", {}),
        call(BROKEN, {}),
        call("rich_image", {}, request_id="call-7"),
        call("rich_echo", {"text": "hé"}, meta={"mcp-supervisor/timeout": 5}),
    ]
    fast, slow = await both(requests)
    assert fast == slow
    assert {status for status, _, _ in fast} == {200}
    assert all(("content-type", "text/event-stream") in headers for _, headers, _ in fast)
    chatter = events(fast[0][2])
    assert [m["params"]["level"] for m in chatter[:-1]] == ["debug", "info", "warning"]
    assert chatter[-1]["result"]["content"][0]["text"] == "chattered"
    assert events(fast[1][2])[0]["result"]["structuredContent"] == {"count": 3}
    assert events(fast[2][2])[0]["result"]["isError"] is True
    assert events(fast[3][2])[0]["error"]["code"] == -32602
    assert events(fast[6][2])[0]["error"] == {"code": 0, "message": "broken on purpose"}
    assert events(fast[7][2])[0]["id"] == "call-7"
    assert events(fast[8][2])[0]["result"]["content"][0]["text"] == "hé"
    assert lane_served == [
        *("ref_chatter", "rich_structured_ok", "rich_echo", "ref_nothing", "rich_fail"),
        *("ref_confirm", BROKEN, "rich_image", "rich_echo"),
    ]


async def test_what_the_lane_does_not_take_is_answered_by_the_sdk(
    lane_served: list[str],
) -> None:
    """A progress token (a stream of progress), a ``Host`` or ``Origin`` the SDK's
    check refuses, an ``Accept`` without an event stream or none, a body that is not
    JSON or not of ``Content-Type`` JSON, a header given twice, a session id, no
    protocol version header, a notification, a batch, another method: answered as
    without the lane — which served none of them."""
    requests = [
        call("ref_count", {}, meta={"progressToken": 7}),
        call("rich_echo", {"text": "x"}, headers={"Host": "127.0.0.1"}),
        call("rich_echo", {"text": "x"}, headers={"Origin": "https://127.0.0.1"}),
        call("rich_echo", {"text": "x"}, headers={"Accept": "application/json"}),
        call("rich_echo", {"text": "x"}, headers={"Accept": None}),
        call("rich_echo", {"text": "x"}, headers={"Content-Type": "text/plain"}),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {', {}),
        call("rich_echo", {"text": "x"}, headers=[("MCP-Protocol-Version", "2024-11-05")]),
        call("rich_echo", {"text": "x"}, headers={"Mcp-Session-Id": "abc"}),
        call("rich_echo", {"text": "x"}, headers={"MCP-Protocol-Version": None}),
        ({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "rich_echo"}}, {}),
        (json.dumps([call("rich_echo", {"text": "x"})[0]]).encode(), {}),
        ({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, {}),
    ]
    fast, slow = await both(requests)
    assert fast == slow
    statuses = [status for status, _, _ in fast]
    assert statuses == [200, 421, 403, 406, 406, 400, 400, 200, 200, 200, 202, 400, 200]
    progress = events(fast[0][2])
    assert [m["params"]["progress"] for m in progress[:-1]] == [1, 2, 3]
    assert lane_served == []


async def test_a_long_call_keeps_its_stream_alive_as_the_sdk_does(
    lane_served: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call longer than the keep-alive interval gets the SDK's keep-alive comments
    before its answer, with the lane as without (the interval made short, both ways)."""
    monkeypatch.setattr(EventSourceResponse, "DEFAULT_PING_INTERVAL", 0.1)
    monkeypatch.setattr(_fast_legacy, "PING_INTERVAL", 0.1)
    fast, slow = await both([call("slow_sleep", {"seconds": 0.5})])
    assert fast == slow
    assert fast[0][2].startswith(b": ping\r\n\r\nevent: message\r\n")
    assert events(fast[0][2])[0]["result"]["content"][0]["text"] == "slept 0.5"
    assert lane_served == ["slow_sleep"]


async def test_a_call_its_client_gives_up_on_is_cancelled_at_the_server(
    lane_served: list[str],
) -> None:
    """The client of a lane call that goes away (its connection closed) has the call
    cancelled at the backing server, as on the SDK's path; the history records it as
    indefinite, both ways."""
    seen: list[Any] = []
    for fast in (True, False):
        history = CallHistory()
        async with gateway(fast=fast, history=history) as url:
            body, headers = call("ref_wait", {})
            async with httpx2.AsyncClient() as http:
                with pytest.raises(httpx2.TimeoutException):
                    await http.post(url, json=body, headers=_headers(headers), timeout=1.0)
            answers = await exchange(url, [call("ref_cancelled", {})])
        outcomes = [c.outcome for c in history.calls if c.tool == "ref_wait"]
        seen.append((answers, outcomes))
    assert seen[0] == seen[1]
    answers, outcomes = seen[0]
    assert events(answers[0][2])[0]["result"]["content"][0]["text"] == "cancelled"
    assert outcomes == ["info"]
    assert lane_served == ["ref_wait", "ref_cancelled"]
