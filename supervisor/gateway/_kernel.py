"""The SDK's kernel for one request, as the gateway's fast lanes run it.

:func:`mcp.server.runner.serve_one` serves one request on a born-ready connection: a
``ServerRunner`` runs it through the server's middleware and handler, then the
connection's ``exit_stack`` is unwound under a shielded, bounded cancel scope — so that a
cleanup a handler put there runs even when the request is cancelled. :func:`serve_once`
does exactly that, but unwinds the stack only when something was put on it
(:class:`WatchedStack`): a plain tool call puts nothing there, and the shielded scope
alone cost about a twentieth of a call through the gateway. Nothing of the request is
left in a reference cycle: it is freed as the request ends, not by the collector. A
plain ``tools/call`` takes the gateway's direct route past the runner when its
middleware would only pass it on (:meth:`PlainCalls.served
<._plain_calls.PlainCalls.served>`).

Each request's connection is the SDK's ``Connection.from_envelope`` (:func:`from_envelope`),
made without reading its envelope's client info and capabilities into the SDK's models
again when the same envelope was read before: a client sends the same one with each
request, and reading it cost about a twentieth of the gateway's work for a call.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any, Protocol

import msgspec
from mcp.server.connection import Connection
from mcp.server.runner import ServerRunner, aclose_shielded

__all__ = ["DirectRoute", "WatchedStack", "from_envelope", "serve_once"]

#: How many different envelopes the connection's identity is kept for (a client sends one)
_ENVELOPES = 256
_ENCODER = msgspec.json.Encoder()
#: An envelope (its protocol version, client info and capabilities, as JSON) -> what
#: ``Connection.from_envelope`` made of it: the connection's outbound channel, client
#: params, client capabilities (models that nothing changes once made) and ``initialized``
#: event (set: it never is cleared)
_IDENTITIES: dict[bytes, tuple[Any, Any, Any, Any]] = {}


def from_envelope(protocol_version: str, client_info: Any, client_capabilities: Any) -> Connection:
    """``Connection.from_envelope(protocol_version, client_info, client_capabilities)``
    (the raw envelope values): a new born-ready connection, whose client params and
    capabilities are the models that call made of the same envelope before (read once,
    the first time it is seen), and whose own state (``state``, ``exit_stack``) is new."""
    try:
        key = _ENCODER.encode((protocol_version, client_info, client_capabilities))
    except (TypeError, ValueError, OverflowError):
        return Connection.from_envelope(protocol_version, client_info, client_capabilities)
    known = _IDENTITIES.get(key)
    if known is None:
        made = Connection.from_envelope(protocol_version, client_info, client_capabilities)
        if len(_IDENTITIES) >= _ENVELOPES:
            _IDENTITIES.clear()
        _IDENTITIES[key] = (
            made.outbound,
            made.client_params,
            made.client_capabilities,
            made.initialized,
        )
        return made
    outbound, client_params, capabilities, initialized = known
    # What ``Connection.__init__`` and ``from_envelope`` set, of what they made before
    # (a new ``anyio.Event`` alone cost as much as the rest), set through its public
    # attributes: tests/test_gateway_kernel.py holds them to those the SDK's sets.
    made = Connection.__new__(Connection)
    made.outbound = outbound
    made.protocol_version = protocol_version
    made.session_id = None
    made.client_params = client_params
    made.client_capabilities = capabilities
    made.initialized = initialized
    made.state = {}
    made.exit_stack = AsyncExitStack()
    return made


class DirectRoute(Protocol):
    """What answers a plain ``tools/call`` past the runner, if it can (``None``: it
    cannot): :meth:`PlainCalls.served <._plain_calls.PlainCalls.served>`."""

    async def served(
        self, dctx: Any, connection: Connection, params: Mapping[str, Any], lifespan_state: Any
    ) -> dict[str, Any] | None: ...


class WatchedStack(AsyncExitStack):
    """An ``AsyncExitStack`` that says whether anything was ever put on it
    (:attr:`used`), whichever of its public ways it was put there by."""

    #: whether a context, an exit or a callback was put on it
    used = False

    def push(self, exit: Any) -> Any:
        self.used = True
        return super().push(exit)

    def enter_context(self, cm: Any) -> Any:
        self.used = True
        return super().enter_context(cm)

    def callback(self, callback: Any, /, *args: Any, **kwds: Any) -> Any:
        self.used = True
        return super().callback(callback, *args, **kwds)

    def push_async_exit(self, exit: Any) -> Any:
        self.used = True
        return super().push_async_exit(exit)

    async def enter_async_context(self, cm: Any) -> Any:
        self.used = True
        return await super().enter_async_context(cm)

    def push_async_callback(self, callback: Any, /, *args: Any, **kwds: Any) -> Any:
        self.used = True
        return super().push_async_callback(callback, *args, **kwds)


async def serve_once(
    server: Any,
    exchange: Any,
    method: str,
    params: Mapping[str, Any] | None,
    connection: Connection,
    lifespan_state: Any,
) -> dict[str, Any]:
    """``serve_one(server, exchange, method, params, connection=…, lifespan_state=…)``:
    the result of ``method`` with ``params`` on ``connection`` (born ready, from
    ``Connection.from_envelope``), its exit stack unwound as ``serve_one`` unwinds it when
    anything was put on it (see the module docstring) — a plain ``tools/call`` that the
    server's middleware would only pass on served by the gateway's direct route
    (:meth:`PlainCalls.served <._plain_calls.PlainCalls.served>`), which makes the
    context the runner makes."""
    stack = connection.exit_stack = WatchedStack()
    try:
        plain = getattr(server, "plain_calls", None)
        if plain is not None and method == "tools/call" and params is not None:
            answer = await plain.served(exchange, connection, params, lifespan_state)
            if answer is not None:
                return answer
        runner = ServerRunner(server, connection, lifespan_state)
        on_request = runner.on_request
        # A cached property: kept in the runner, the bound method would make a reference
        # cycle (runner → its dict → the method → runner), so that the request's runner,
        # connection and envelope waited for the cyclic collector instead of going with it.
        del runner.on_request
        return await on_request(exchange, method, params)
    finally:
        if stack.used:
            await aclose_shielded(connection)
