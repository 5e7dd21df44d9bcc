"""OpenTelemetry spans of tool calls: the gate's call span, the backing request's span
(attempt, path, outcome) and the SDK's client span inside it, one trace from the caller
to the backing server — across the mailbox, and through the gateway from its client."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from types import SimpleNamespace
from typing import Any

import pytest
import trio
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

from supervisor import open_supervisor
from supervisor.gateway._plain_calls import PlainCalls
from supervisor.testing.servers import make_server, stdio_params
from tests.test_gateway import gateway_over_http, http_client
from tests.test_gateway_fast import exchange
from tests.test_gateway_fidelity import raw_call


class _Recorder(SpanProcessor):
    """Keeps the spans that end while a test records (other tests in this process may
    end spans too, once a provider is installed)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] | None = None

    def on_end(self, span: ReadableSpan) -> None:
        if self.spans is not None:
            self.spans.append(span)


_RECORDER = _Recorder()


@pytest.fixture
def spans() -> Iterator[list[ReadableSpan]]:
    """The spans ended during the test. The process's tracer provider is set once."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(_RECORDER)
        trace.set_tracer_provider(provider)
    _RECORDER.spans = []
    yield _RECORDER.spans
    _RECORDER.spans = None


def named(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    (span,) = [s for s in spans if s.name == name]
    return span


def parent_of(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


async def test_a_call_is_one_trace_from_the_caller_to_the_backing_server(
    spans: list[ReadableSpan],
) -> None:
    """The caller's span → ``mcp-supervisor.call`` (server, original name, outcome ok) →
    ``mcp-supervisor.backing`` (the first call straight onto the connection, attempt 1;
    the second, made after a kill -9 while the server restarts, waits in its mailbox and
    goes on the second connection) → the SDK's client span, which sends the trace
    context in the request's ``_meta`` (the last test sees a backing server continue
    it): one trace id throughout."""
    tracer = trace.get_tracer("test")
    command, args = stdio_params("echo")
    server = {"command": command, "args": args, "approve": False, "initTimeout": 60}
    config = {
        "mcpServers": {"e": server},
        "supervisor": {"backoff": {"local": {"initial": 0.05}}},
    }
    async with (
        open_supervisor(config) as sup,
        sup.subscribe("mcp.local.crashed") as crashes,
    ):
        with tracer.start_as_current_span("agent step"):
            assert (await sup.call("e_echo", {"text": "hi"})).text == "hi"
        os.kill(sup.status()["e"].pid, signal.SIGKILL)  # type: ignore[arg-type]
        await crashes.receive()  # the connection is gone: the next call waits for the next
        with trio.fail_after(60), tracer.start_as_current_span("agent step"):
            assert (await sup.call("e_echo", {"text": "hi"})).text == "hi"
    roots = [s for s in spans if s.name == "agent step"]
    calls = [s for s in spans if s.name == "mcp-supervisor.call e_echo"]
    backings = [s for s in spans if s.name == "mcp-supervisor.backing echo"]
    assert len(roots) == len(calls) == len(backings) == 2
    paths, attempts = ["direct", "mailbox"], [1, 2]
    for root, call, backing, path, attempt in zip(
        roots, calls, backings, paths, attempts, strict=True
    ):
        trace_id = root.context.trace_id  # type: ignore[union-attr]
        assert parent_of(call) == span_id(root)
        assert call.attributes is not None and backing.attributes is not None
        assert call.attributes["mcp_supervisor.server"] == "e"
        assert call.attributes["mcp_supervisor.tool.original"] == "echo"
        assert call.attributes["mcp_supervisor.outcome"] == "ok"
        assert parent_of(backing) == span_id(call)
        assert backing.attributes["mcp_supervisor.attempt"] == attempt
        assert backing.attributes["mcp_supervisor.path"] == path
        assert backing.attributes["mcp_supervisor.outcome"] == "ok"
        inside = [s for s in spans if s.context.trace_id == trace_id]  # type: ignore[union-attr]
        client = [s for s in inside if s.kind is trace.SpanKind.CLIENT]
        assert [parent_of(s) for s in client] == [span_id(backing)]


async def test_a_failed_call_says_its_outcome(spans: list[ReadableSpan]) -> None:
    """An unknown tool and a tool's own error: the call span's outcome and error status."""
    async with open_supervisor({"mcpServers": {}}, apps={"n": make_server("rich")}) as sup:
        await sup.tools()
        with pytest.raises(Exception, match="no tool named"):
            await sup.call("n_nope", {})
        with pytest.raises(Exception, match="reported an error"):
            await sup.call("n_fail", {"message": "no"})
    unknown = named(spans, "mcp-supervisor.call n_nope")
    failed = named(spans, "mcp-supervisor.call n_fail")
    assert unknown.attributes["mcp_supervisor.outcome"] == "unknown_tool"  # type: ignore[index]
    assert failed.attributes["mcp_supervisor.outcome"] == "tool_error"  # type: ignore[index]
    assert unknown.status.status_code is failed.status.status_code is trace.StatusCode.ERROR
    backing = named(spans, "mcp-supervisor.backing fail")
    assert backing.attributes["mcp_supervisor.outcome"] == "tool_error"  # type: ignore[index]


async def test_the_gateway_continues_its_clients_trace(spans: list[ReadableSpan]) -> None:
    """A client's trace context (W3C, in the request's ``_meta``) is continued by the
    gateway, through its call and backing spans, to the backing server."""
    tracer = trace.get_tracer("test")
    async with gateway_over_http({"mcpServers": {}}, apps={"e": make_server("echo")}) as (
        _,
        _,
        info,
    ):
        async with http_client(info.url) as client:
            with tracer.start_as_current_span("remote agent") as root:
                result = await client.call_tool("e_echo", {"text": "hi"})
            assert not result.is_error
    trace_id = root.get_span_context().trace_id
    inside = [s for s in spans if s.context.trace_id == trace_id]  # type: ignore[union-attr]
    call = named(inside, "mcp-supervisor.call e_echo")
    backing = named(inside, "mcp-supervisor.backing echo")
    assert parent_of(backing) == span_id(call)
    servers = [s for s in inside if s.kind is trace.SpanKind.SERVER]
    gateway_side = [s for s in servers if s.name == "tools/call e_echo"]
    assert [parent_of(call)] == [span_id(s) for s in gateway_side]  # under the gateway's span
    backing_side = [s for s in servers if s.name == "tools/call echo"]
    assert len(backing_side) == 1  # the backing server continued it too


_WITHOUT_PROVIDER = r"""
from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from supervisor.tools import _tracing as tracing

