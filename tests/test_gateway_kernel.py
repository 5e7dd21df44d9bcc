"""The SDK's kernel as the gateway's fast lanes run it (supervisor/gateway/_kernel.py):
``serve_once`` answers what the SDK's ``serve_one`` answers, and unwinds a connection's
exit stack as ``serve_one`` does — but only when something was put on it."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp.server.connection import Connection
from mcp.server.lowlevel import Server
from mcp.server.runner import serve_one
from mcp.shared.exceptions import MCPError
from mcp.shared.transport_context import TransportContext

from supervisor import _sdk
from supervisor.gateway import _kernel
from supervisor.gateway._fast import Exchange
from supervisor.gateway._kernel import WatchedStack, serve_once

ENVELOPE = {"name": "t", "version": "1"}, {}


def _server(undone: list[str], push: bool, wait: trio.Event | None = None) -> Server[Any]:
    """A server whose ``tools/call`` answers ``said: NAME`` (``fail`` raises an
    ``MCPError``); with ``push``, a middleware puts a callback and an async one on the
    request's connection's exit stack, recording in ``undone`` when each runs."""

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == "fail":
            raise MCPError(types.INVALID_PARAMS, "no such tool")
        if wait is not None:
            await wait.wait()
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"said: {params.name}")]
        )

    server: Server[Any] = Server("k", on_call_tool=call_tool)

    async def pushing(ctx: Any, call_next: Any) -> Any:
        stack = _sdk.request_connection(ctx.session).exit_stack
        stack.callback(undone.append, "callback")

        async def later() -> None:
            undone.append("async")

        stack.push_async_callback(later)
        return await call_next(ctx)

    if push:
        server.middleware.append(pushing)
    return server


def _exchange() -> Exchange:
    transport = TransportContext(kind="jsonrpc", can_send_request=False)
    return Exchange(transport=transport, request_id=1, message_metadata=None)


def _params(name: str) -> dict[str, Any]:
    meta = {
        types.PROTOCOL_VERSION_META_KEY: "2026-07-28",
        types.CLIENT_CAPABILITIES_META_KEY: {},
    }
    return {"name": name, "arguments": {}, "_meta": meta}


async def _both(server: Server[Any], name: str) -> list[Any]:
    """What ``serve_once`` and then ``serve_one`` answer (or raise) for a call of ``name``."""
    said = []
    for serve in ("once", "one"):
        connection = Connection.from_envelope("2026-07-28", *ENVELOPE)
        try:
            if serve == "once":
                result = await serve_once(
                    server, _exchange(), "tools/call", _params(name), connection, None
                )
            else:
                result = await serve_one(
                    server,
                    _exchange(),
                    "tools/call",
                    _params(name),
                    connection=connection,
                    lifespan_state=None,
                )
        except MCPError as exc:
            said.append(("raised", exc.error.code, exc.error.message))
        else:
            said.append(result)
    return said


@pytest.mark.parametrize("push", [False, True], ids=["nothing-pushed", "pushed"])
async def test_it_answers_and_unwinds_as_the_sdk_s_kernel_does(
    monkeypatch: pytest.MonkeyPatch, push: bool
) -> None:
    """The same result, the same error, and the same cleanups run, as ``serve_one``;
    the shielded unwinding is entered only when a cleanup was put on the stack."""
    unwound: list[Connection] = []
    unwind = _kernel.aclose_shielded

    async def counted(connection: Connection) -> None:
        unwound.append(connection)
        await unwind(connection)

    monkeypatch.setattr(_kernel, "aclose_shielded", counted)
    undone: list[str] = []
    server = _server(undone, push)
    ours, theirs = await _both(server, "hi")
    assert ours == theirs and ours["content"][0]["text"] == "said: hi"
    assert undone == (["async", "callback"] * 2 if push else [])
    failed = await _both(server, "fail")
    assert failed[0] == failed[1] == ("raised", types.INVALID_PARAMS, "no such tool")
    assert len(unwound) == (2 if push else 0)  # (serve_once's only)


async def test_a_cancelled_request_still_runs_its_cleanups() -> None:
    """A request cancelled while its handler runs still unwinds what was put on its
    connection's exit stack (the shield ``serve_one`` unwinds under)."""
    undone: list[str] = []
    server = _server(undone, push=True, wait=trio.Event())
    connection = Connection.from_envelope("2026-07-28", *ENVELOPE)
    with trio.move_on_after(0.05) as scope:
        await serve_once(server, _exchange(), "tools/call", _params("hi"), connection, None)
    assert scope.cancelled_caught
    assert undone == ["async", "callback"]


