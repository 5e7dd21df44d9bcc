# pyright: reportPrivateUsage=false
# (this module is where the SDK's private names are used: each is a TOUCHPOINT)
"""The SDK boundary: every use of the ``mcp`` SDK's non-public surface, in one module.

The project builds on the ``mcp`` SDK's public API. Where that API stops short of what
it needs, it reaches past it here and nowhere else: a private module's type, a private
attribute read or replaced, a private method called. Each touchpoint is one entry of
:data:`TOUCHPOINTS` — what is touched, on what, and why no public way does it — and
``tests/test_sdk_contract.py`` checks each against the installed SDK: an SDK release that
renames or removes one fails there first, naming the SDK version and the touchpoint,
instead of breaking session eviction, tasks or a login silently. A test also holds the
rest of the package to this module: no other module imports a private ``mcp`` module or
names one of the SDK's private attributes.

Everything heavy is imported when it is used, so that importing this module costs what
the types cost (the modules that import it load the SDK anyway).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import httpx2
import mcp_types as types
from mcp.client._transport import TransportStreams
from mcp.client.auth import OAuthClientProvider
from mcp.shared._context_streams import create_context_streams
from mcp.shared._stream_protocols import ReadStream, WriteStream

if TYPE_CHECKING:
    from mcp.client.session import ClientSession
    from mcp.server.lowlevel.server import Server
    from mcp.server.mcpserver import MCPServer
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

__all__ = [
    "TOUCHPOINTS",
    "UNLISTED",
    "OAuthProvider",
    "ReadStream",
    "TransportStreams",
    "Touchpoint",
    "WriteStream",
    "create_context_streams",
    "forget_provider_state",
    "forget_session_owner",
    "in_memory_transport",
    "initialize_provider",
    "lifespan_state",
    "lowlevel_server",
    "output_schema",
    "parse_call_results_with",
    "passing_of",
    "read_tool_result",
    "request_connection",
    "session_transports",
    "stamp",
    "tool_manager",
    "trace_when",
    "wrap_session_admission",
]


class Touchpoint(NamedTuple):
    """One use of the SDK's non-public surface: ``name`` (an attribute, or a module's
    name) on ``owner`` (``module:Class``, or a module), of ``kind`` — ``"module"`` (a
    private module imported for what it defines), ``"attribute"`` (an instance attribute
    its ``__init__`` sets), ``"method"`` (called or replaced) — and why."""

    owner: str
    name: str
    kind: str
    why: str


#: Each touch of the SDK's non-public surface, as ``tests/test_sdk_contract.py`` checks it.
TOUCHPOINTS = (
    Touchpoint(
        "mcp.client._transport",
        "TransportStreams",
        "module",
        "the type of a transport's two streams: the public Transport protocol yields it "
        "but does not export its name (every transport here declares it)",
    ),
    Touchpoint(
        "mcp.shared._stream_protocols",
        "ReadStream",
        "module",
        "the stream types the gateway's stdio front hands the SDK's server",
    ),
    Touchpoint(
        "mcp.shared._context_streams",
        "create_context_streams",
        "module",
        "memory streams that carry each message's context, as the SDK's own stdio server "
        "makes them (the gateway's stdio front)",
    ),
    Touchpoint(
        "mcp.client._memory",
        "InMemoryTransport",
        "module",
        "an in-process server as a transport (open_supervisor(apps=...)); mcp.Client "
        "makes one internally, with no public name",
    ),
    Touchpoint(
        "mcp.server.streamable_http_manager:StreamableHTTPSessionManager",
        "_server_instances",
        "attribute",
        "the gateway's open sessions, counted and the longest idle closed for room "
        "(max_sessions only refuses)",
    ),
    Touchpoint(
        "mcp.server.streamable_http_manager:StreamableHTTPSessionManager",
        "_session_owners",
        "attribute",
        "a session closed for room is forgotten with its owner",
    ),
    Touchpoint(
        "mcp.server.streamable_http_manager:StreamableHTTPSessionManager",
        "_admit_session",
        "method",
        "wrapped: room made before a new session is admitted, and its SSE history bound",
    ),
    Touchpoint(
        "mcp.server.streamable_http_manager:StreamableHTTPSessionManager",
        "_discard_session",
        "method",
        "wrapped: sessions the SDK's idle timeout ended are counted, their history freed",
    ),
    Touchpoint(
        "mcp.server.streamable_http_manager:StreamableHTTPSessionManager",
        "_lifespan_state",
        "attribute",
        "the server's lifespan state, handed to a call the gateway's fast lane serves "
        "as the manager would",
    ),
    Touchpoint(
        "mcp.server.session:ServerSession",
        "_connection",
        "attribute",
        "the one connection behind the per-request sessions: the gateway relays a "
        "backing server's question to the caller on it",
    ),
    Touchpoint(
        "mcp.client.session:ClientSession",
        "_active_claims",
        "attribute",
        "whether the tasks claim is active on a connection (a 2026-07-28 one)",
    ),
    Touchpoint(
        "mcp.client.session:ClientSession",
        "_call_tool_adapter",
        "attribute",
        "replaced by a parser that looks at resultType first: the SDK's discriminated "
        "union costs a call about 20 us",
    ),
    Touchpoint(
        "mcp.client.session:ClientSession",
        "_stamp",
        "attribute",
        "what the session adds to each request it sends (a 2026-07-28 server's per-request "
        "envelope, and a remote server's headers), added to a tools/call the gateway "
        "forwards as JSON past it",
    ),
    Touchpoint(
        "mcp.client.session:ClientSession",
        "_tool_output_schemas",
        "attribute",
        "the output schema the session checks a tool's results against: a forwarded "
        "result a quick check accepts under it is spared the session's full check",
    ),
    Touchpoint(
        "mcp.server._otel",
        "OpenTelemetryMiddleware",
        "module",
        "the server middleware that wraps each request in a span: found among the server's "
        "middleware and run only for a request with a span to record or a trace to continue",
    ),
    Touchpoint(
        "mcp.client.session",
        "_clamp_inbound_ttl",
        "module",
        "the session's reading of a forwarded call's answer that is not plain, as its own "
        "send_request reads an answer (the dict it gets is not the public API's)",
    ),
    Touchpoint(
        "mcp.client.session",
        "_later_revision_fields",
        "module",
        "the same reading: the keys a later protocol revision adds, dropped from a "
        "session-based server's answer",
    ),
    Touchpoint(
        "mcp.client.auth:OAuthClientProvider",
        "_initialized",
        "attribute",
        "cleared so the provider reads the stored credentials again before its next flow",
    ),
    Touchpoint(
        "mcp.client.auth:OAuthClientProvider",
        "_initialize",
        "method",
        "called before a renewal driven outside a request (its flow calls it otherwise); "
        "overridden by the workload grant, which has no stored client registration",
    ),
    Touchpoint(
        "mcp.client.auth:OAuthClientProvider",
        "_expected_issuer",
        "method",
        "overridden: a 2025-03-26 server's declared issuer is the one expected (the SDK "
        "expects the origin)",
    ),
    Touchpoint(
        "mcp.client.auth:OAuthClientProvider",
        "_select_authorization_server",
        "method",
        "overridden: the workload grant picks its configured issuer among those advertised",
    ),
    Touchpoint(
        "mcp.client.auth:OAuthClientProvider",
        "_perform_authorization",
        "method",
        "overridden: the workload grant's token request (the SDK's own grants override it "
        "the same way)",
    ),
    Touchpoint(
        "mcp.client.auth:OAuthClientProvider",
        "_handle_token_response",
        "method",
        "overridden: the workload grant explains a refusal before the SDK takes the token",
    ),
    Touchpoint(
        "mcp.server.mcpserver:MCPServer",
        "_lowlevel_server",
        "attribute",
        "the low-level server of an MCPServer: served over WebSocket, and by the test "
        "fixtures with options MCPServer does not pass on",
    ),
    Touchpoint(
        "mcp.server.mcpserver:MCPServer",
        "_tool_manager",
        "attribute",
        "the test fixtures' tools with a published output schema the SDK does not check",
    ),
)


# -- streams and transports --------------------------------------------------------------


def in_memory_transport(app: object) -> Any:
    """The SDK's in-memory transport to ``app`` (an ``MCPServer`` or a low-level
    ``Server``): each connection a fresh session with the same object."""
    from mcp.client._memory import InMemoryTransport

    # an MCPServer or a low-level Server, as the embedder gave it (apps=...): not narrowed
    return InMemoryTransport(app)  # pyright: ignore[reportArgumentType]


# -- the server side ---------------------------------------------------------------------


def lowlevel_server(server: MCPServer | Server[Any]) -> Server[Any]:
    """The low-level server an ``MCPServer`` wraps (a low-level one: itself)."""
    from mcp.server.mcpserver import MCPServer

    if isinstance(server, MCPServer):
        return server._lowlevel_server
    return server


def tool_manager(server: MCPServer) -> Any:
    """An ``MCPServer``'s tool manager (its tools, as registered)."""
    return server._tool_manager


