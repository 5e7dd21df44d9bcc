"""Plain ``tools/call`` requests answered without the SDK's models on the gateway's side.

The SDK's server reads each request's params into its models and writes each result
from them: for a ``tools/call`` that is a validation of the params against the caller's
protocol version, another into ``CallToolRequestParams``, and, for the answer, the
result dumped, validated and sieved against that version again. For a plain call that
is all work that changes nothing, and the gateway does it for every call it passes on.

:class:`PlainCalls` is the innermost of the gateway's server middleware. A
``tools/call`` whose params are *plain* — ``name`` (a string), ``arguments`` (an object,
or absent) and a ``_meta`` of the keys the gateway reads itself (the 2026-07-28 envelope
and the gateway's own options: :data:`~._context.TIMEOUT_META`,
:data:`~._context.APPROVE_META`, :data:`~._context.LIMITS_META`), whose envelope the
SDK's check has passed once (each different one is checked the first time it is seen) —
is handed to the gateway's handler (:class:`~._tool_requests.ToolRequests`) as it is.
Its answer is written as the SDK writes it: a result a backing server sent that the
gateway forwarded as JSON (:class:`~supervisor.tools._forwarded.Forwarded`) is passed on
as that JSON, with what the SDK's writing adds (``isError`` when absent; for a 2026-07-28
caller ``resultType`` and the gateway's ``serverInfo`` stamp) and drops (a 2026-07-28
``resultType``, for an older caller); any other is written by the SDK's own functions.
Anything else — another method, a progress token, a log level, a round's answers, a
trace context — goes on down to the SDK, untouched.

The fast lanes take a plain call past the SDK's runner too (:meth:`PlainCalls.served`,
the direct route): what the runner does before the middleware — the request's context,
its ``_meta`` read into it — is done the same way (a plain ``_meta`` the runner reads
as a copy of it, the first time it is seen, is copied each time after), and the
middleware outside this one is skipped only while each says it would pass the request
on (the span middleware with no span to make, the announcer for a 2026-07-28 request);
the call is made from its JSON (:meth:`CallAnswers.plain
<._call_answers.CallAnswers.plain>`), and the request-state boundary still runs on an
``input_required`` answer, to seal its ``requestState``. A chain of middleware other
than the gateway's own sends the call to the runner.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

import mcp_types as types
import msgspec
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import methods
from mcp_types.methods import is_input_required
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from .. import _sdk
from ..log import get_logger
from ..tools._forwarded import Forwarded, constructed
from ._context import APPROVE_META, LIMITS_META, TIMEOUT_META

if TYPE_CHECKING:
    from mcp.server.connection import Connection
    from mcp.server.context import CallNext, HandlerResult
    from mcp.server.lowlevel.server import Server
    from mcp.server.request_state import RequestStateBoundary

    from ._server import GatewayServer
    from ._tool_requests import ToolRequests

__all__ = ["PlainCalls", "written"]

log = get_logger("supervisor.gateway")

_PARAMS = frozenset({"name", "arguments", "_meta"})
#: The ``_meta`` keys a plain call may carry: the envelope's, and the gateway's options
_META = frozenset(
    {
        types.PROTOCOL_VERSION_META_KEY,
        types.CLIENT_INFO_META_KEY,
        types.CLIENT_CAPABILITIES_META_KEY,
        TIMEOUT_META,
        APPROVE_META,
        LIMITS_META,
    }
)
#: How many different ``_meta`` the check's verdicts are kept for (a client sends one)
_CHECKED = 256
#: The check's verdicts on a ``_meta``: it fails; it passes; it passes, and the SDK's
#: runner reads it into the request's context as a copy of it (``dict(meta)``: so it
#: reads every plain one, its values being ``Any`` to the SDK's models)
_FAILS, _PASSES, _COPIED = 0, 1, 2
_ENCODER = msgspec.json.Encoder()
_PARAMS_MODEL = types.CallToolRequestParams.model_construct(name="")


class PlainCalls:
    """The gateway's middleware for plain ``tools/call`` requests (see the module
    docstring): handed to ``calls`` as they are, answered for ``server``."""

    __slots__ = ("_boundary", "_calls", "_checked", "_passing", "_server")

    def __init__(self, calls: ToolRequests, server: GatewayServer) -> None:
        self._calls = calls
        self._server = server
        #: (protocol version, the ``_meta`` as JSON) -> the SDK's check's verdict on it
        #: (:data:`_FAILS`, :data:`_PASSES`, :data:`_COPIED`)
        self._checked: dict[tuple[str, bytes], int] = {}
        #: the direct route (:meth:`served`), once :meth:`install` was told the chain
        self._boundary: RequestStateBoundary | None = None
        self._passing: Mapping[object, Callable[[ServerRequestContext[Any, Any]], bool]] = {}

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        params = ctx.params
        if ctx.method != "tools/call" or not self._plain(ctx, params):
            return await call_next(ctx)
        return await self._answer(ctx)

    async def _answer(self, ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        """The wire answer to the plain call of ``ctx``."""
        params = ctx.params
        assert isinstance(params, Mapping)
        fields = {"name": params["name"], "arguments": params.get("arguments")}
        fields["meta"] = params.get("_meta")
        typed = constructed(_PARAMS_MODEL, fields)
        result = await self._calls.call_tool(ctx, typed)
        return written(self._server, ctx.protocol_version, result)

    def install(self, boundary: RequestStateBoundary, remember: object) -> None:
        """Be the server's innermost middleware, and open the direct route (:meth:`served`)
        on the gateway's chain: the SDK's span middleware as
        :func:`~supervisor._sdk.trace_when` made it (it passes a request on unless there is
        a span to make), ``remember`` (the announcer's, which passes a 2026-07-28 request
        on), ``boundary``, then this one."""
        self._server.middleware.append(self)
        passing: dict[object, Callable[[ServerRequestContext[Any, Any]], bool]] = {
            remember: _modern
        }
        for middleware in self._server.middleware:
            passes = _sdk.passing_of(middleware)
            if passes is not None:
                passing[middleware] = passes
        self._boundary = boundary
        self._passing = passing
        self._server.plain_calls = self

    async def served(
        self, dctx: Any, connection: Connection, params: Mapping[str, Any], lifespan_state: Any
    ) -> dict[str, Any] | None:
        """The answer to a ``tools/call`` with ``params`` on the born-ready 2026-07-28
        ``connection`` (``dctx``: its dispatch context), served as the SDK's runner serves
        it when all its middleware would do is pass the request on to this one: with
        the context the runner makes, through the request-state boundary (which seals
        the ``requestState`` of an ``input_required`` answer), and answered here. ``None``
        when it is not so — the params are not plain, a middleware would act (a span to
        record), or the chain is not the one :meth:`install` was told: then it is the
        runner's (:func:`~._kernel.serve_once`)."""
        boundary, passing = self._boundary, self._passing
        version = connection.protocol_version
        if boundary is None or version not in MODERN_PROTOCOL_VERSIONS:
            return None
        verdict = self._verdict(version, params)
        if verdict == _FAILS:
            return None
        chain = self._server.middleware
        if len(chain) != len(passing) + 2 or chain[-1] is not self or chain[-2] is not boundary:
            return None
        # the context as the runner makes it (``_meta`` read as it reads it: plain, it is valid)
        raw, meta = params.get("_meta"), None
        if raw is not None:
            if verdict == _COPIED:
                meta = cast("types.RequestParamsMeta", dict(raw))
            else:
                meta = types.RequestParams.model_validate({"_meta": raw}, by_name=False).meta
        md = dctx.message_metadata
        request = close = close_standalone = None
        if isinstance(md, ServerMessageMetadata):
            request, close = md.request_context, md.close_sse_stream
            close_standalone = md.close_standalone_sse_stream
        ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
            session=ServerSession(dctx, connection, request_meta=meta),
            lifespan_context=lifespan_state,
            method="tools/call",
            params=params,
            request_id=dctx.request_id,
            meta=meta,
            protocol_version=version,
            request=request,
            close_sse_stream=close,
            close_standalone_sse_stream=close_standalone,
        )
        for middleware in chain[:-2]:
            passes = passing.get(middleware)
            if passes is None or not passes(ctx):
                return None
        made = self._calls.answers.plain(ctx, params)
        if made is None:
            answer = await boundary(ctx, self._answer)  # (plain: this one never calls on)
        else:  # made past the params' model; then through the boundary, which acts on a
            # plain call's answer only when it is a round, to seal its requestState
            answer = written(self._server, version, await made)
            if is_input_required(answer):
                answer = await boundary(ctx, _given(cast("dict[str, Any]", answer)))
        assert isinstance(answer, dict)  # (written's, its requestState sealed or not)
        return answer

    def _plain(self, ctx: ServerRequestContext[Any, Any], params: object) -> bool:
        """Whether ``params`` (of the ``tools/call`` of ``ctx``) are plain, on a
        connection that serves calls (a session-based one once its handshake began)."""
        version = ctx.protocol_version
        if version not in MODERN_PROTOCOL_VERSIONS and ctx.session.client_params is None:
            return False  # (the SDK's answer to a call before the handshake)
        return self._plain_params(version, params)

    def _plain_params(self, version: str, params: object) -> bool:
        """Whether ``params`` of a ``tools/call`` at ``version`` are plain."""
        return self._verdict(version, params) != _FAILS

    def _verdict(self, version: str, params: object) -> int:
        """Whether ``params`` of a ``tools/call`` at ``version`` are plain (and how the
        SDK's runner reads their ``_meta``): :data:`_FAILS` if not."""
        if "tools/call" in self._server.cache_hints:
            return _FAILS  # (the SDK's writing adds it)
        if type(params) is not dict or not params.keys() <= _PARAMS:
            return _FAILS
        if type(params.get("name")) is not str:
            return _FAILS
        arguments = params.get("arguments")
        if arguments is not None and type(arguments) is not dict:
            return _FAILS
        meta = params.get("_meta")
        if meta is None:
            return _FAILS if "_meta" in params else _PASSES
        if type(meta) is not dict or not meta.keys() <= _META:
            return _FAILS
        return self._passes(version, meta)

    def _passes(self, version: str, meta: dict[str, Any]) -> int:
        """The SDK's check's verdict on params with ``meta`` at ``version`` (checked the
        first time a ``meta`` is seen, by the check itself), and whether the runner's
        reading of it is a copy of it (read the first time too)."""
        try:
            key = (version, _ENCODER.encode(meta))
        except (TypeError, ValueError, OverflowError):
            return _FAILS
        known = self._checked.get(key)
        if known is None:
            try:
                methods.validate_client_request(
                    "tools/call", version, {"name": "x", "arguments": {}, "_meta": meta}
                )
                read = types.RequestParams.model_validate({"_meta": meta}, by_name=False).meta
                known = _COPIED if type(read) is dict and read == meta else _PASSES
            except (ValueError, KeyError):  # (pydantic's ValidationError is a ValueError)
                known = _FAILS
            if len(self._checked) >= _CHECKED:
                self._checked.clear()
            self._checked[key] = known
        return known


