"""The error tree: drawn in one docstring, defined in one module; httpx2's errors translated
where HTTP enters; one wording for a call that may have taken effect."""

from __future__ import annotations

import re
import socket

import httpx2
import pytest
from mcp import Client

import supervisor.errors as errors
from supervisor import server, transports, ws
from supervisor.actors import SupervisorError
from supervisor.actors._errors import collapse, leaves
from supervisor.errors import (
    CallMayHaveTakenEffect,
    HTTPConnectError,
    HTTPConnectionLost,
    HTTPError,
    HTTPStatusError,
    TransportError,
)
from supervisor.transports import http_errors, http_transport

_NODE = re.compile(r"[A-Z]\w+")


def _drawn_tree() -> dict[str, str | None]:
    """Each class drawn in ``supervisor.errors``' docstring, mapped to its drawn parent:
    the nearest line above it whose name starts further left."""
    block = (errors.__doc__ or "").split("::\n\n", 1)[1].split("\n\n", 1)[0]
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in block.splitlines():
        match = _NODE.search(line)
        assert match, f"cannot read tree line {line!r}"
        column, name = match.start(), match[0]
        while stack and stack[-1][0] >= column:
            stack.pop()
        assert name not in parents, f"{name} drawn twice"
        parents[name] = stack[-1][1] if stack else None
        stack.append((column, name))
    return parents


def test_the_drawn_tree_is_the_class_tree() -> None:
    """Every error class of ``supervisor.errors`` is drawn, once, under its base class."""
    drawn = _drawn_tree()
    assert drawn["SupervisorError"] is None
    for name, parent in drawn.items():
        cls = getattr(errors, name)
        if parent is not None:
            assert cls.__bases__[0] is getattr(errors, parent), name
    defined = {
        name
        for name in errors.__all__
        if isinstance(getattr(errors, name), type)
        and issubclass(getattr(errors, name), SupervisorError)
    }
    assert defined == set(drawn)


def test_every_error_class_of_the_package_is_one_of_the_tree() -> None:
    """The modules that raise errors re-export the tree's classes; they define none."""
    for module in (transports, ws, server):
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, type) and issubclass(value, BaseException):
                assert value is getattr(errors, name), f"{module.__name__}.{name}"
    assert issubclass(errors.WebSocketError, TransportError)
    assert issubclass(HTTPError, TransportError)


def test_call_may_have_taken_effect_has_one_wording() -> None:
    error = CallMayHaveTakenEffect.during("shop", "add")
    assert str(error) == (
        "the connection to MCP server 'shop' died while tool 'add' was running: "
        "it may have taken effect and was not retried"
    )
    assert (error.server, error.tool) == ("shop", "add")


def _raised(exc: BaseException) -> BaseException:
    with pytest.raises(BaseException) as info, http_errors("https://u:pw@example.test/mcp?k=s"):
        raise exc
    return info.value


def test_http_errors_translates_each_failure_mode() -> None:
    """Each httpx2 error becomes the class for its failure mode, naming the URL without
    user-info and query; the original is the ``__cause__``."""
    request = httpx2.Request("POST", "https://example.test/mcp?k=s")
    response = httpx2.Response(401, request=request)
    refused = httpx2.ConnectError("All connection attempts failed")
    refused.__context__ = ConnectionRefusedError(111, "Connection refused")
    cases: list[tuple[httpx2.HTTPError, type[HTTPError], str]] = [
        (refused, HTTPConnectError, "cannot connect to {url}: connection refused"),
        (httpx2.ConnectTimeout("t"), HTTPConnectError, "cannot connect to {url}: timed out"),
        (
            httpx2.HTTPStatusError("401", request=request, response=response),
            HTTPStatusError,
            "MCP endpoint {url} answered HTTP 401 Unauthorized",
        ),
        (
            httpx2.RemoteProtocolError("Server disconnected without sending a response."),
            HTTPConnectionLost,
            "the connection to {url} broke during a request: Server disconnected without "
            "sending a response.",
        ),
        (
            httpx2.ReadTimeout("t"),
            HTTPConnectionLost,
            "the connection to {url} went silent during a request: no answer within the timeout",
        ),
        (
            httpx2.TooManyRedirects("Exceeded maximum allowed redirects."),
            HTTPError,
            "HTTP request to {url} failed: Exceeded maximum allowed redirects.",
        ),
    ]
    for original, kind, message in cases:
        error = _raised(original)
        assert type(error) is kind
        assert str(error) == message.format(url="https://example.test/mcp")
        assert error.url == "https://example.test/mcp"  # type: ignore[attr-defined]
        assert error.__cause__ is original
    status = _raised(httpx2.HTTPStatusError("x", request=request, response=response))
    assert isinstance(status, HTTPStatusError) and status.status_code == 401


def test_http_errors_keeps_groups_and_other_errors() -> None:
    """Inside groups the httpx2 leaves are replaced in place; anything else passes as is."""
    other = ValueError("not HTTP")
    assert _raised(other) is other
    group = ExceptionGroup("g", [other, ExceptionGroup("inner", [httpx2.ReadError("reset")])])
    translated = _raised(group)
    assert isinstance(translated, ExceptionGroup) and translated is not group
    assert [type(e) for e in leaves(translated)] == [ValueError, HTTPConnectionLost]
    alone = _raised(ExceptionGroup("g", [httpx2.ReadError("reset")]))
    assert isinstance(collapse(alone), HTTPConnectionLost)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_http_transport_reports_a_refused_connection_as_ours() -> None:
    """Where HTTP enters: a server that is not there is an HTTPConnectError, not httpx2's,
    and the message keeps the query string (which may hold a token) out."""
    url = f"http://127.0.0.1:{_closed_port()}/mcp?token=hunter2"
    with pytest.raises(BaseException) as info:
        async with Client(http_transport(url, timeout=5)):  # type: ignore[arg-type]
            pytest.fail("connected to a closed port")
    error = collapse(info.value)
    assert isinstance(error, HTTPConnectError), repr(info.value)
    assert "connection refused" in str(error)
    assert "hunter2" not in str(error) and error.url.endswith("/mcp")
