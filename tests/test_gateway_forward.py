"""A gateway's call forwarded as JSON to a local server (supervisor/transports/_forward.py,
supervisor/server/_wire.py): the same answers as through the SDK's models, every shape.

Each test sends the same requests through two gateways in front of the same servers,
one forwarding and one not (the SDK's path: ``_wire._forwards`` made to say no), and
compares what each answered; spies count what was forwarded, and which answers were
plain (kept as JSON) — so a test cannot pass with the lane off.

The servers: tests/shaped_server.py (the session-based protocol), which answers a call
with whatever result, error or line the call asks it to, and tests/reference_server.py
(2026-07-28), both over stdio.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from functools import partial
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
import trio
from mcp import ClientSession
from opentelemetry import propagate
from opentelemetry.propagators.composite import CompositePropagator
from pydantic import BaseModel

from supervisor import open_supervisor
from supervisor.faults import CallHistory
from supervisor.gateway import Gateway, _plain_calls, serve_http, serve_stdio
from supervisor.gateway._plain_calls import PlainCalls
from supervisor.gateway._relay import Relay, connection_of
from supervisor.gateway._stdio_fast import StdioFastLane, Taken
from supervisor.server import _wire
from supervisor.tools import _tracing as tracing
from supervisor.tools._forwarded import Forwarded, constructed
from supervisor.transports._forward import FIRST_ID, Forwarding
from tests.test_gateway import TOKEN, http_client
from tests.test_gateway_fast import exchange, sealed
from tests.test_gateway_fidelity import AUTO_APPROVED, REFERENCE, WAIT, raw_call

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

SHAPED = Path(__file__).with_name("shaped_server.py")
TEXT = {"type": "text", "text": "hi"}


@pytest.fixture(autouse=True)
def no_tracer_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """These tests are of calls made with no tracer provider installed (a call with a
    span to make, or a trace to continue, is not forwarded): one that another test
    installed in this process (the API takes one per process) is not seen, and no trace
    context is sent."""
    monkeypatch.setattr(tracing, "_installed", lambda: False)
    propagator = propagate.get_global_textmap()
    propagate.set_global_textmap(CompositePropagator([]))
    yield
    propagate.set_global_textmap(propagator)


@pytest.fixture
def lanes(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """What the forwarding lane did: the requests it sent (``sent``), the answers it
    kept as JSON (``kept``), the answers the gateway wrote past the SDK's models
    (``written``: their ``isError``), and the ids of the requests the stdio fast lane
    served (``fast``), and the answers the gateway's direct route past the SDK's runner
    gave (``direct``: their ids' place in the calls it answered, their ``resultType``)."""
    seen: dict[str, list[Any]] = {"sent": [], "kept": [], "written": [], "fast": [], "direct": []}
    directly = PlainCalls.served

    async def direct(self: PlainCalls, *args: Any) -> Any:
        answer = await directly(self, *args)
        if answer is not None:
            seen["direct"].append(answer.get("resultType"))
        return answer

    monkeypatch.setattr(PlainCalls, "served", direct)
    write = _plain_calls.written

    def written(server: Any, version: str, result: Any) -> dict[str, Any]:
        wire = write(server, version, result)
        seen["written"].append(wire.get("isError"))
        return wire

    monkeypatch.setattr(_plain_calls, "written", written)
    serve = StdioFastLane.serve

    async def served(self: StdioFastLane, taken: Taken, scope: trio.CancelScope) -> None:
        seen["fast"].append(taken.request["id"])
        await serve(self, taken, scope)

    monkeypatch.setattr(StdioFastLane, "serve", served)
    request, of = Forwarding.request, Forwarded.of.__func__  # type: ignore[attr-defined]

    async def sent(self: Forwarding, method: str, params: bytes) -> dict[str, Any]:
        seen["sent"].append(method)
        return await request(self, method, params)

    def kept(cls: type[Forwarded], json: dict[str, Any]) -> Forwarded:
        seen["kept"].append(json)
        return of(cls, json)

    monkeypatch.setattr(Forwarding, "request", sent)
    monkeypatch.setattr(Forwarded, "of", classmethod(kept))
    return seen


@asynccontextmanager
async def gateway(
    forward: bool, history: CallHistory | None = None, **limits: object
) -> AsyncIterator[str]:
    """The URL of an HTTP gateway in front of ``shaped`` and ``ref``, forwarding or not,
    under the supervisor's ``limits``."""
    relay = Relay()
    servers = {
        "shaped": {"command": sys.executable, "args": [str(SHAPED)], "approve": False},
        "ref": {"command": sys.executable, "args": [str(REFERENCE)], "autoApprove": AUTO_APPROVED},
    }
    config: dict[str, object] = {"mcpServers": servers}
    if limits:
        config["supervisor"] = {"limits": limits}
    with _forwarding(forward):
        async with (
            open_supervisor(config, history=history, **relay.client_options()) as sup,  # type: ignore[arg-type]
            trio.open_nursery() as nursery,
        ):
            served = Gateway(sup, relay=relay)
            await nursery.start(served.run)
            await sup.tools()
            info = await nursery.start(partial(serve_http, served, "127.0.0.1", 0, token=TOKEN))
            yield info.url
            nursery.cancel_scope.cancel()


_forwards = _wire._forwards


@contextmanager
def _forwarding(on: bool) -> Iterator[None]:
    """Forwarding on (as it is), or off: every call on the SDK's path, its request and
    answer read and written by the SDK's models on both sides."""
    if on:
        yield
        return
    plainly, directly = PlainCalls.__call__, PlainCalls.served

    async def through_sdk(self: PlainCalls, ctx: Any, call_next: Any) -> Any:
        return await call_next(ctx)

    async def not_directly(self: PlainCalls, *args: Any) -> None:
        return None

    _wire._forwards = lambda *args: False  # type: ignore[assignment]
    PlainCalls.__call__ = through_sdk  # type: ignore[method-assign]
    PlainCalls.served = not_directly  # type: ignore[method-assign]
    try:
        yield
    finally:
        _wire._forwards = _forwards
        PlainCalls.__call__ = plainly  # type: ignore[method-assign]
        PlainCalls.served = directly  # type: ignore[method-assign]


def shaped(result: object = None, **arguments: object) -> tuple[dict[str, Any], dict[str, str]]:
    """A 2026-07-28 call of ``shaped_shape`` answered with ``result`` (or as ``arguments``
    ask)."""
    if result is not None:
        arguments["result"] = result
    return raw_call("shaped_shape", arguments)


async def both(
    requests: list[tuple[dict[str, Any], dict[str, str]]],
) -> tuple[list[Any], list[Any]]:
    async with gateway(forward=True) as url:
        forwarded = await exchange(url, requests)
    async with gateway(forward=False) as url:
        through_sdk = await exchange(url, requests)
    return forwarded, through_sdk


#: Answers that are plain: kept as the server's JSON all the way.
PLAIN = [
    {"content": [TEXT]},
    {"content": [TEXT], "isError": True},
    {"content": [TEXT], "isError": False},
    {"content": [], "structuredContent": {"a": 1, "b": [1, 2.5, "x", None], "c": {"d": True}}},
    {"content": [TEXT], "_meta": {"k": "v", "io.modelcontextprotocol/serverInfo": {"name": "x"}}},
    {"content": [TEXT, {"type": "text", "text": 'héllo ✓ \u2028 😀 \\ " \n'}]},
    {"content": [{"type": "text", "text": "x" * 100_000}]},
    {"content": [TEXT], "structuredContent": {"big": 2**70, "small": 1e-300, "neg": -0.0}},
]
#: Answers that are not: read by the SDK, as before — passed on as it reads them, or
#: refused as it refuses them.
NOT_PLAIN = [
    {"content": [TEXT], "resultType": "complete"},  # a later revision's key, dropped
    {"content": [{"type": "text", "text": "hi", "annotations": {"audience": ["user"]}}]},
    {"content": [{"type": "text", "text": "hi", "_meta": {"k": 1}}]},
    {"content": [{"type": "image", "data": "aGk=", "mimeType": "image/png"}]},
    {"content": [TEXT], "extra": 1},
    {"content": [TEXT], "_meta": None},
    {"content": [TEXT], "structuredContent": [1, 2]},
    {"content": "hi"},
    {"content": [TEXT], "isError": "yes"},
    {"content": [{"type": "text"}]},
    {},
]


async def test_every_shape_of_answer_is_passed_on_as_through_the_sdk(
    lanes: dict[str, list[Any]],
) -> None:
    """Each answer, plain or not, valid or not, comes to the gateway's client the same
    forwarded as through the SDK's models: status, content type and JSON; the plain ones
    were kept as JSON, the others read by the SDK."""
    requests = [shaped(result) for result in [*PLAIN, *NOT_PLAIN]]
    forwarded, through_sdk = await both(requests)
    assert forwarded == through_sdk
    assert lanes["sent"] == ["tools/call"] * len(requests)
    assert lanes["kept"] == PLAIN
    assert len(lanes["written"]) == len(requests)  # (the gateway forwarding; not the other)
    assert lanes["direct"] == ["complete"] * len(requests)  # past the SDK's runner
    first = forwarded[0][2]["result"]
    assert first["content"] == [TEXT] and first["_meta"]["mcp-supervisor/server"] == "shaped"
    stamped = forwarded[4][2]["result"]["_meta"]  # the server's stamp gone; the gateway's
    assert stamped["k"] == "v" and stamped["io.modelcontextprotocol/serverInfo"]["name"] != "x"


async def test_errors_and_lost_answers_are_said_as_through_the_sdk(
    lanes: dict[str, list[Any]],
) -> None:
    """A server's JSON-RPC error (its code, message and data), an answer that is not
    JSON-RPC (the connection fails), a server that exits with the call in flight (it
    may have taken effect), an answer over ``maxMessageBytes``, and output that breaks
    the tool's declared ``outputSchema`` are answered the same forwarded or not."""
    requests = [
        shaped(error={"code": -32000, "message": "boom", "data": {"x": [1]}}),
        shaped(error={"code": -32602, "message": "bad"}),
        raw_call("shaped_typed", {"result": {"content": [TEXT], "structuredContent": {"n": 1}}}),
        raw_call("shaped_typed", {"result": {"content": [TEXT], "structuredContent": {"n": "x"}}}),
        raw_call("shaped_typed", {"result": {"content": [TEXT]}}),
        raw_call("shaped_typed", {"result": {"content": [TEXT], "isError": True}}),
        shaped(
            line='{"jsonrpc": "2.0", "id": <id>, "result": {"content": [{"type": "text", '
            '"text": "' + "y" * 50_000 + '"}]}}'
        ),
        shaped(exit=True),
        shaped(result={"content": [TEXT]}),  # the server restarted: answered again
        shaped(line="not JSON at all"),
        shaped(result={"content": [TEXT]}),
    ]
    async with gateway(True, maxMessageBytes=40_000) as url:
        forwarded = await exchange(url, requests)
    async with gateway(False, maxMessageBytes=40_000) as url:
        through_sdk = await exchange(url, requests)
    # (the answer over the limit is counted in bytes, and the ids the two sent it under
    # are of different lengths)
    sized = re.compile(r"with \d+ bytes")
    for ours, theirs in zip(forwarded, through_sdk, strict=True):
        ours, theirs = (
            sized.sub("with N bytes", json.dumps(a, sort_keys=True)) for a in (ours, theirs)
        )
        assert ours == theirs
    assert len(lanes["sent"]) == len(requests)
    texts = [answer[2]["result"]["content"][0]["text"] for answer in forwarded]
    assert "boom" in texts[0] and texts[2] == "hi" and "outputSchema" not in texts[2]
    assert "may have taken effect" in texts[7]
    assert "maxMessageBytes" in texts[6] or "too large" in texts[6].lower()


async def test_a_call_its_server_never_read_is_sent_again_as_through_the_sdk(
    lanes: dict[str, list[Any]],
) -> None:
    """A server that dies with one call read and another still unread in its stdin: the
    read one may have taken effect, the unread one is sent again once it is back and
    answered — forwarded (written straight into the pipe) as through the SDK's path."""
    results = {}
    for forward in (True, False):
        async with gateway(forward) as url, httpx2.AsyncClient(timeout=WAIT) as http:
            answers: dict[str, Any] = {}

            async def post(
                key: str, request: tuple[dict[str, Any], dict[str, str]], into: dict[str, Any]
            ) -> None:
                body, headers = request
                into[key] = sealed((await http.post(url, json=body, headers=headers)).json())

            async with trio.open_nursery() as nursery:
                nursery.start_soon(post, "read", shaped(exit_after=2), answers)
                await trio.sleep(0.5)  # (read, and the server reading nothing more)
                nursery.start_soon(post, "unread", shaped(result={"content": [TEXT]}), answers)
            results[forward] = answers
    assert results[True] == results[False]
    assert "may have taken effect" in results[True]["read"]["result"]["content"][0]["text"]
    assert results[True]["unread"]["result"]["content"] == [TEXT]
    assert lanes["sent"] == ["tools/call"] * 3  # the unread one twice


async def test_a_2026_server_s_answers_rounds_and_tasks_pass_as_through_the_sdk(
    lanes: dict[str, list[Any]],
) -> None:
    """A 2026-07-28 server's answers — a plain result, a tool's error, an
    ``input_required`` round, a task handle — come the same forwarded or not; the plain
    one kept as JSON, the rest read by the SDK."""
    requests = [
        raw_call("ref_chatter", {}),
        raw_call("ref_job", {"ask": "yes"}),  # refused by the gate: never sent
        raw_call("ref_confirm", {}, capabilities={"elicitation": {"form": {}}}),
        raw_call("ref_job", {}, capabilities={"extensions": {"io.modelcontextprotocol/tasks": {}}}),
    ]
    forwarded, through_sdk = await both(requests)
    assert forwarded == through_sdk
    assert lanes["sent"] == ["tools/call"] * 3
    assert [kept["content"][0]["text"] for kept in lanes["kept"]] == ["chattered"]
    assert forwarded[1][2]["result"]["isError"] is True
    assert forwarded[2][2]["result"]["resultType"] == "input_required"
    assert forwarded[3][2]["result"]["resultType"] == "task"
    # past the SDK's runner all four: the round's requestState sealed by its boundary
    assert lanes["direct"] == ["complete", "complete", "input_required", "task"]


async def test_a_session_based_client_gets_the_same_forwarded(
    lanes: dict[str, list[Any]],
) -> None:
    """A session-based client (the SDK's, handshake and all) gets the same results
    forwarded as not."""
    results = {}
    for forward in (True, False):
        async with gateway(forward) as url, http_client(url, mode="legacy") as client:
            answers = []
            for result in PLAIN[:5]:
                called = await client.call_tool("shaped_shape", {"result": result})
                answers.append(called.model_dump(mode="json"))
            results[forward] = answers
    assert results[True] == results[False]
    assert len(lanes["kept"]) == len(lanes["written"]) == 5


async def given_up(url: str) -> tuple[str, str]:
    """A waiting ``shaped`` call posted to the gateway at ``url``, its client gone once the
    server has read it: the id the server read it under, and the id the server was then
    told was cancelled (asked again until it has been told)."""
    body, headers = shaped(wait=True)
    async with httpx2.AsyncClient(timeout=WAIT) as http, trio.open_nursery() as nursery:
        nursery.start_soon(partial(http.post, url, json=body, headers=headers))
        read = ""  # (the client goes once the server has read the call)
        with trio.fail_after(WAIT):
            while not read:
                read = (await exchange(url, [shaped(waiting=True)]))[0][2]["result"]
                read = read["content"][0]["text"]
        nursery.cancel_scope.cancel()
    told = ""
    with trio.fail_after(WAIT):  # (the gateway tells the server once it has seen it go)
        while not told:
            told = (await exchange(url, [shaped(cancelled=True)]))[0][2]["result"]
            told = told["content"][0]["text"]
    return read, told


async def test_a_forwarded_call_its_client_gives_up_on_is_cancelled_at_the_server(
    lanes: dict[str, list[Any]],
) -> None:
    """A forwarded call whose client goes away is cancelled at the server with the id it
    was sent under (``notifications/cancelled``), and recorded as indefinite."""
    history = CallHistory()
    async with gateway(True, history) as url:
        read, told = await given_up(url)
    assert told == read  # the id it was sent under (the call may have gone second)
    assert int(read) >= FIRST_ID
    assert set(lanes["sent"]) == {"tools/call"}
    outcomes = [c.outcome for c in history.calls if c.tool == "shaped_shape"]
    assert outcomes.count("info") == 1 and set(outcomes) == {"info", "ok"}  # the rest: queries


# -- the gateway over stdio: its fast lane (supervisor/gateway/_stdio_fast.py) -------------


@asynccontextmanager
async def stdio_gateway(fast: bool) -> AsyncIterator[tuple[Any, set[Any]]]:
    """A gateway over stdio (pipes, in this process) in front of ``shaped`` and ``ref``,
    everything on (the fast lane, plain calls, forwarding) or everything off (the
    SDK's loop and models); yields ``ask`` — write one message, and read the answer to
    it (``None`` for a notification, or with ``answered=False``), the other lines
    before it passed over — and the ids of every answer read."""
    relay = Relay()
    servers = {
        "shaped": {"command": sys.executable, "args": [str(SHAPED)], "approve": False},
        "ref": {"command": sys.executable, "args": [str(REFERENCE)], "autoApprove": AUTO_APPROVED},
    }
    take = StdioFastLane.take
    with _forwarding(fast):
        if not fast:
            StdioFastLane.take = lambda self, line: False  # type: ignore[method-assign]
        try:
            to_gateway_r, to_gateway_w = os.pipe()
            from_gateway_r, from_gateway_w = os.pipe()
            async with (
                open_supervisor({"mcpServers": servers}, **relay.client_options()) as sup,  # type: ignore[arg-type]
                trio.open_nursery() as nursery,
                trio.lowlevel.FdStream(to_gateway_w) as requests,
                trio.lowlevel.FdStream(from_gateway_r) as answers,
            ):
                served = Gateway(sup, relay=relay)
                await nursery.start(served.run)
                await sup.tools()
                nursery.start_soon(serve_stdio, served, to_gateway_r, from_gateway_w)
                buffer = bytearray()
                seen: set[Any] = set()

                async def ask(message: dict[str, Any], answered: bool = True) -> Any:
                    await requests.send_all(json.dumps(message).encode() + b"\n")
                    if "id" not in message or not answered:
                        return None
                    with trio.fail_after(WAIT):
                        while True:
                            while (end := buffer.find(b"\n")) < 0:
                                buffer.extend(await answers.receive_some())
                            answer = json.loads(bytes(buffer[:end]))
                            del buffer[: end + 1]
                            seen.add(answer.get("id"))
                            if answer.get("id") == message["id"]:
                                return sealed(answer)

                yield ask, seen
                nursery.cancel_scope.cancel()
        finally:
            StdioFastLane.take = take  # type: ignore[method-assign]
            for fd in (to_gateway_r, from_gateway_w):
                with suppress(OSError):
                    os.close(fd)


def call(request_id: int, name: str, arguments: dict[str, Any], **options: Any) -> dict[str, Any]:
    """A 2026-07-28 ``tools/call`` message of ``name`` (the body :func:`raw_call` makes)."""
    body, _ = raw_call(name, arguments, **options)
    return {**body, "id": request_id}


async def test_over_stdio_the_fast_lane_answers_as_the_sdk_s_loop(
    lanes: dict[str, list[Any]],
) -> None:
    """Over stdio, each request — plain calls and not, errors, a round, a task, a
    progress token, an unknown tool — is answered the same with the fast lane (and
    forwarding) as by the SDK's loop and models alone."""
    envelope = raw_call("x", {})[0]["params"]["_meta"]
    listing = {"jsonrpc": "2.0", "id": 0, "method": "tools/list", "params": {"_meta": envelope}}
    shapes = [*PLAIN, *NOT_PLAIN]
    requests = [
        listing,  # the first request: the SDK's, which decides the era
        *(call(i, "shaped_shape", {"result": r}) for i, r in enumerate(shapes, start=1)),
        call(100, "shaped_shape", {"error": {"code": -32000, "message": "boom"}}),
        call(101, "ref_chatter", {}),
        call(102, "ref_confirm", {}, capabilities={"elicitation": {"form": {}}}),
        call(
            103, "ref_job", {}, capabilities={"extensions": {"io.modelcontextprotocol/tasks": {}}}
        ),
        call(104, "ref_count", {}, meta={"progressToken": 9}),
        call(105, "ref_nothing", {}),
        call(106, "ref_job", {"ask": "yes"}),
    ]
    results = {}
    for fast in (True, False):
        async with stdio_gateway(fast) as (ask, _):
            results[fast] = {request["id"]: await ask(request) for request in requests}
    assert results[True] == results[False]
    assert results[True][101]["result"]["content"][0]["text"] == "chattered"
    assert results[True][102]["result"]["resultType"] == "input_required"
    assert results[True][103]["result"]["resultType"] == "task"
    assert results[True][105]["error"]["code"] == -32602
    assert lanes["kept"][: len(PLAIN)] == PLAIN  # (the fast gateway's: it went first)
    taken = [request["id"] for request in requests[1:] if request["id"] != 104]
    assert lanes["fast"] == taken  # all but the first request and the progress token
    assert len(lanes["written"]) >= len(shapes)


async def test_over_stdio_a_fast_lane_call_its_client_cancels_is_cancelled_unanswered(
    lanes: dict[str, list[Any]],
) -> None:
    """A call the stdio fast lane serves that its client cancels
    (``notifications/cancelled``) is cancelled at the backing server, and never
    answered."""
    envelope = raw_call("x", {})[0]["params"]["_meta"]
    listing = {"jsonrpc": "2.0", "id": 0, "method": "tools/list", "params": {"_meta": envelope}}
    async with stdio_gateway(True) as (ask, seen):
        await ask(listing)
        await ask({**call(1, "shaped_shape", {"wait": True}), "id": 1}, answered=False)
        # (cancelled before it was written, the call would reach the server neither way:
        # the cancellation is sent once the server has read it)
        read, asked = "", 2
        with trio.fail_after(WAIT):
            while not read:
                answer = await ask(call(asked, "shaped_shape", {"waiting": True}))
                read, asked = answer["result"]["content"][0]["text"], asked + 1
        cancel = {"requestId": 1, "reason": "gave up"}
        told = ""
        with trio.fail_after(WAIT):
            while not told:  # (asked again until the cancellation has reached the server)
                await ask({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
                answer = await ask(call(asked, "shaped_shape", {"cancelled": True}))
                told, asked = answer["result"]["content"][0]["text"], asked + 1
    assert told == read and int(read) >= FIRST_ID
    assert 1 not in seen
    assert 1 in lanes["fast"]


async def test_a_valid_forwarded_result_is_checked_without_the_session_s_full_check(
    lanes: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``structuredContent`` that passes the quick check of the tool's flat
    ``outputSchema`` is not walked again by the SDK session's ``jsonschema`` check; one
    that fails it, or a result without it, is — and is refused as the session refuses it
    (the answers themselves are compared with the SDK's path above)."""
    checked: list[object] = []
    check = ClientSession.validate_tool_result

    async def validate(self: ClientSession, name: str, result: Any) -> None:
        checked.append(result.structured_content)
        await check(self, name, result)

    monkeypatch.setattr(ClientSession, "validate_tool_result", validate)
    requests = [
        raw_call("shaped_typed", {"result": {"content": [TEXT], "structuredContent": {"n": 1}}}),
        raw_call("shaped_typed", {"result": {"content": [TEXT], "structuredContent": {"n": "x"}}}),
        raw_call("shaped_typed", {"result": {"content": [TEXT]}}),
    ]
    async with gateway(True) as url:
        answers = await exchange(url, requests)
    assert len(lanes["kept"]) == 3  # all three forwarded and plain
    assert checked == [{"n": "x"}, None]
    texts = [answer[2]["result"]["content"][0]["text"] for answer in answers]
    assert texts[0] == "hi" and "is not of type 'integer'" in texts[1]
    assert "no structuredContent" in texts[2]


@pytest.mark.parametrize(
    ("model", "fields"),
    [
        (types.TextContent, {"type": "text", "text": "hi"}),
        (Forwarded, {"content": []}),
        (Forwarded, {"content": [], "structured_content": {"n": 1}, "is_error": True}),
        (Forwarded, {"content": [], "meta": {"k": "v"}, "result_type": "complete"}),
        (types.CallToolRequestParams, {"name": "t", "arguments": None, "meta": None}),
        (types.CallToolRequestParams, {"name": "t", "arguments": {"a": 1}}),
    ],
)
def test_a_model_is_constructed_as_pydantic_constructs_it(
    model: type[BaseModel], fields: dict[str, Any]
) -> None:
    """``constructed`` (pydantic's ``model_construct`` at about a quarter of its cost,
    from a template) makes the same model: the same fields, defaults, fields set, extra
    and private attributes, and the same dump — for the models a forwarded call makes.
    Should pydantic change how a model holds these, this says so."""
    required = {
        name: fields[name] for name in ("type", "text", "content", "name") if name in fields
    }
    made = constructed(model.model_construct(**required), fields)
    reference = model.model_construct(**fields)
    assert type(made) is model
    assert made.__dict__ == reference.__dict__
    assert made.model_fields_set == reference.model_fields_set
    assert made.__pydantic_extra__ == reference.__pydantic_extra__
    assert made.__pydantic_private__ == reference.__pydantic_private__
    assert made.model_dump(by_alias=True, exclude_unset=True) == reference.model_dump(
        by_alias=True, exclude_unset=True
    )
    assert made == reference


async def test_the_direct_route_makes_the_context_the_sdk_s_runner_makes(
    lanes: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain call the gateway's direct route answers past the SDK's runner reaches
    the gateway's handler with the context the runner makes for it — over HTTP (the
    request's ASGI scope and stream callbacks included) and over stdio."""
    seen: list[dict[str, Any]] = []
    answer, directly = PlainCalls._answer, PlainCalls.served

    async def spied(self: PlainCalls, ctx: Any) -> Any:
        session, scope = ctx.session, getattr(ctx.request, "scope", {})
        seen.append(
            {
                **{k: v for k, v in vars(ctx).items() if k not in ("session", "request")},
                # (each gateway on a port of its own, each exchange from a port of its own
                # and with an object of its own)
                "scope": {k: v for k, v in scope.items() if k not in _OWN},
                "headers": [(k, v) for k, v in scope.get("headers", []) if k != b"host"],
                "extensions": sorted(scope.get("extensions", {})),
                "session": type(session),
                "capabilities": session.client_capabilities,
                "client": session.client_params,
            }
        )
        return await answer(self, ctx)

    async def not_directly(self: PlainCalls, *args: Any) -> None:
        return None

    monkeypatch.setattr(PlainCalls, "_answer", spied)
    body, headers = shaped({"content": [TEXT]})
    envelope = raw_call("x", {})[0]["params"]["_meta"]
    listing = {"jsonrpc": "2.0", "id": 0, "method": "tools/list", "params": {"_meta": envelope}}
    for direct in (True, False):
        monkeypatch.setattr(PlainCalls, "served", directly if direct else not_directly)
        async with gateway(True) as url:
            await exchange(url, [(body, headers)])
        async with stdio_gateway(True) as (ask, _):
            await ask(listing)
            await ask(call(1, "shaped_shape", {"result": {"content": [TEXT]}}))
    over_http, over_stdio, through_runner_http, through_runner_stdio = seen
    assert over_http == through_runner_http and over_stdio == through_runner_stdio
    assert over_http["scope"]["path"] == "/mcp" and over_stdio["scope"] == {}
    assert over_http["close_sse_stream"] is None and over_http["method"] == "tools/call"
    assert lanes["direct"] == ["complete", "complete"]  # (the spy's, on the first round)


#: What differs between two gateways' HTTP requests, whatever route they take.
_OWN = frozenset({"client", "server", "headers", "extensions"})


async def test_a_cleanup_put_on_the_connection_on_the_direct_route_still_runs(
    lanes: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a handler puts on its request's connection's exit stack on the direct
    route is unwound as the request ends, as ``serve_one`` unwinds it."""
    undone: list[str] = []
    answer = PlainCalls._answer

    async def pushing(self: PlainCalls, ctx: Any) -> Any:
        connection_of(ctx).exit_stack.callback(undone.append, "unwound")
        return await answer(self, ctx)

    monkeypatch.setattr(PlainCalls, "_answer", pushing)
    envelope = raw_call("x", {})[0]["params"]["_meta"]
    listing = {"jsonrpc": "2.0", "id": 0, "method": "tools/list", "params": {"_meta": envelope}}
    async with stdio_gateway(True) as (ask, _):
        await ask(listing)
        told = await ask(call(1, "shaped_shape", {"result": {"content": [TEXT]}}))
    assert told["result"]["content"] == [TEXT]
    assert lanes["direct"] == ["complete"] and undone == ["unwound"]
