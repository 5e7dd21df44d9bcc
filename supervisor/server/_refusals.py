"""What a server's error answers mean, in the supervisor's terms.

A tool call's MCP error is :class:`~supervisor.errors.ServerRequestError` with its code and
data; an answer the SDK client refused because it does not fit the protocol is the
server's fault, :class:`~supervisor.errors.ResultInvalid`, each problem's path said; an
answer the transport dropped as too large is :class:`~supervisor.errors.ResultTooLarge`;
a legacy Streamable HTTP server that forgot the session refused the request unseen.
"""

from __future__ import annotations

import re

import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from .._util._jsontext import json_path
from ..errors import ResultInvalid, ResultTooLarge, ServerRequestError
from ..transports._oversize import RESULT_TOO_LARGE


def refused(server: str, tool: str, exc: MCPError) -> ServerRequestError:
    """A tool call's MCP error answer ``exc`` (``tool`` as the server names it), in the
    supervisor's terms: :class:`ServerRequestError` with its code and data."""
    return ServerRequestError(
        f"MCP server {server!r} refused tool {tool!r}: {exc.message} (MCP error {exc.code})",
        server=server,
        code=exc.code,
        data=exc.error.data,
    )


def invalid_result(server: str, what: str, client: Client, exc: ValidationError) -> ResultInvalid:
    """The SDK client's refusal of an answer that does not fit the protocol (a pydantic
    ``ValidationError``, which would otherwise read as the caller's invalid request) as
    :class:`~supervisor.errors.ResultInvalid`: the server's fault, each problem's path in
    the result. Of a union's arms (a tool's result, or an ``input_required`` one; the
    kinds of content), only the first arm's problems are said: the one asked for first."""
    problems: list[tuple[str, str]] = []
    chosen: dict[tuple[object, ...], object] = {}  # the arm said, by where its union is
    for problem in exc.errors(include_url=False, include_input=False, include_context=False):
        loc = problem["loc"]
        path: list[str | int] = []
        for i, part in enumerate(loc):
            if isinstance(part, str) and _ARM.match(part):
                if chosen.setdefault(tuple(loc[:i]), part) != part:
                    break  # another arm's
            else:
                path.append(part)
        else:
            problems.append((json_path(path), _short(problem["msg"])))
    errors = problems[:_MAX_PROBLEMS]
    if len(problems) > _MAX_PROBLEMS:
        errors.append(("…", f"{len(problems) - _MAX_PROBLEMS} more"))
    return ResultInvalid(
        server=server, request=what, protocol=client.protocol_version, errors=errors
    )


#: A union arm in a pydantic error's path: a model's name (``CallToolResult``), or a
#: tagged arm (``tagged-union[…]``, ``function-after[…]``)
_ARM = re.compile(r"[A-Z]\w*\Z|[a-z-]+\[")
#: The problems of an invalid result said, at most (the rest counted).
_MAX_PROBLEMS = 5
#: Characters of one problem said, at most.
_MAX_PROBLEM = 200


def _short(text: str) -> str:
    return text if len(text) <= _MAX_PROBLEM else text[: _MAX_PROBLEM - 1] + "…"


def session_expired(error: MCPError) -> bool:
    """The server does not know our (legacy Streamable HTTP) session: it restarted.

    The SDK reports the server's 404 as its JSON-RPC error body, or as "Session
    terminated" when the 404 has none; either way the request was not processed.
    """
    return error.code == types.INVALID_REQUEST and error.message in (
        "Session not found",
        "Session terminated",
    )


def too_large(server: str, tool: str, exc: MCPError) -> ResultTooLarge | None:
    """The call's answer was dropped as too large by the transport (its error, with the
    sizes as ints) — ``None`` for anything else, a server's own error of that code too."""
    data = exc.data if isinstance(exc.data, dict) else {}
    size, limit = data.get("size"), data.get("limit")
    if exc.code != RESULT_TOO_LARGE or type(size) is not int or type(limit) is not int:
        return None
    over, remedy = "maxMessageBytes", ", or raise supervisor.limits.maxMessageBytes in the config"
    if data.get("bound") == "sse":  # the SDK's bound on one legacy SSE event, the smaller
        over, remedy = "a legacy SSE event may hold", ""
    return ResultTooLarge(
        f"MCP server {server!r} answered tool {tool!r} with {size} bytes, more than "
        f"{over} ({limit}): the answer was dropped and the connection kept. "
        f"Ask for less (a smaller range or page){remedy}",
        server=server,
        tool=tool,
        size=size,
        limit=limit,
    )