async def test_a_request_is_freed_as_it_ends_not_by_the_cyclic_collector() -> None:
    """Nothing of a served request is left in a reference cycle: its connection (and
    the runner that held it) go as the last reference to them does, the collector off."""
    server = _server([], push=False)
    connection = Connection.from_envelope("2026-07-28", *ENVELOPE)
    freed = weakref.ref(connection)
    gc.disable()
    try:
        result = await serve_once(
            server, _exchange(), "tools/call", _params("hi"), connection, None
        )
        assert result["content"][0]["text"] == "said: hi"
        del connection
        assert freed() is None
    finally:
        gc.enable()


async def test_the_watched_stack_says_whether_anything_was_put_on_it() -> None:
    """Each public way onto an exit stack marks it used; a fresh one is not."""
    assert not WatchedStack().used
    ways = [
        lambda s: s.push(lambda *exc: None),
        lambda s: s.enter_context(trio.CancelScope()),
        lambda s: s.callback(print),
        lambda s: s.push_async_exit(_noop_exit),
        lambda s: s.push_async_callback(_noop),
    ]
    for way in ways:
        stack = WatchedStack()
        way(stack)
        assert stack.used
        await stack.aclose()
    stack = WatchedStack()
    await stack.enter_async_context(_Async())
    assert stack.used
    await stack.aclose()


async def _noop() -> None:
    pass


async def _noop_exit(*exc: object) -> None:
    pass


class _Async:
    async def __aenter__(self) -> None:
        pass

    async def __aexit__(self, *exc: object) -> None:
        pass


_ENVELOPES = [
    ("2026-07-28", {"name": "t", "version": "1"}, {}),
    ("2026-07-28", {"name": "t", "version": "1"}, {"elicitation": {}, "roots": {}}),
    ("2026-07-28", None, {"sampling": {}}),  # (no client info: no client params)
    ("2026-07-28", {"name": 3}, {"elicitation": 5}),  # (mis-shaped: as not supplied)
    ("2026-07-28", {"name": "t", "version": "1", "x": "\ud800"}, {}),  # (not JSON text)
]


@pytest.mark.parametrize("envelope", _ENVELOPES, ids=range(len(_ENVELOPES)))
async def test_a_connection_is_the_sdk_s_from_envelope_made_again(envelope: Any) -> None:
    """``from_envelope`` makes what ``Connection.from_envelope`` makes — the same
    attributes, equal — the first time an envelope is seen and each time after (of the
    models it read the first time): each connection its own state and exit stack."""
    theirs = vars(Connection.from_envelope(*envelope))
    made = [_kernel.from_envelope(*envelope) for _ in range(3)]
    own = ("state", "exit_stack")
    for connection in made:
        ours = vars(connection)
        assert ours.keys() == theirs.keys()
        for name, value in ours.items():
            if name == "initialized":
                assert value.is_set() and theirs[name].is_set()
            elif name == "exit_stack":
                assert type(value) is type(theirs[name])
            else:
                assert value == theirs[name], name
        assert connection.has_standalone_channel is False
    for name in own:
        assert len({id(getattr(connection, name)) for connection in made}) == len(made)
    made[0].state["mine"] = True
    assert made[1].state == {}
    if envelope[1] == {"name": "t", "version": "1"}:  # read once: its models made again
        assert made[1].client_capabilities is made[2].client_capabilities