def request_connection(session: object) -> Any:
    """The client's connection a request's ``ServerSession`` is made around (the SDK
    makes one per request); ``None`` if the SDK stops keeping it there."""
    return getattr(session, "_connection", None)


def session_transports(manager: StreamableHTTPSessionManager) -> dict[str, Any]:
    """A session manager's open sessions: id -> transport (the SDK's own table: what is
    removed from it is closed for the manager)."""
    return manager._server_instances


def forget_session_owner(manager: StreamableHTTPSessionManager, session_id: str) -> None:
    """Forget who owns the session ``session_id`` (it was closed here)."""
    manager._session_owners.pop(session_id, None)


def wrap_session_admission(
    manager: StreamableHTTPSessionManager,
    admit: Callable[[Callable[[Any], Any]], Callable[[Any], Any]],
    discard: Callable[[Callable[[str, Any], Any]], Callable[[str, Any], Any]],
) -> None:
    """Replace how ``manager`` admits a new session and discards an ended one with
    what ``admit`` and ``discard`` make of its own two methods."""
    # the SDK's own methods, wrapped in place (it has no hook for either); the wrappers
    # are typed as loosely as what they wrap may change between SDK versions
    manager._admit_session = admit(manager._admit_session)  # pyright: ignore[reportAttributeAccessIssue]
    # (the same, for the other)
    manager._discard_session = discard(manager._discard_session)  # pyright: ignore[reportAttributeAccessIssue]


