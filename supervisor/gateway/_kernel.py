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
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any, Protocol

from mcp.server.connection import Connection
from mcp.server.runner import ServerRunner, aclose_shielded

__all__ = ["DirectRoute", "WatchedStack", "serve_once"]


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
