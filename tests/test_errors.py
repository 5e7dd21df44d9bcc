"""The error tree: drawn in one docstring, defined in one module; httpx2's errors translated
where HTTP enters; one wording for a call that may have taken effect."""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
import socket
from types import ModuleType

import httpx2
import pytest
from mcp import Client

import supervisor
import supervisor.actors._errors as actor_errors
import supervisor.errors as errors
from supervisor import auth, faults, gateway, server
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
from supervisor.transports._errors import http_errors
from supervisor.transports._http import http_transport

from .extras import missing_modules

_NODE = re.compile(r"[A-Z]\w+")

#: Exceptions outside the tree on purpose, as ``supervisor.errors`` says: the developer
#: tooling's own, which never reach a library caller, and the dashboard's HTTP server's.
_OUTSIDE = {
    "BenchError",
    "BrowserError",
    "BrowserNotFound",
    "DemoError",
    "Disconnected",
    "EventTimeout",
    "FixtureStartError",
    "JavaScriptError",
    "RequestError",
}


def _drawn_tree(module: ModuleType) -> dict[str, str | None]:
    """Each class drawn in ``module``'s docstring, mapped to its drawn parent: the nearest
    line above it whose name starts further left."""
    block = (module.__doc__ or "").split("::\n\n", 1)[1].split("\n\n", 1)[0]
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


def _package_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined in a module of the package, by name — of those
    modules that import here: one that needs an extra not installed is left out, and the
    test noted to be run again with the extras (see ``tests/extras.py``)."""
    return _exceptions_of(frozenset(missing_modules()))


@functools.cache
def _exceptions_of(missing: frozenset[str]) -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(supervisor.__path__, "supervisor."):
        if info.name.rpartition(".")[2] == "__main__" or info.name in missing:
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                assert found.setdefault(value.__name__, value) is value, (
                    f"two exception classes named {value.__name__}"
                )
    return found


@pytest.mark.parametrize("module", [errors, actor_errors], ids=lambda m: m.__name__)
def test_the_drawn_tree_is_the_class_tree(module: ModuleType) -> None:
    """Every error class is drawn, once, under its base class: in ``supervisor.errors``
    every one of the package's tree, in ``supervisor.actors`` every one it defines."""
    drawn = _drawn_tree(module)
    classes = _package_exceptions()
    assert drawn["SupervisorError"] is None
    for name, parent in drawn.items():
        if parent is not None:
            assert classes[name].__bases__[0] is classes[parent], name
    if module is errors:
        expected = {n for n, c in classes.items() if issubclass(c, SupervisorError)}
        expected -= {n for n in expected if n.startswith("_")}
    else:
        expected = {n for n, c in classes.items() if c.__module__ == module.__name__}
    assert expected == set(drawn)


def test_every_exception_of_the_package_is_under_the_root() -> None:
    """Every exception class the package defines is a ``SupervisorError``, but for the
    few ``supervisor.errors`` names as outside on purpose and private control flow."""
    escaped = {
        name: cls
        for name, cls in _package_exceptions().items()
        if not issubclass(cls, SupervisorError) and not name.startswith("_")
    }
    assert set(escaped) <= _OUTSIDE
    for name, cls in escaped.items():
        said = [b for b in cls.__mro__ if f"``{b.__name__}``" in (errors.__doc__ or "")]
        assert said, f"{name} is outside the tree and supervisor.errors does not say so"


def _transport_modules() -> list[ModuleType]:
    """Every module of ``supervisor.transports``."""
    package = importlib.import_module("supervisor.transports")
    return [
        importlib.import_module(info.name)
        for info in pkgutil.walk_packages(package.__path__, "supervisor.transports.")
    ]


def test_every_error_class_of_the_package_is_one_of_the_tree() -> None:
    """The modules that raise errors re-export the tree's classes, and every class of the
    tree can be imported from ``supervisor.errors`` but the two families it says are not."""
    transports = _transport_modules()
    assert {m.__name__.rpartition(".")[2] for m in transports} >= {"_stdio", "_http", "_ws"}
    for module in (*transports, server, gateway, auth, faults):
        # a façade with no names has none; a transports module: every name it binds
        names = vars(module) if module in transports else getattr(module, "__all__", ())
        for name in list(names):
            value = getattr(module, name)
            if isinstance(value, type) and issubclass(value, SupervisorError):
                assert value is getattr(errors, name, value), f"{module.__name__}.{name}"
    assert issubclass(errors.WebSocketError, TransportError)
    assert issubclass(HTTPError, TransportError)
    elsewhere = {"PlanError"} | {n for n in _drawn_tree(errors) if n.startswith("Gateway")}
    assert set(_drawn_tree(errors)) - elsewhere <= set(errors.__all__)


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