def lifespan_state(manager: StreamableHTTPSessionManager) -> Any:
    """The lifespan state ``manager`` hands each request it serves."""
    return manager._lifespan_state


def trace_when(server: Server[Any], when: Callable[[Any], bool]) -> None:
    """Have ``server``'s OpenTelemetry middleware (the SDK's, which wraps each request in
    a span) run for a request only when ``when(ctx)`` (its ``ServerRequestContext``)
    says so; otherwise the request goes straight on to the next middleware."""
    from mcp.server._otel import OpenTelemetryMiddleware

    for at, middleware in enumerate(server.middleware):
        if isinstance(middleware, OpenTelemetryMiddleware):
            server.middleware[at] = _When(middleware, when)


class _When:
    """A server middleware run only when a predicate of the request says so."""

    __slots__ = ("_middleware", "_when")

    def __init__(self, middleware: Any, when: Callable[[Any], bool]) -> None:
        self._middleware = middleware
        self._when = when

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Any]) -> Any:
        if self._when(ctx):
            return await self._middleware(ctx, call_next)
        return await call_next(ctx)

    def passes(self, ctx: Any) -> bool:
        """Whether the request of ``ctx`` goes straight on to the next middleware."""
        return not self._when(ctx)


def passing_of(middleware: object) -> Callable[[Any], bool] | None:
    """What says whether ``middleware`` (one of a server's) only passes the request of a
    context on to the next: for the OpenTelemetry middleware :func:`trace_when` made
    conditional, its condition (negated); ``None`` for any other."""
    return middleware.passes if isinstance(middleware, _When) else None


# -- the client side ---------------------------------------------------------------------


def parse_call_results_with(session: ClientSession, adapter: object) -> bool:
    """Have ``session`` parse ``tools/call`` answers with ``adapter`` (anything with
    ``model_validate``) when the tasks claim is active on it; whether it does. The
    session's own adapter is set at its handshake; left alone if the SDK has none."""
    claims = getattr(session, "_active_claims", {})
    if "task" not in claims or not hasattr(session, "_call_tool_adapter"):
        return False
    # any object with model_validate will do, as the session uses it (not only a TypeAdapter)
    session._call_tool_adapter = adapter  # pyright: ignore[reportAttributeAccessIssue]
    return True


def stamp(session: ClientSession, data: dict[str, Any]) -> None:
    """Add to the ``tools/call`` request ``data`` (its ``method`` and ``params``) what
    ``session`` adds to each request it sends: a 2026-07-28 server's envelope in
    ``_meta`` — the same for every ``tools/call`` of a session (its protocol version,
    client info and capabilities, and its log level unless the request names one), so
    learnt once per stamp the session has, and written over the request's own
    ``_meta`` as the session's stamp writes it."""
    made = session._stamp
    envelope = _ENVELOPES.get(made)
    if envelope is None:
        probe: dict[str, Any] = {"method": "tools/call", "params": {}}
        made(probe, {})
        envelope = _ENVELOPES[made] = probe["params"].get("_meta", _NO_ENVELOPE)
    if envelope is _NO_ENVELOPE:  # (the session-based protocol's stamp: headers alone)
        return
    params = data.setdefault("params", {})
    meta = params.get("_meta")
    if meta is None:
        params["_meta"] = dict(envelope)
        return
    level = meta.get(types.LOG_LEVEL_META_KEY, _NO_ENVELOPE)  # (the request's own comes first)
    meta.update(envelope)
    if level is not _NO_ENVELOPE:
        meta[types.LOG_LEVEL_META_KEY] = level


