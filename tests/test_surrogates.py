"""A lone surrogate from a caller takes no connection down.

``"\\ud800"`` — half of a UTF-16 surrogate pair — is valid JSON, and Python reads it as a
string that no UTF-8, so no JSON text written out, can hold. In a tool's arguments it is
refused at the gate as ``ToolArgumentsInvalid`` naming its path, before anything is sent.
Any other message holding what cannot be written (a resource URI, a prompt's arguments,
an answer to the server's own question) fails alone, in its sender's task, on every
transport: never the writer, so another caller's call in flight on the same connection is
answered and the server is not restarted. The gateway — over stdio and over HTTP, fast
lane and SDK path — answers its caller with the same refusal.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
import trio
from mcp import Client
from mcp.shared.message import SessionMessage

from supervisor import open_supervisor
from supervisor.config import load_config
from supervisor.config._limits import Limits
from supervisor.errors import (
    RequestUnencodable,
    ServerRequestError,
    ToolArgumentsInvalid,
)
from supervisor.testing.servers import count_executions, make_server, start_http, stdio_params
from supervisor.tools._validate import validate_arguments
from supervisor.transports._encoding import encode
from supervisor.transports._open import open_transport
from supervisor.transports._ws import serve_websocket
from tests.probes import until

SURROGATE = "\ud800"
#: what the gate says of a string whose first lone surrogate is its ``n``-th character
HOLDS = (
    "holds a lone surrogate (\\ud800 at character {n}: half of a UTF-16 pair), which JSON "
    "text cannot carry"
)
TRANSPORTS = ["stdio", "http", "sse", "ws"]
#: a bound well under the 30 s an SSE call hung for before the fix
WAIT = 20
REFERENCE = Path(__file__).with_name("reference_server.py")
TOKEN = "surrogate-test-token-0123456789abcdef"


@asynccontextmanager
async def backing(
    kind: str, transport: str, tmp_path: Path
) -> AsyncIterator[tuple[dict[str, object], Path]]:
    """A config entry for fixture server ``kind`` over ``transport`` — its own process over
    stdio, served by this one otherwise — and the file where it records each execution."""
    count = tmp_path / f"{kind}-{transport}.count"
    async with trio.open_nursery() as nursery:
        if transport == "stdio":
            command, args = stdio_params(kind, count_file=count)  # type: ignore[arg-type]
            entry: dict[str, object] = {"command": command, "args": args}
        elif transport in ("http", "sse"):
            server = make_server(kind, count_file=count)  # type: ignore[arg-type]
            served = await start_http(nursery, server, transport=transport)  # type: ignore[arg-type]
            entry = {"url": served.url, "type": transport}
        else:
            server = make_server(kind, count_file=count)  # type: ignore[arg-type]
            entry = {"url": await nursery.start(serve_websocket, server), "type": "ws"}
        yield {**entry, "approve": False}, count
        nursery.cancel_scope.cancel()


def test_each_lone_surrogate_is_named_by_its_path_whatever_the_schema() -> None:
    """In a value or in a key, at any depth: each is an error of its own, at the path a
    schema error would name (a key as its escaped ``repr``), saying where it is but not
    the text around it — and with the schema's own errors, in path order. Whole
    characters outside the BMP (an emoji, as JSON's surrogate pair escape reads) are
    text like any other."""
    tool = types.Tool(
        name="store",
        input_schema={
            "type": "object",
            "properties": {"n": {"type": "integer"}, "items": {"type": "array"}},
        },
    )
    arguments = {
        "items": [{"name": "ok"}, {"name": "fine 😀"}, {"name": f"secret {SURROGATE}"}],
        f"key{SURROGATE}": {"\udfff": 1},
        "n": "seven",
    }
    with pytest.raises(ToolArgumentsInvalid) as refused:
        validate_arguments(tool, arguments)
    key = "this key " + HOLDS.format(n=3)
    assert refused.value.errors == [
        ("['key\\ud800']", key),
        ("['key\\ud800']['\\udfff']", "this key " + HOLDS.format(n=0).replace("d800", "dfff")),
        ("items[2].name", HOLDS.format(n=7)),
        ("n", "'seven' is not of type 'integer'"),
    ]
    said = str(refused.value)
    said.encode()  # it can be written anywhere: every surrogate is escaped
    assert "secret" not in said
    validate_arguments(tool, json.loads('{"items": ["\\ud83d\\ude00"]}'))  # a whole emoji


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_lone_surrogate_in_arguments_is_refused_before_anything_is_sent(
    transport: str, tmp_path: Path
) -> None:
    """A call whose argument holds a lone surrogate raises ``ToolArgumentsInvalid`` naming
    it, at once: the server executes nothing, the connection stays (no disconnect, no
    restart, the same process), another caller's call in flight on it is answered, and
    so is the next call."""
    async with backing("slow", transport, tmp_path) as (entry, count):
        async with open_supervisor({"mcpServers": {"s": entry}}) as sup:
            await sup.connect_all()
            pid = sup.status()["s"].pid
            held: list[str] = []

            async def other_caller() -> None:
                held.append((await sup.call("s_hold", {"seconds": 1.0})).text)

            async with sup.subscribe("mcp.disconnected", "supervisor.child.*") as events:
                with trio.fail_after(WAIT):
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(other_caller)
                        await until(lambda: count_executions(count)["hold"] == 1)  # running
                        with pytest.raises(ToolArgumentsInvalid) as refused:
                            await sup.call("s_echo", {"text": f"half an emoji {SURROGATE}"})
                    assert held == ["held 1.0"]
                    assert (await sup.call("s_echo", {"text": "a whole 😀"})).text == "a whole 😀"
                record = sup.status()["s"]
                assert events.drain() == []
        assert (refused.value.server, refused.value.errors) == ("s", [("text", HOLDS.format(n=14))])
        assert count_executions(count) == Counter({"hold": 1, "echo": 1})
        assert (record.status, record.restarts, record.pid) == ("connected", 0, pid)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_request_that_cannot_be_written_fails_alone_in_its_sender(
    transport: str, tmp_path: Path
) -> None:
    """Past the gate — an SDK client on the supervisor's own transport, writing a call the
    gate would have refused: the request raises ``RequestUnencodable`` in its sender's
    task, naming where it holds what cannot be written; it was not sent (the server
    executes nothing), the connection is not closed, the request in flight on it is
    answered, and so is the next one."""
    async with backing("slow", transport, tmp_path) as (entry, count):
        config = load_config({"mcpServers": {"s": entry}}).servers["s"]
        transport_ = open_transport(config, Limits())
        held: list[str] = []
        async with Client(transport_) as client, trio.open_nursery() as nursery:  # type: ignore[arg-type]

            async def other_caller() -> None:
                result = await client.call_tool("hold", {"seconds": 1.0})
                held.append(result.content[0].text)  # type: ignore[union-attr]

            nursery.start_soon(other_caller)
            await until(lambda: count_executions(count)["hold"] == 1, WAIT)
            with trio.fail_after(WAIT), pytest.raises(RequestUnencodable) as refused:
                await client.call_tool("echo", {"text": SURROGATE})
            assert not transport_.closed.is_set()
            after = await client.call_tool("echo", {"text": "next"})
    assert (refused.value.method, refused.value.server) == ("tools/call", "s")
    assert refused.value.errors == [("arguments.text", HOLDS.format(n=0))]
    said = f"'tools/call' to MCP server 's' was not sent: arguments.text: {HOLDS.format(n=0)}"
    assert str(refused.value) == said
    assert held == ["held 1.0"]
    assert after.content[0].text == "next"  # type: ignore[union-attr]
    assert count_executions(count) == Counter({"hold": 1, "echo": 1})


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_uri_or_prompt_argument_that_cannot_be_written_is_refused_unsent(
    transport: str, tmp_path: Path
) -> None:
    """A resource read, a subscription and a prompt holding a lone surrogate each raise
    ``RequestUnencodable`` naming where — the read and the subscription before anything
    is asked (the SDK's client would write a read's URI into a header first; a
    subscription is asked again of every new connection) — and the connection serves
    the next of each, never restarted."""
    async with backing("rich", transport, tmp_path) as (entry, _):
        async with open_supervisor({"mcpServers": {"s": entry}}) as sup:
            await sup.connect_all()
            pid = sup.status()["s"].pid
            async with sup.subscribe("mcp.disconnected", "supervisor.child.*") as events:
                with trio.fail_after(WAIT):
                    with pytest.raises(RequestUnencodable) as read:
                        await sup.read_resource(f"note://{SURROGATE}")
                    with pytest.raises(RequestUnencodable) as subscribed:
                        await sup.subscribe_resource(f"note://{SURROGATE}", server="s")
                    with pytest.raises(RequestUnencodable) as prompt:
                        await sup.get_prompt("s_summarize", {"title": SURROGATE})
                    text = (await sup.read_resource("note://hello")).contents[0].text  # type: ignore[union-attr]
                    got = await sup.get_prompt("s_summarize", {"title": "Ada"})
                record = sup.status()["s"]
                assert events.drain() == []
        assert [(e.value.method, e.value.errors) for e in (read, subscribed, prompt)] == [
            ("resources/read", [("uri", HOLDS.format(n=7))]),
            ("resources/subscribe", [("uri", HOLDS.format(n=7))]),
            ("prompts/get", [("arguments.title", HOLDS.format(n=0))]),
        ]
        assert text == "note hello"
        assert "Summarize note Ada" in got.messages[0].content.text  # type: ignore[union-attr]
        assert (record.status, record.restarts, record.pid) == ("connected", 0, pid)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_answer_to_the_server_that_cannot_be_written_fails_alone(mode: str) -> None:
    """An elicitation answer holding a lone surrogate (the embedder's here; a gateway
    caller's relayed, alike). On the session-based protocol the server is answered with
    an error in its place — not left waiting for an answer that would never come — and
    the call that asked is answered with what the server made of it; on 2026-07-28 the
    call that would carry the answer back is not sent. Either way the connection stays."""

    async def handler(context: object, params: object) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"note": f"yes {SURROGATE}"})

    ref = {"command": sys.executable, "args": [str(REFERENCE)], "approve": False}
    async with open_supervisor(
        {"mcpServers": {"ref": ref}}, elicitation_callback=handler, mode=mode
    ) as sup:
        await sup.connect_all()
        pid = sup.status()["ref"].pid
        with (
            trio.fail_after(WAIT),
            pytest.raises((ServerRequestError, RequestUnencodable)) as failed,
        ):
            await sup.call("ref_confirm")
        assert (await sup.call("ref_chatter")).text == "chattered"
        record = sup.status()["ref"]
    assert (record.status, record.restarts, record.pid) == ("connected", 0, pid)
    if mode == "legacy":
        assert isinstance(failed.value, ServerRequestError)
        assert failed.value.code == types.INTERNAL_ERROR
        said = f"the answer could not be sent: content.note: {HOLDS.format(n=4)}"
        assert said in str(failed.value)
    else:
        assert isinstance(failed.value, RequestUnencodable)
        path = "inputResponses.confirm.content.note"
        assert failed.value.errors == [(path, HOLDS.format(n=4))]


def test_what_cannot_be_written_fails_as_its_kind_of_message_should() -> None:
    """A request raises (a value JSON has no type for is named at ``(root)``, the reason
    escaped); an answer becomes an error for the same id; a notification is dropped;
    anything else is written as the SDK writes it."""
    request = types.JSONRPCRequest(
        jsonrpc="2.0", id=1, method="tools/call", params={"name": "x", "arguments": {"o": object()}}
    )
    with pytest.raises(RequestUnencodable) as refused:
        encode(SessionMessage(request), server="s")
    ((path, why),) = refused.value.errors
    assert path == "(root)" and why.startswith("cannot be written as JSON (")

    answer = types.JSONRPCResponse(jsonrpc="2.0", id=7, result={"content": {"n": SURROGATE}})
    encoded = encode(SessionMessage(answer))
    assert encoded is not None
    replaced, text = encoded
    assert isinstance(replaced.message, types.JSONRPCError) and replaced.message.id == 7
    assert json.loads(text)["error"] == {
        "code": types.INTERNAL_ERROR,
        "message": f"the answer could not be sent: content.n: {HOLDS.format(n=0)}",
    }

    notification = types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/roots/list_changed", params={"x": SURROGATE}
    )
    assert encode(SessionMessage(notification)) is None

    plain = SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=2, method="ping"))
    assert encode(plain) == (plain, '{"jsonrpc":"2.0","id":2,"method":"ping"}')


# -- the gateway ----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _gateway_config(tmp_path: Path) -> Path:
    """A config of one backing server, ``echo`` (the ``rich`` fixture: tools, resources
    and prompts), its tools approved."""
    command, args = stdio_params("rich")
    config = tmp_path / "mcp.json"
    servers = {"echo": {"command": command, "args": args, "autoApprove": True}}
    config.write_text(json.dumps({"mcpServers": servers}))
    return config


def _refusal(answer: dict[str, Any], n: int) -> None:
    """``answer`` is the invalid-arguments tool error for ``text``'s surrogate at ``n``."""
    result = answer["result"]
    assert result["isError"] is True
    assert result["_meta"]["mcp-supervisor/error"] == {
        "type": "ToolArgumentsInvalid",
        "server": "echo",
        "effect": "not executed",
        "errors": [{"path": "text", "message": HOLDS.format(n=n)}],
    }
    assert result["content"][0]["text"] == f"tool 'echo_echo': text: {HOLDS.format(n=n)}"


async def test_the_stdio_gateway_answers_a_surrogate_with_the_refusal(tmp_path: Path) -> None:
    """``serve`` over stdio, a client writing its lines itself: a call whose argument
    holds ``\\ud800`` (which pydantic's parser refuses, JSON does not) is answered with
    the invalid-arguments tool error — not dropped unanswered — and a read of a URI or
    a prompt holding one with ``-32602`` naming it; the backing server executed nothing
    and was not restarted (its count of executions goes on)."""
    config = _gateway_config(tmp_path)
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "supervisor", "serve", "--config", str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None and process.stdout is not None
    buffer = b""

    async def ask(line: str) -> dict[str, Any]:
        nonlocal buffer
        await process.stdin.send_all(line.encode() + b"\n")  # type: ignore[union-attr]
        while b"\n" not in buffer:
            chunk = await process.stdout.receive_some()  # type: ignore[union-attr]
            assert chunk, "the gateway ended its output"
            buffer += chunk
        answer, _, buffer = buffer.partition(b"\n")
        return json.loads(answer)

    def call(request_id: int, name: str, arguments: str) -> str:
        return (
            f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call",'
            f'"params":{{"name":"{name}","arguments":{arguments}}}}}'
        )

    hello = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    initialize = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
    initialized = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
    try:
        with trio.fail_after(60):
            await ask(initialize)
            await process.stdin.send_all(initialized)
            ok = await ask(call(1, "echo_echo", '{"text":"ok"}'))
            assert ok["result"]["content"][0]["text"] == "ok"
            refused = await ask(call(2, "echo_echo", '{"text":"half \\ud800"}'))
            unread = await ask(
                '{"jsonrpc":"2.0","id":3,"method":"resources/read",'
                '"params":{"uri":"note://\\ud800"}}'
            )
            unasked = await ask(
                '{"jsonrpc":"2.0","id":4,"method":"prompts/get",'
                '"params":{"name":"echo_summarize","arguments":{"title":"\\ud800"}}}'
            )
            counted = await ask(call(5, "echo_count", "{}"))
        _refusal(refused, n=5)
        assert unread["error"]["code"] == unasked["error"]["code"] == types.INVALID_PARAMS
        said = f"'resources/read' to MCP server 'echo' was not sent: uri: {HOLDS.format(n=7)}"
        assert unread["error"]["message"] == said
        said = (
            f"'prompts/get' to MCP server 'echo' was not sent: arguments.title: {HOLDS.format(n=0)}"
        )
        assert unasked["error"]["message"] == said
        assert counted["result"]["content"][0]["text"] == "1"  # the same process, one echo
    finally:
        await process.stdin.aclose()
        with trio.move_on_after(30):
            await process.wait()
        with suppress(ProcessLookupError):
            process.kill()


def _modern_request(
    method: str, name: str, arguments: str, **meta: object
) -> tuple[bytes, dict[str, str]]:
    """A 2026-07-28 request ``method`` of ``name`` (a tool or a prompt) as raw JSON
    (``arguments`` as written), with ``meta`` in its ``_meta``, and its headers."""
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        **meta,
    }
    body = (
        f'{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{{"name":"{name}",'
        f'"arguments":{arguments},"_meta":{json.dumps(envelope)}}}}}'
    )
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Mcp-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
        "Mcp-Name": name,
    }
    return body.encode(), headers


