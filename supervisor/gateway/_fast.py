"""The fast lane of the HTTP gateway: a 2026-07-28 ``tools/call`` that needs no stream.

A 2026-07-28 request is one POST and one answer. The SDK's entry for it wraps the
exchange in layers a plain call does not need — a Starlette request and response, the
envelope validated as pydantic models, a task group and a memory stream per request in
case the handler streams notifications, SSE framing deferred on a timer. The SDK's
kernel (:func:`mcp.server.runner.serve_one`: its middleware, the request-state boundary
that seals ``requestState``, params validation, the gateway's handler, result sieving and
stamping) is what makes the answer right, and it stays the one path: the fast lane only
takes the exchange around it, for a ``tools/call`` that can emit nothing on the way
(no ``progressToken``, no log-level opt-in) and whose headers need nothing beyond what
the SDK's own public checks say (no ``Mcp-Param-*``, a tool without ``x-mcp-header``):

1. the body, read whole within the SDK's size limit, must decode as one JSON-RPC
   request of that shape; the SDK's transport-security check (``Content-Type``, and on
   loopback ``Host`` and ``Origin``: a function of those headers alone, its verdict kept
   for each of their values) must pass, and so must its envelope ladder
   (:func:`~mcp.shared.inbound.classify_inbound_request`: protocol version in header and
   ``_meta`` agreeing, capabilities present, ``Mcp-Method``/``Mcp-Name`` matching the
   body; a function of those alone, its verdict kept for each seen: :class:`Verdicts`)
   and its duplicated-header check (for a request with a header name twice);
2. the request is served by ``serve_one``'s steps (:mod:`._kernel`) in this task;
   the client going away cancels the call, as on the SDK's path (the gateway's own
   HTTP server says so, through its ``supervisor.gone`` extension; behind another, a
   second task watches for it);
3. the answer is written as ``application/json``, errors with the HTTP status the SDK's
   table gives their code.

Anything else — another method, another era, a session, a request that fails a check —
goes to the SDK's app with its body, untouched, which answers it exactly as it would
have (its error included).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from operator import methodcaller
from typing import Any

import msgspec
import trio
from mcp.server.runner import modern_error_data
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    InboundLadderRejection,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
    x_mcp_header_map,
)
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import PROTOCOL_VERSION_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._sdk import lifespan_state
from ._kernel import from_envelope, serve_once
from ._wire_exchange import GONE

__all__ = [
    "Exchange",
    "FastLane",
    "NoBackChannel",
    "Verdicts",
    "answered",
    "streamless",
    "takes_both",
]

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_JSON = [(b"content-type", b"application/json")]
#: The ``_meta`` keys a fast-lane request may carry: the envelope's, nothing that asks
#: for a stream (``progressToken``, the log level) or for a gateway option.
_ENVELOPE = frozenset(
    {
        PROTOCOL_VERSION_META_KEY,
        "io.modelcontextprotocol/clientInfo",
        "io.modelcontextprotocol/clientCapabilities",
    }
)
_PARAMS = frozenset({"name", "arguments", "_meta"})
_REQUEST = frozenset({"jsonrpc", "id", "method", "params"})
_DECODER = msgspec.json.Decoder()
#: Distinct (Content-Type, Host, Origin) whose transport-security verdict is kept (past
#: that, it forgets them all).
_PASSES = 256
#: How many envelope ladder verdicts a fast lane keeps (a client sends one envelope; past
#: that, it forgets them all)
_VERDICTS = 256
#: Whether each ``Accept`` seen takes both JSON and an event stream (as many kept).
_ACCEPTS: dict[str, bool] = {}
_ENCODER = msgspec.json.Encoder()
#: Whether a header's name is an ``Mcp-Param-*`` one.
_PARAM_HEADER = methodcaller("startswith", "mcp-param-")


class NoBackChannel:
    """What a fast-lane request's dispatch context answers for the channel back to its
    client (the SDK's ``DispatchContext`` protocol): none — a 2026-07-28 server sends its
    client no requests — and no notifications, which the fast lanes take only requests
    that cannot cause."""

    __slots__ = ()

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: Any = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        return None

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        return None


class Exchange(NoBackChannel):
    """The dispatch context of one fast-lane request (the SDK's ``DispatchContext``
    protocol), over HTTP or stdio (:mod:`._stdio_fast`: its transport, no message
    metadata), with no channel back to its client (:class:`NoBackChannel`); its
    ``cancel_requested`` made if it is asked for (never set: a cancellation, or the
    client's going, cancels the request)."""

    __slots__ = ("_cancel_requested", "message_metadata", "request_id", "transport")

    progress_token = None
    can_send_request = False

    def __init__(
        self,
        transport: TransportContext,
        request_id: str | int,
        message_metadata: ServerMessageMetadata | None,
    ) -> None:
        self.transport = transport
        self.request_id = request_id
        self.message_metadata = message_metadata
        self._cancel_requested: trio.Event | None = None

    @property
    def cancel_requested(self) -> trio.Event:
        event = self._cancel_requested
        if event is None:
            event = self._cancel_requested = trio.Event()
        return event


class Verdicts:
    """The SDK's envelope ladder's verdicts
    (:func:`~mcp.shared.inbound.classify_inbound_request`) on the requests a fast lane
    takes (:func:`streamless`'s: a ``tools/call`` whose ``_meta`` is the envelope alone),
    each asked the first time what it reads is seen: the ``_meta``, and over HTTP the
    ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` headers with the method and
    tool name they must match (a client sends the same with each call of a tool). At most
    :data:`_VERDICTS` are kept; past that, all are forgotten."""

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        self._kept: dict[object, InboundModernRoute | InboundLadderRejection] = {}

    def of(
        self, request: dict[str, Any], headers: Mapping[str, str] | None = None
    ) -> InboundModernRoute | InboundLadderRejection:
        """The ladder's verdict on ``request`` (with ``headers``, if it came with any)."""
        params = request["params"]
        try:
            meta = _ENCODER.encode(params["_meta"])
        except (TypeError, ValueError, OverflowError):
            return classify_inbound_request(request, headers=headers)
        key: object = meta
        if headers is not None:
            key = (
                meta,
                headers.get(MCP_PROTOCOL_VERSION_HEADER),
                headers.get(MCP_METHOD_HEADER),
                headers.get(MCP_NAME_HEADER),
                request["method"],
                params["name"],
            )
        kept = self._kept
        verdict = kept.get(key)
        if verdict is None:
            verdict = classify_inbound_request(request, headers=headers)
            if len(kept) >= _VERDICTS:
                kept.clear()
            kept[key] = verdict
        return verdict


class _Request:
    """What the SDK's handlers may read of the HTTP request (``ctx.request``): its ASGI
    ``scope`` and ``headers``."""

    __slots__ = ("headers", "scope")

    def __init__(self, scope: Mapping[str, Any], headers: Mapping[str, str]) -> None:
        self.scope = scope
        self.headers = headers


class FastLane:
    """Serves eligible 2026-07-28 ``tools/call`` POSTs of ``server`` (the gateway's SDK
    server, whose session ``manager`` holds its lifespan state and body limit) around
    the SDK's kernel; see the module docstring. ``input_schema(name)`` is the served
    tool's schema, or ``None``."""

    def __init__(
        self,
        server: Any,
        manager: Any,
        security: Any,
        input_schema: Callable[[str], Mapping[str, Any] | None],
    ) -> None:
        self._server = server
        self._manager = manager
        self._security = TransportSecurityMiddleware(security)
        self._input_schema = input_schema
        self._limit: int = manager.max_request_body_size
        #: id(schema) -> (schema, whether it has no x-mcp-header)
        self._plain: dict[int, tuple[Mapping[str, Any], bool]] = {}
        #: (Content-Type, Host, Origin) -> whether the transport-security check passes
        self._passes: dict[tuple[str | None, str | None, str | None], bool] = {}
        self._verdicts = Verdicts()

    @staticmethod
    def wanted(scope: Mapping[str, Any], headers: Mapping[str, str]) -> bool:
        """Whether the request's head allows the fast lane at all (cheap: headers only)."""
        if scope["method"] != "POST" or headers.get("mcp-method") != "tools/call":
            return False
        if headers.get("mcp-protocol-version") not in MODERN_PROTOCOL_VERSIONS:
            return False
        if "mcp-session-id" in headers or any(map(_PARAM_HEADER, headers)):
            return False
        accept = headers.get("accept", "")
        return _ACCEPTS.get(accept) or takes_both(accept)

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Receive,
        send: Send,
        headers: Mapping[str, str],
        app: Callable[[Any, Any, Any], Awaitable[None]],
    ) -> None:
        """Serve the request (:meth:`wanted` said yes) here, or pass it to ``app``."""
        # our own HTTP server: the body at once when it is all there, the answer written
        # in one step, the call cancelled if the client goes (``None`` behind another)
        gone = (scope.get("extensions") or {}).get(GONE)
        whole = None if gone is None else gone.whole_body(self._limit)
        if whole is not None:
            body, complete = whole, True
        else:
            body, complete = await _read(receive, self._limit)
            if complete is None:
                return  # the client went before its request was all there
        route = self._route(scope, headers, body) if complete else None
        if route is None or not await self._secure(scope, headers):
            await app(scope, _replay(body, complete, receive), send)
            return
        request, verdict = route
        await self._serve(scope, receive, send, headers, request, verdict, gone)

    def _route(
        self, scope: Mapping[str, Any], headers: Mapping[str, str], body: bytes
    ) -> tuple[dict[str, Any], InboundModernRoute] | None:
        """The decoded request and the SDK's verdict on its envelope, if it is one the
        fast lane takes; else ``None``."""
        try:
            request = _DECODER.decode(body)
        except (msgspec.DecodeError, ValueError):
            return None
        if not streamless(request):
            return None
        raw = scope["headers"]
        # (``headers`` folds them by name: as many as there are lines, none twice)
        if len(headers) != len(raw):
            if find_duplicated_routing_header(_raw_headers(raw)) is not None:
                return None
        verdict = self._verdicts.of(request, headers)
        if not isinstance(verdict, InboundModernRoute):
            return None
        if not self._plain_schema(request["params"]["name"]):
            return None
        return request, verdict

    def _plain_schema(self, name: str) -> bool:
        """Whether the tool ``name`` is served and declares no ``x-mcp-header`` (whose
        ``Mcp-Param-*`` headers the SDK's path checks)."""
        schema = self._input_schema(name)
        if schema is None:
            return False
        known = self._plain.get(id(schema))
        if known is not None and known[0] is schema:  # (the schema kept: its id not reused)
            return known[1]
        plain = not x_mcp_header_map(schema)
        if len(self._plain) > 4096:
            self._plain.clear()
        self._plain[id(schema)] = (schema, plain)
        return plain

    async def _secure(self, scope: MutableMapping[str, Any], headers: Mapping[str, str]) -> bool:
        """The SDK's transport-security check (``Content-Type``; ``Host`` and ``Origin``
        on loopback) passes: asked once for each (``Content-Type``, ``Host``,
        ``Origin``) — the first of each, which is all it reads (``headers``, folded by
        name, has each one's last: it is read when no name is there twice)."""
        raw = scope["headers"]
        if len(headers) == len(raw):
            key = (headers.get("content-type"), headers.get("host"), headers.get("origin"))
        else:
            key = _security_headers(raw)
        passes = self._passes.get(key)
        if passes is None:
            from starlette.requests import Request

            passes = await self._security.validate_request(Request(scope), is_post=True) is None
            if len(self._passes) >= _PASSES:
                self._passes.clear()
            self._passes[key] = passes
        return passes

    async def _serve(
        self,
        scope: MutableMapping[str, Any],
        receive: Receive,
        send: Send,
        headers: Mapping[str, str],
        request: dict[str, Any],
        verdict: InboundModernRoute,
        gone: Any,
    ) -> None:
        request_id = request["id"]
        transport = TransportContext(
            kind="streamable-http",
            can_send_request=False,
            headers=headers,
        )
        exchange = Exchange(
            transport=transport,
            request_id=request_id,
            message_metadata=ServerMessageMetadata(request_context=_Request(scope, headers)),
        )
        state = lifespan_state(self._manager)
        answer: dict[str, Any] | None = None
        if gone is not None:  # our own HTTP server: it cancels the call if the client goes
            gone.cancel()
            answer = await answered(self._server, exchange, request, verdict, state)
        else:
            async with trio.open_nursery() as nursery:

                async def until_gone() -> None:
                    while (await receive()).get("type") != "http.disconnect":
                        pass
                    nursery.cancel_scope.cancel()  # the client went: the call is cancelled

                nursery.start_soon(until_gone)
                answer = await answered(self._server, exchange, request, verdict, state)
                nursery.cancel_scope.cancel()
        if answer is None:
            return  # the client is gone
        status = 200
        if "error" in answer:
            status = ERROR_CODE_HTTP_STATUS.get(answer["error"]["code"], 200)
        body = _ENCODER.encode(answer)
        if gone is not None:  # (our own HTTP server writes it in one step)
            await gone.answer(status, body)
            return
        await send({"type": "http.response.start", "status": status, "headers": _JSON})
        await send({"type": "http.response.body", "body": body})


def takes_both(accept: str) -> bool:
    """Whether the ``Accept`` header ``accept`` takes both JSON and an event stream, as
    the SDK's transport asks of a POST (its verdict kept for each value seen)."""
    both = _ACCEPTS.get(accept)
    if both is None:
        taken = {part.split(";")[0].strip().lower() for part in accept.split(",")}
        both = "*/*" in taken or (
            bool(taken & {"application/json", "application/*"})
            and bool(taken & {"text/event-stream", "text/*"})
        )
        if len(_ACCEPTS) >= _PASSES:
            _ACCEPTS.clear()
        _ACCEPTS[accept] = both
    return both


def streamless(request: object) -> bool:
    """Whether ``request`` (decoded JSON) is a ``tools/call`` a fast lane takes: a
    JSON-RPC request of that method, its ``_meta`` the envelope alone (nothing that asks
    for a stream), its ``name`` a string and its ``arguments`` an object."""
    if not isinstance(request, dict) or not request.keys() <= _REQUEST:
        return False
    params, request_id = request.get("params"), request.get("id")
    if request.get("jsonrpc") != "2.0" or request.get("method") != "tools/call":
        return False
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return False
    if not isinstance(params, dict) or not params.keys() <= _PARAMS:
        return False
    meta, name = params.get("_meta"), params.get("name")
    if not isinstance(meta, dict) or not meta.keys() <= _ENVELOPE or not isinstance(name, str):
        return False
    return isinstance(params.get("arguments", {}), dict)


async def answered(
    server: Any,
    exchange: Any,
    request: Mapping[str, Any],
    verdict: InboundModernRoute,
    lifespan_state: Any,
) -> dict[str, Any]:
    """The JSON-RPC answer to the fast-lane ``request`` (``verdict``: the SDK's on its
    envelope), served by the SDK's kernel in ``exchange`` (its dispatch context)."""
    request_id = request["id"]
    connection = from_envelope(
        verdict.protocol_version, verdict.client_info, verdict.client_capabilities
    )
    try:
        result = await serve_once(
            server, exchange, "tools/call", request["params"], connection, lifespan_state
        )
    except Exception as exc:  # noqa: BLE001 — the SDK's mapping of handler errors
        error = modern_error_data(exc).model_dump(mode="json", by_alias=True, exclude_none=True)
        return {"jsonrpc": "2.0", "id": request_id, "error": error}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


async def _read(receive: Receive, limit: int) -> tuple[bytes, bool | None]:
    """The request body, and whether it is all there: ``False`` when it is over
    ``limit`` bytes (what was read is replayed to the SDK's app, which refuses it),
    ``None`` when the client went first."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"", None
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks), False
        if not message.get("more_body", False):
            return b"".join(chunks), True


def _replay(body: bytes, complete: bool, receive: Receive) -> Receive:
    """``receive`` with the body already read given back first."""
    given = False

    async def replayed() -> MutableMapping[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": not complete}
        return await receive()

    return replayed


def _raw_headers(raw: list[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw]


def _security_headers(
    raw: list[tuple[bytes, bytes]],
) -> tuple[str | None, str | None, str | None]:
    """The first ``Content-Type``, ``Host`` and ``Origin`` of a request's ASGI headers,
    found as Starlette's ``Headers.get`` finds them (what the SDK's check reads)."""
    content_type = host = origin = None
    for name, value in raw:
        if name == b"content-type":
            if content_type is None:
                content_type = value.decode("latin-1")
        elif name == b"host":
            if host is None:
                host = value.decode("latin-1")
        elif name == b"origin" and origin is None:
            origin = value.decode("latin-1")
    return content_type, host, origin
