"""OpenTelemetry spans for tool calls (docs/tools.md#tracing).

The supervisor traces with ``opentelemetry-api`` alone: every span is a no-op until the
application installs an OpenTelemetry SDK and exporter, and then each tool call is

* ``mcp-supervisor.call TOOL`` — the call through the gate, by its merged name, with its
  server, its tool's own name and its ``outcome`` (``ok``, ``tool_error``, ``failed``,
  ``indefinite``, ``refused``, ``invalid_arguments``, ``unknown_tool``, ``cancelled``,
  ``invalid_output``: the audit log's words), and within it
* ``mcp-supervisor.backing TOOL`` — the request to the backing server, with the server,
  the ``attempt`` (which connection of the server carried it: 1 for the first, 2 after
  one restart …), whether it went straight onto the connection or waited in the
  server's mailbox, and its outcome; within it the ``mcp`` SDK's own client span, which
  puts the W3C trace context in the request's ``_meta`` for the backing server.

The current trace context is carried across the mailbox, so a call that waits for a
restarting server still continues its caller's trace, and a gateway's call continues
the trace its client sent.

Until a tracer provider is installed the two spans are not even started (a no-op span
still costs some 17 µs: its context variable set and reset, its attributes); the trace
context is carried and passed on all the same. So with the gateway's own server span (the
SDK's): it is made for a request only when :func:`continues` says there is a span to
record or a caller's trace to carry on.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

from .._version import __version__
from ._observer import Call, CallWatch

if TYPE_CHECKING:
    from ._results import ToolResult

__all__ = [
    "SpanWatch",
    "attached",
    "backing_span",
    "call_span",
    "continues",
    "current",
    "ended",
]

_tracer = trace.get_tracer("mcp-supervisor", __version__)

#: attribute names
SERVER = "mcp_supervisor.server"
ORIGINAL = "mcp_supervisor.tool.original"
OUTCOME = "mcp_supervisor.outcome"
ATTEMPT = "mcp_supervisor.attempt"
PATH = "mcp_supervisor.path"
TOOL = "gen_ai.tool.name"


#: The span of a call while no tracer provider is installed (reusable: it does nothing).
_NO_SPAN: AbstractContextManager[trace.Span] = nullcontext(trace.INVALID_SPAN)
#: Set once a provider is found installed: the API lets it be set only once.
_seen_provider = False
#: What :data:`_PROVIDER` is read as when the API holds no such name (then the API's
#: public ``get_tracer_provider`` alone says whether one is installed).
_UNKNOWN = object()
#: The name of the API's global tracer provider: ``None`` until one is installed (by
#: ``set_tracer_provider``, or by ``get_tracer_provider`` from the
#: ``OTEL_PYTHON_TRACER_PROVIDER`` variable: called when this module is imported, for its
#: tracer). It is what the API's proxy tracer — this module's tracer, made before a
#: provider was — reads to tell whether its spans are made by one.
_PROVIDER = "_TRACER_PROVIDER"


def _installed() -> bool:
    """Whether the application has installed a tracer provider (an SDK's): until then
    the API's global one is a proxy, and every span a no-op. Until one is, the API's
    global provider is read as its proxy tracer reads it (asking ``get_tracer_provider``
    each time, which looks for the variable in ``os.environ``, cost some 9,000
    instructions: a call asks four times)."""
    global _seen_provider
    if not _seen_provider:
        if getattr(trace, _PROVIDER, _UNKNOWN) is None:
            return False
        _seen_provider = not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    return _seen_provider


def continues(meta: Mapping[str, Any] | None) -> bool:
    """Whether a request whose ``_meta`` is ``meta`` has a span to record (a tracer
    provider is installed) or a trace to continue (``meta`` holds a field the installed
    propagator reads, such as ``traceparent``). Otherwise a span made for it would be a
    no-op, and make no context current but an invalid one."""
    if _installed():
        return True
    if not meta:
        return False
    global _fields
    propagator = propagate.get_global_textmap()
    if _fields[0] is not propagator:
        _fields = (propagator, frozenset(propagator.fields))
    return not meta.keys().isdisjoint(_fields[1])


#: The installed propagator and the fields it reads (its ``fields`` are made anew each time).
_fields: tuple[object, frozenset[str]] = (None, frozenset())


@contextmanager
def _recorded_span(name: str, attributes: dict[str, str]) -> Iterator[trace.Span]:
    """An internal span made current for the block."""
    with _tracer.start_as_current_span(
        name,
        kind=trace.SpanKind.INTERNAL,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        yield span


def call_span(name: str) -> AbstractContextManager[trace.Span]:
    """The span of one call through the gate (``name``: the merged tool name)."""
    if not _installed():
        return _NO_SPAN
    return _recorded_span(
        f"mcp-supervisor.call {name}", {"gen_ai.operation.name": "execute_tool", TOOL: name}
    )


def backing_span(server: str, tool: str) -> AbstractContextManager[trace.Span]:
    """The span of one request to the backing server ``server`` (``tool``: its own
    name for the tool)."""
    if not _installed():
        return _NO_SPAN
    return _recorded_span(f"mcp-supervisor.backing {tool}", {SERVER: server, TOOL: tool})


def ended(
    span: trace.Span,
    outcome: str,
    exc: BaseException | None = None,
    attempt: int | None = None,
) -> None:
    """Record how the call ended on ``span``: its outcome (and, for a backing request,
    the ``attempt``: which connection of the server it ended on), and an error status
    for anything but ``ok`` (a tool's own error included, as the SDK's spans do)."""
    if not span.is_recording():
        return
    span.set_attribute(OUTCOME, outcome)
    if attempt is not None:
        span.set_attribute(ATTEMPT, attempt)
    if outcome != "ok":
        if exc is not None:
            span.set_attribute("error.type", type(exc).__qualname__)
        span.set_status(trace.StatusCode.ERROR, None if exc is None else str(exc)[:500])


class SpanWatch(CallWatch):
    """A call through the gate, on its span (:func:`call_span`): its server once
    resolved, its tool's own name once sent, its outcome when it ends."""

    __slots__ = ("span",)

    def __init__(self, span: trace.Span) -> None:
        self.span = span

    def resolved(self, call: Call) -> None:
        if call.server is not None:
            self.span.set_attribute(SERVER, call.server)

    def sending(self, call: Call, timeout: float) -> None:
        if call.original is not None:
            self.span.set_attribute(ORIGINAL, call.original)

    def answered(self, call: Call, result: ToolResult) -> None:
        ended(self.span, "ok")

    def failed(self, call: Call, exc: BaseException) -> None:
        ended(self.span, call.outcome or "failed", exc)


def current() -> Any:
    """The current trace context, to be carried with a request to another task."""
    return otel_context.get_current()


def carried(context: Any) -> bool:
    """Whether a request sent in ``context`` (from :func:`current`; ``None``: the current
    one) carries a trace on: a tracer provider is installed, or the context holds a span
    (a trace a gateway's client sent, say), whose W3C context the SDK puts in the
    request's ``_meta``."""
    if _installed():
        return True
    span = trace.get_current_span(context)
    return span.get_span_context().is_valid


_AS_IT_IS: AbstractContextManager[None] = nullcontext()


def attached(context: Any) -> AbstractContextManager[None]:
    """Run the block in ``context`` (from :func:`current`; ``None``, or the context
    already current: as it is)."""
    if context is None or context is otel_context.get_current():
        return _AS_IT_IS
    return _attached(context)


@contextmanager
def _attached(context: Any) -> Iterator[None]:
    token = otel_context.attach(context)
    try:
        yield
    finally:
        otel_context.detach(token)