def _modern_call(arguments: str, **meta: object) -> tuple[bytes, dict[str, str]]:
    """A 2026-07-28 ``tools/call`` of ``echo_echo`` (see :func:`_modern_request`)."""
    return _modern_request("tools/call", "echo_echo", arguments, **meta)


def _answer(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC answer of a response: its JSON body, or its event stream's last."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])
    return response.json()


async def test_the_http_gateway_answers_a_surrogate_with_the_refusal(tmp_path: Path) -> None:
    """``serve --http``, a 2026-07-28 call posted raw: the fast lane's shape (which its
    msgspec decoder refuses, so the SDK's path answers it) and one with a progress token
    (the SDK's path from the start) are both answered with the invalid-arguments tool
    error, and a prompt holding one with ``-32602`` naming it; the backing server keeps
    its process and executed nothing of them."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    command = [
        sys.executable, "-m", "supervisor", "serve", "--config", str(_gateway_config(tmp_path)),
        "--http", f"127.0.0.1:{port}", "--token-file", str(token_file),
    ]  # fmt: skip
    process = await trio.lowlevel.open_process(command, stderr=subprocess.PIPE)
    assert process.stderr is not None
    err = b""
    try:
        with trio.fail_after(60):
            while url.encode() not in err:
                chunk = await process.stderr.receive_some()
                assert chunk, err.decode()
                err += chunk
            async with httpx2.AsyncClient(timeout=WAIT) as http:
                status = f"http://127.0.0.1:{port}/status"
                auth = {"Authorization": f"Bearer {TOKEN}"}

                def echo_of(document: dict[str, Any]) -> dict[str, Any]:
                    return next(s for s in document["servers"] if s["server"] == "echo")

                before = echo_of((await http.get(status, headers=auth)).json())
                answers = []
                for meta in ({}, {"progressToken": "p-1"}):
                    body, headers = _modern_call('{"text":"\\ud800"}', **meta)
                    answers.append(_answer(await http.post(url, content=body, headers=headers)))
                body, headers = _modern_call('{"text":"fine"}')
                fine = _answer(await http.post(url, content=body, headers=headers))
                body, headers = _modern_request(
                    "prompts/get", "echo_summarize", '{"title":"\\ud800"}'
                )
                unasked = _answer(await http.post(url, content=body, headers=headers))
                body, headers = _modern_request("tools/call", "echo_count", "{}")
                counted = _answer(await http.post(url, content=body, headers=headers))
                after = echo_of((await http.get(status, headers=auth)).json())
        for answer in answers:
            _refusal(answer, n=0)
        assert fine["result"]["content"][0]["text"] == "fine"
        assert counted["result"]["content"][0]["text"] == "1"  # "fine" alone ran
        assert unasked["error"]["code"] == types.INVALID_PARAMS
        said = (
            f"'prompts/get' to MCP server 'echo' was not sent: arguments.title: {HOLDS.format(n=0)}"
        )
        assert unasked["error"]["message"] == said
        assert before["pid"] is not None
        assert (after["pid"], after["restarts"]) == (before["pid"], 0)
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(30):
            await process.wait()
    finally:
        with suppress(ProcessLookupError):
            process.kill()
        await process.stderr.aclose()