def stamped(session: ClientSession, data: dict[str, Any]) -> dict[str, str]:
    """Add to the request ``data`` (its ``method`` and ``params``) what ``session`` adds to
    each request it sends, as its stamp adds it (the 2026-07-28 envelope in ``_meta``),
    and return the HTTP headers the stamp gives the request: its protocol version, and
    under 2026-07-28 its method, its name and its ``Mcp-Param-*`` headers (from the
    schema the session last listed) — for a request sent past the session on its
    transport, which sends them (:mod:`supervisor.transports._forward_remote`)."""
    opts: dict[str, Any] = {}
    session._stamp(data, opts)  # pyright: ignore[reportArgumentType] - CallOptions is a dict
    return opts.get("headers") or {}


#: The ``_meta`` each session's stamp adds to a ``tools/call`` (see :func:`stamp`).
_ENVELOPES: weakref.WeakKeyDictionary[Callable[..., None], dict[str, Any]] = (
    weakref.WeakKeyDictionary()
)
#: A stamp that adds no ``_meta``; (also: a request with no log level of its own)
_NO_ENVELOPE: dict[str, Any] = {}


#: What :func:`output_schema` gives for a tool the session has not listed.
UNLISTED: Any = object()


def output_schema(session: ClientSession, tool: str) -> Any:
    """The output schema ``session`` checks ``tool``'s results against
    (``validate_tool_result``): ``None`` for none, :data:`UNLISTED` when the session has
    not listed ``tool`` (its check lists the tools again first)."""
    schemas: dict[str, Any] = getattr(session, "_tool_output_schemas", {})
    return schemas.get(tool, UNLISTED)


def read_tool_result(session: ClientSession, version: str | None, raw: dict[str, Any]) -> Any:
    """A ``tools/call`` answer's result ``raw``, read as ``session`` (speaking
    ``version``) reads the answers it gets (its ``send_request``): checked against that
    version (a ``pydantic.ValidationError`` if it does not conform), the keys of a later
    revision dropped, and parsed by its call adapter."""
    from mcp.client.session import _clamp_inbound_ttl, _later_revision_fields
    from mcp_types import methods
    from pydantic import TypeAdapter

    _clamp_inbound_ttl(raw)
    version = version or "2025-11-25"  # (as send_request falls back)
    try:
        methods.validate_server_result("tools/call", version, raw)
    except KeyError:
        pass
    if not (foreign := _later_revision_fields("tools/call", version)).isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    adapter: Any = session._call_tool_adapter
    if isinstance(adapter, TypeAdapter):
        return adapter.validate_python(raw, by_name=False)
    return adapter.model_validate(raw, by_name=False)


class OAuthProvider(OAuthClientProvider):
    """The SDK's OAuth provider, its subclass hooks under public names: a subclass
    overrides these (each defaults to the SDK's own), never the SDK's private ones.

    ``load_stored`` reads what the storage holds before a flow; ``expected_issuer`` is
    the issuer the authorization server's metadata must name; ``choose_authorization_server``
    picks among those the resource advertises; ``token_request`` is the grant's request
    for a token; ``take_token_response`` takes the answer."""

    @property
    def initialized(self) -> bool:
        """Whether the stored credentials were read (else the next flow reads them)."""
        return bool(self._initialized)

    @initialized.setter
    def initialized(self, value: bool) -> None:
        self._initialized = value

    async def load_stored(self) -> None:
        await OAuthClientProvider._initialize(self)

    def expected_issuer(self) -> str:
        return OAuthClientProvider._expected_issuer(self)

    def choose_authorization_server(self, advertised: list[str]) -> str:
        return OAuthClientProvider._select_authorization_server(self, advertised)

    async def token_request(self) -> httpx2.Request:
        return await OAuthClientProvider._perform_authorization(self)

    async def take_token_response(self, response: httpx2.Response) -> None:
        await OAuthClientProvider._handle_token_response(self, response)

    # The SDK's hooks, each handed to its public name above.

    async def _initialize(self) -> None:
        await self.load_stored()

    def _expected_issuer(self) -> str:
        return self.expected_issuer()

    def _select_authorization_server(self, advertised: list[str]) -> str:
        return self.choose_authorization_server(advertised)

    async def _perform_authorization(self) -> httpx2.Request:
        return await self.token_request()

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await self.take_token_response(response)


async def initialize_provider(provider: OAuthClientProvider) -> None:
    """Have ``provider`` read its stored credentials, if it has not yet (its own flow
    does it first thing; a renewal driven from outside a request must too)."""
    if not getattr(provider, "_initialized", True):
        await provider._initialize()


def forget_provider_state(provider: object) -> None:
    """Make ``provider`` read the stored credentials again before its next flow."""
    if hasattr(provider, "_initialized"):
        # any provider that has the flag (hasattr above): the SDK's, or a subclass of it
        provider._initialized = False  # pyright: ignore[reportAttributeAccessIssue]