def written(server: Server[Any], version: str, result: object) -> dict[str, Any]:
    """The wire form of the ``tools/call`` result ``result`` for a caller at ``version``,
    as the SDK's server writes it (a :class:`Forwarded` one from its JSON)."""
    modern = version in MODERN_PROTOCOL_VERSIONS
    if isinstance(result, Forwarded):
        wire = dict(result.sent)
        wire.setdefault("isError", False)
        if modern:
            wire["resultType"] = "complete"
        else:
            wire.pop("resultType", None)
    else:  # a model, or (a task handle) a dict
        if isinstance(result, BaseModel):
            dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        else:
            assert isinstance(result, dict)
            dumped = dict(result)
        result_type = dumped.get("resultType")
        core = (
            not modern or not isinstance(result_type, str) or result_type in types.CORE_RESULT_TYPES
        )
        try:
            wire = (
                methods.serialize_server_result("tools/call", version, dumped) if core else dumped
            )
        except ValidationError:  # as the SDK's server says it (the detail stays in its log)
            log.exception("the gateway's tools/call answer is not a valid result")
            raise MCPError(
                code=types.INTERNAL_ERROR, message="Handler returned an invalid result"
            ) from None
        if modern and wire.get("resultType") is None:
            wire["resultType"] = "complete"
    if not modern:
        return wire
    meta = wire.get("_meta")
    if meta is None:
        wire["_meta"] = {types.SERVER_INFO_META_KEY: _stamp(server)}
    elif isinstance(meta, dict) and meta.get(types.SERVER_INFO_META_KEY) is None:
        wire["_meta"] = {**meta, types.SERVER_INFO_META_KEY: _stamp(server)}
    return wire


#: Each server's ``serverInfo`` stamp, by id: the server and the stamp.
_STAMPS: dict[int, tuple[Server[Any], dict[str, Any]]] = {}


def _stamp(server: Server[Any]) -> dict[str, Any]:
    """``server.server_info_stamp`` (the same each time: a dump made once per server),
    made once. The SDK deep-copies it at each access so that its caller may change the
    answer it goes into; an answer written here is written out as it is, unchanged."""
    held = _STAMPS.get(id(server))
    if held is None or held[0] is not server:
        if len(_STAMPS) >= 64:
            _STAMPS.clear()
        held = _STAMPS[id(server)] = (server, server.server_info_stamp)
    return held[1]


def _given(answer: dict[str, Any]) -> CallNext:
    """A handler that answers ``answer``, made already: for the request-state boundary
    (which acts on a plain call's answer alone, sealing an ``input_required`` one's
    ``requestState``) to pass it on as if it had made it."""

    async def given(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        return answer

    return given


def _modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the request of ``ctx`` is a 2026-07-28 one."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
