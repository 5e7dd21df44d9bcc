"""The fast lane of the gateway over stdio: a 2026-07-28 ``tools/call`` that needs no
stream, served around the SDK's kernel rather than through its stream loop.

Over stdio the SDK's server reads each line into its models, hands it through two
memory streams and its dispatcher to a task of its own, and writes the answer back as a
model. For a call that can emit nothing on the way — the one the HTTP fast lane takes
(:func:`~._fast.streamless`: its ``_meta`` the envelope alone) — the kernel
(:func:`mcp.server.runner.serve_one`'s steps, :mod:`._kernel`: its middleware,
request-state boundary and handler make the answer right) is all that is needed, and it
stays the one path:

* the connection's era is the SDK's: its first request decides it, as the SDK's loop
  decides (2026-07-28 when it carries the envelope and is not ``initialize``), and goes
  to the SDK; only on a 2026-07-28 connection does the lane take anything;
* a request it takes must pass the SDK's envelope ladder
  (:func:`~mcp.shared.inbound.classify_inbound_request`: over stdio, a function of the
  request's ``_meta`` alone, its verdict kept for each one seen), or goes to the SDK,
  which answers it (its error included);
* it is served in a task of its own — the reader's own, when it is alone in what was
  read (:meth:`StdioFastLane.serve`: the reading goes on in a new task, so that the
  request is not left behind a round of trio's scheduler), else a new one
  (:meth:`StdioFastLane.start`) — its answer written as one line, in turn with the
  SDK's (the same writer's lock); a handler's error is mapped as the SDK maps it;
* ``notifications/cancelled`` naming it cancels it, unanswered, as the SDK's loop does:
  it cancels the cancel scope its task runs in, which holds nothing else (a reader
  that serves a request itself reads in a scope of its own for that).

Anything else goes to the SDK's loop, untouched.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import trio
from mcp.shared.inbound import InboundModernRoute
from mcp.shared.transport_context import TransportContext
from mcp_types import PROTOCOL_VERSION_META_KEY

from ._fast import Exchange, Verdicts, answered, streamless

__all__ = ["StdioFastLane", "Taken"]

_DECODER = msgspec.json.Decoder()
_TRANSPORT = TransportContext(kind="jsonrpc", can_send_request=False)


class Taken:
    """A request the lane took, to be served (:meth:`StdioFastLane.serve`, or
    :meth:`StdioFastLane.start`): the message, and the envelope ladder's verdict on it."""

    __slots__ = ("request", "verdict")

    def __init__(self, request: dict[str, Any], verdict: InboundModernRoute) -> None:
        self.request = request
        self.verdict = verdict


class StdioFastLane:
    """Serves the eligible lines of one stdio connection to ``server`` (the gateway's
    SDK server, with ``lifespan_state``) in ``nursery``, each answer written with
    ``write`` (one line, its newline added); see the module docstring."""

    __slots__ = ("_lifespan", "_modern", "_nursery", "_running", "_server", "_verdicts", "_write")

    def __init__(
        self,
        server: Any,
        lifespan_state: Any,
        nursery: trio.Nursery,
        write: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> None:
        self._server = server
        self._lifespan = lifespan_state
        self._nursery = nursery
        self._write = write
        #: the connection's era, once its first request decided it (True: 2026-07-28)
        self._modern: bool | None = None
        #: the requests it serves, by id: each one's cancel scope
        self._running: dict[str | int, trio.CancelScope] = {}
        #: the envelope ladder's verdicts on the requests it reads
        self._verdicts = Verdicts()

    def take(self, line: bytes) -> Taken | bool:
        """Whether the lane takes ``line``: a request it serves (:class:`Taken`, for
        :meth:`serve` or :meth:`start`), or ``True`` for one it acted on here (a
        cancellation); a line it does not take (``False``) goes to the SDK's loop."""
        if self._modern is False:
            return False
        try:
            message = _DECODER.decode(line)
        except (msgspec.DecodeError, ValueError):
            return False
        if not isinstance(message, dict):
            return False
        method = message.get("method")
        if self._modern is None:
            if "id" in message and isinstance(method, str):  # the first request: the SDK's
                params = message.get("params")
                meta = params.get("_meta") if isinstance(params, dict) else None
                enveloped = isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta
                self._modern = method != "initialize" and enveloped
            return False
        if method == "notifications/cancelled":
            return self._cancelled(message.get("params"))
        if not streamless(message):
            return False
        verdict = self._verdicts.of(message)
        request_id = message["id"]
        if not isinstance(verdict, InboundModernRoute) or request_id in self._running:
            return False
        return Taken(message, verdict)

    def start(self, taken: Taken) -> None:
        """Serve ``taken`` in a task of its own, in a cancel scope of its own (a
        cancellation read before the task runs cancels it all the same)."""
        scope = self._running[taken.request["id"]] = trio.CancelScope()
        self._nursery.start_soon(self._served_in, taken, scope)

    async def _served_in(self, taken: Taken, scope: trio.CancelScope) -> None:
        with scope:
            await self.serve(taken, scope)

    def _cancelled(self, params: object) -> bool:
        """A cancellation: of a request the lane serves (then it is cancelled here), or
        of another (the SDK's)."""
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if isinstance(request_id, bool) or not isinstance(request_id, str | int):
            return False
        scope = self._running.get(request_id)
        if scope is None:
            return False
        scope.cancel()
        return True

    async def serve(self, taken: Taken, scope: trio.CancelScope) -> None:
        """Serve ``taken`` in this task, which runs in ``scope`` (entered already, and
        left once this returns: nothing else of the task's is in it), and write its
        answer. A cancellation of the request cancels ``scope`` — until it is answered:
        its answer is then written whole, the request no longer cancellable."""
        request = taken.request
        request_id = request["id"]
        self._running[request_id] = scope
        try:
            exchange = Exchange(_TRANSPORT, request_id, None)
            answer = await answered(self._server, exchange, request, taken.verdict, self._lifespan)
        finally:
            del self._running[request_id]
        await self._write(answer)