remote = extract({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
with tracing.attached(remote):
    with tracing.call_span("e_echo") as call, tracing.backing_span("e", "echo") as backing:
        assert call is backing is trace.INVALID_SPAN
        tracing.ended(backing, "tool_error")  # nothing to record: no error either
        carrier = {}
        inject(carrier)  # as the SDK's client does into the backing request's _meta
print(carrier["traceparent"])
"""


def test_without_a_provider_no_span_is_made_and_the_callers_trace_is_passed_on() -> None:
    """In a process where no tracer provider was installed (a fresh interpreter: this
    one has the SDK's), the call and backing spans are not made, and the context the
    backing request carries is still the caller's trace, unchanged."""
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_PROVIDER], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


_INSTALLED_LATER = r"""
import os
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from supervisor.tools import _tracing as tracing

if os.environ.get("UNKNOWN"):  # an API that no longer names its global provider so
    tracing._PROVIDER = "_no_such_name"
asked = []
get_tracer_provider = trace.get_tracer_provider
trace.get_tracer_provider = lambda: asked.append(1) or get_tracer_provider()


def made():
    with tracing.call_span("echo") as span:
        return span.is_recording()


before = [made() for _ in range(100)]
print(any(before), len(asked))
trace.set_tracer_provider(TracerProvider())
print(made(), made())
"""


_CONTINUES = r"""
from supervisor.gateway._server import GatewayServer
from supervisor.tools._tracing import continues

parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
print(continues(None), continues({}), continues({"progress_token": 1}))
print(continues({"traceparent": parent}), continues({"baggage": "k=v"}))
print(type(GatewayServer("g").middleware[0]).__name__)
"""


def test_without_a_provider_the_gateway_s_server_span_is_made_only_to_continue_a_trace() -> None:
    """In a process with no tracer provider, the gateway's server span (the SDK's
    OpenTelemetry middleware, wrapped) is made only for a request whose ``_meta`` carries
    a field of the propagator (``traceparent``, ``tracestate``, ``baggage``): only then is
    there something to continue; the next test shows the wrapped middleware's span."""
    done = subprocess.run(
        [sys.executable, "-c", _CONTINUES], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["False False False", "True True", "_When"]


@pytest.mark.parametrize("api", ["known", "unknown"])
def test_a_provider_installed_later_is_seen_and_none_is_not_asked_for(api: str) -> None:
    """In a fresh interpreter with no tracer provider, a hundred calls make no span and
    do not ask the API's ``get_tracer_provider`` (which looks in ``os.environ`` each
    time): the API's global provider is read, as its proxy tracer reads it. The provider
    the application installs later is seen by the next call. Were the API not to name
    its global provider so, ``get_tracer_provider`` is asked each time."""
    env = {**os.environ, "UNKNOWN": "1" if api == "unknown" else ""}
    done = subprocess.run(
        [sys.executable, "-c", _INSTALLED_LATER],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    asked = "100" if api == "unknown" else "0"
    assert done.stdout.split("\n")[:2] == [f"False {asked}", "True True"]


def test_a_provider_named_in_the_environment_at_start_is_installed() -> None:
    """``OTEL_PYTHON_TRACER_PROVIDER`` in the environment the process starts with
    installs that provider (the API loads it for the supervisor's tracer): its spans
    are made from the first call."""
    env = {**os.environ, "OTEL_PYTHON_TRACER_PROVIDER": "sdk_tracer_provider"}
    code = "from supervisor.tools import _tracing as t\n" + (
        "with t.call_span('echo') as span: print(span.is_recording())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


async def test_the_gateway_s_server_span_is_made_when_the_request_says_so(
    spans: list[ReadableSpan],
) -> None:
    """The SDK's span around a request, wrapped as the gateway's server wraps it, is
    made for a request for which the predicate holds (the gateway's: with a provider
    installed, every request), and any other is passed straight on, spanless."""
    from mcp.server.lowlevel import Server

    from supervisor import _sdk
    from supervisor.tools._tracing import continues

    assert continues(None)  # a provider is installed: there is a span to record
    server: Server[object] = Server("g")
    told: list[bool] = [True, False]
    _sdk.trace_when(server, lambda ctx: told.pop(0))
    ctx = SimpleNamespace(
        params={"name": "t"},
        method="tools/call",
        protocol_version="2026-07-28",
        request_id=1,
        meta=None,
    )

    async def handler(ctx: object) -> dict[str, object]:
        return {"ok": True}

    for _ in range(2):
        assert await server.middleware[0](ctx, handler) == {"ok": True}
    assert [span.name for span in spans] == ["tools/call t"]


async def test_with_a_provider_a_fast_lane_call_still_gets_the_gateway_s_server_span(
    spans: list[ReadableSpan], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a provider installed, a plain 2026-07-28 call that comes with no trace
    context (which the HTTP fast lane takes) still gets the gateway's server span: the
    gateway's direct route past the SDK's runner is not taken while the span's
    middleware would act."""
    direct: list[bool] = []
    served = PlainCalls.served

    async def spied(self: PlainCalls, *args: Any) -> Any:
        answer = await served(self, *args)
        direct.append(answer is not None)
        return answer

    monkeypatch.setattr(PlainCalls, "served", spied)
    async with gateway_over_http({"mcpServers": {}}, apps={"e": make_server("echo")}) as (
        _,
        _,
        info,
    ):
        ((status, _, answer),) = await exchange(info.url, [raw_call("e_echo", {"text": "hi"})])
    assert status == 200 and answer["result"]["isError"] is False
    assert direct == [False]  # asked, and declined: the span's middleware acts
    servers = [s for s in spans if s.kind is trace.SpanKind.SERVER]
    assert [s.name for s in servers if s.name == "tools/call e_echo"] == ["tools/call e_echo"]
