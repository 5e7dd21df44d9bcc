"""Every error the package raises, importable from one place.

One class per failure mode, under bases that catch whole families::

    SupervisorError                   root: catch this to catch everything we raise
    ├── ActorError                    a request to an actor did not produce a reply (.actor)
    │   ├── CallTimeout               the caller's deadline passed first
    │   ├── MailboxFull               a cast found the mailbox full
    │   ├── ActorUnavailable          the child gave up restarting; calls fail fast
    │   ├── ActorStopped              the child was terminated (or never started)
    │   └── RequestAborted            the incarnation died while handling the request
    ├── SupervisorGaveUp              restart intensity exceeded; the supervisor stopped
    ├── StartFailed                   a child raised before it was ready
    ├── NoSuchChild                   no child of that id in this supervisor
    ├── SupervisorNotRunning          a request to a supervisor that is not running
    ├── ConfigError                   a config file or mapping is unusable; .errors lists why
    │   └── PlanError                 a fault plan could not be loaded (supervisor.faults)
    ├── UnknownTool                   no server offers a tool of that (merged) name
    ├── UnknownResource               no server lists that resource URI nor a matching template
    ├── UnknownPrompt                 no server offers a prompt of that (merged) name
    ├── UnknownServer                 no configured server of that name
    ├── ServerError                   something went wrong with one MCP server (.server)
    │   ├── ServerUnavailable         failed after its attempts, or stopped: fails fast
    │   │   ├── AuthRequired          needs an OAuth login (status needs_auth)
    │   │   └── AuthorizationFailed   the authorization server refused (status auth_failed)
    │   ├── ConnectTimeout            the handshake took longer than initTimeout
    │   ├── StaleConnection           a ping went unanswered
    │   ├── CatalogTooLarge           more tools (or bytes) than the limits allow
    │   ├── PaginationError           a listing repeated a cursor or took over maxListPages
    │   ├── ResultTooLarge            one answer was over maxMessageBytes; dropped, connection kept
    │   ├── ResultInvalid             an answer that does not fit the protocol (.request, .errors)
    │   ├── CallMayHaveTakenEffect    the connection died during the call; not retried
    │   │   └── TaskFailed            the server's task for the call failed, or was lost
    │   ├── ToolCallTimeout           the call took longer than its timeout
    │   ├── CallQueueTimeout          its deadline passed waiting for maxConcurrentCalls; not sent
    │   ├── RequestTimeout            a resource read or prompt request took longer than that
    │   └── ServerRequestError        the server answered with an MCP error (.code)
    ├── TransportError                a connection to a server failed or ended
    │   ├── ServerExited              the server process exited (.exit_code)
    │   │   └── BoundExceeded         its family went over a resources bound: killed
    │   ├── ProtocolViolation         the server wrote something that is not MCP
    │   ├── HTTPError                 an HTTP request of a remote transport failed (.url)
    │   │   ├── HTTPConnectError      no connection: refused, DNS, TLS, connect timeout
    │   │   ├── HTTPStatusError       the server answered with an HTTP error (.status_code)
    │   │   └── HTTPConnectionLost    the connection broke or went silent mid-request
    │   └── WebSocketError            a WebSocket connection failed (.url)
    │       ├── WebSocketConnectError       the connection could not be opened (.status_code)
    │       │   └── WebSocketSubprotocolError   the server would not speak "mcp"
    │       ├── WebSocketFrameError         a frame was not one JSON-RPC message
    │       └── WebSocketClosed             the peer closed abnormally (.code, .reason)
    ├── ToolSchemaInvalid             a tool's own input or output schema is not valid (.tool)
    ├── ToolArgumentsInvalid          arguments do not match the tool's schema (.tool, .errors)
    ├── ToolOutputInvalid             structuredContent does not match the outputSchema
    ├── PromptArgumentsInvalid        prompt arguments missing or not strings (.prompt, .errors)
    ├── RequestUnencodable            a request cannot be written as JSON; not sent (.errors)
    ├── ElicitationAnswerInvalid      an elicitation answer does not fit the requested schema
    ├── ToolError                     the tool ran and reported an error (isError; .text)
    ├── ApprovalDenied                the approval callback refused the call
    │   └── ApprovalRequired          approval is needed and nobody can give it (headless)
    ├── ApprovalAsked                 approval is asked in another round trip; not made yet
    ├── RateLimited                   over a rate limit; not sent (.retry_after seconds)
    ├── AuditLogError                 the audit log cannot be written; calls are refused
    ├── ToolNameConflict              two tools want one name and the clash policy is error
    ├── AuthProblem                   no OAuth token can be had now (.needs_login, .oauth_error)
    ├── LoginCancelled                the browser came back with an error instead of a code
    ├── GatewayError                  a running gateway could not be asked (supervisor.gateway)
    │   ├── GatewayUnreachable        it could not be reached: the request was not sent
    │   ├── GatewayRefused            it refused the request before acting on it (an HTTP 4xx)
    │   ├── GatewayNoAnswer           the request was sent and no whole answer came
    │   └── GatewayRequestError       it answered with a JSON-RPC error (.code)
    └── ProxyEnded                    the chaos proxy's COMMAND could not be started (.exit_code)

The actor runtime's errors (down to :class:`SupervisorNotRunning`) are defined in
:mod:`supervisor.actors`, which knows nothing of MCP, and re-exported here unchanged. Two
families are drawn here but imported from their own package: ``GatewayError`` and below
from ``supervisor.gateway`` (the gateway's client loads neither this module nor the
runtime, so that a command served by a running gateway starts fast), and ``PlanError``, a
:class:`ConfigError` about a fault plan, from ``supervisor.faults``. Every other class is
defined here. The modules that raise them re-export their own
(``supervisor.server.ServerError``, the WebSocket transport's ``WebSocketError``, …): they
are the same classes.

No third-party exception escapes as such where we can name the failure: an ``httpx2``
error leaving a remote transport becomes an :class:`HTTPError` (its ``__cause__`` the
original), a ``trio-websocket`` one a :class:`WebSocketError`. Errors raised by a
caller's own code, or by an MCP server's tool (:class:`ToolError` carries the latter),
are not wrapped.

Outside this tree, on purpose: the developer tooling's own exceptions
(``supervisor.testing``'s ``BrowserError``, ``FixtureStartError`` and ``EventTimeout``, the
demo's ``DemoError``, the bench's ``BenchError``), which never reach a library caller; the
dashboard's ``RequestError`` and ``Disconnected``, which its HTTP server answers with a
status or by closing the connection; and private control-flow exceptions that never leave
their module.
"""

from __future__ import annotations

import http
from collections.abc import Iterable, Mapping

import msgspec

from ._util._printable import printable
from .actors import ActorStopped as ActorStopped
from .actors import ActorUnavailable as ActorUnavailable
from .actors import CallTimeout as CallTimeout
from .actors import MailboxFull as MailboxFull
from .actors import NoSuchChild as NoSuchChild
from .actors import RequestAborted as RequestAborted
from .actors import StartFailed as StartFailed
from .actors import SupervisorError as SupervisorError
from .actors import SupervisorGaveUp as SupervisorGaveUp
from .actors import SupervisorNotRunning as SupervisorNotRunning
from .actors._errors import ActorError as ActorError

__all__ = [
    "ActorError",
    "ActorStopped",
    "ActorUnavailable",
    "ApprovalAsked",
    "ApprovalDenied",
    "ApprovalRequired",
    "AuditLogError",
    "AuthProblem",
    "AuthRequired",
    "AuthorizationFailed",
    "BoundExceeded",
    "CallMayHaveTakenEffect",
    "CallQueueTimeout",
    "CallTimeout",
    "CatalogTooLarge",
    "ConfigError",
    "ConnectTimeout",
    "ElicitationAnswerInvalid",
    "FieldError",
    "HTTPConnectError",
    "HTTPConnectionLost",
    "HTTPError",
    "HTTPStatusError",
    "LoginCancelled",
    "MailboxFull",
    "NoSuchChild",
    "PaginationError",
    "PromptArgumentsInvalid",
    "ProtocolViolation",
    "ProxyEnded",
    "RateLimited",
    "RequestAborted",
    "RequestTimeout",
    "RequestUnencodable",
    "ResultInvalid",
    "ResultTooLarge",
    "ServerError",
    "ServerExited",
    "ServerRequestError",
    "ServerUnavailable",
    "StaleConnection",
    "StartFailed",
    "SupervisorError",
    "SupervisorGaveUp",
    "SupervisorNotRunning",
    "TaskFailed",
    "ToolArgumentsInvalid",
    "ToolCallTimeout",
    "ToolError",
    "ToolNameConflict",
    "ToolOutputInvalid",
    "ToolSchemaInvalid",
    "TransportError",
    "UnknownPrompt",
    "UnknownResource",
    "UnknownServer",
    "UnknownTool",
    "WebSocketClosed",
    "WebSocketConnectError",
    "WebSocketError",
    "WebSocketFrameError",
    "WebSocketSubprotocolError",
]


class FieldError(msgspec.Struct, frozen=True):
    """One problem in a config, at a dotted ``path`` such as ``mcpServers.github.url``.

    For problems with the file itself (missing, too large, not JSON) ``path`` is the file's
    path. ``message`` never contains the value of an environment variable, an ``env`` entry
    or a header.
    """

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ConfigError(SupervisorError, ValueError):
    """A config could not be loaded; ``errors`` lists every problem found, in file order.

    The message is one line per error, each starting with its path::

        mcpServers.github.heders: unknown field; did you mean "headers"?
        mcpServers.jira: needs either "command" (a local server) or "url" (a remote server)

    ``path`` is the config file, or ``None`` for a config given as a mapping. ``servers``
    maps the name of each server entry found to the path where it is defined
    (``mcpServers.github``), as far as the document could be read: it is empty when the
    file could not be read or parsed.
    """

    def __init__(
        self,
        errors: Iterable[FieldError],
        *,
        path: str | None = None,
        servers: Mapping[str, str] | None = None,
    ) -> None:
        self.errors: list[FieldError] = list(errors)
        self.path = path
        self.servers: dict[str, str] = dict(servers or {})
        super().__init__("\n".join(map(str, self.errors)) or "invalid config")


class UnknownTool(SupervisorError, LookupError):
    """No configured server offers a tool of that (merged) name."""


class UnknownServer(SupervisorError, LookupError):
    """No configured server has that name."""


class UnknownResource(SupervisorError, LookupError):
    """No server lists a resource of that URI, and no server's resource template matches it
    (``uri``); the message names close matches and the servers' templates."""

    def __init__(self, message: str, *, uri: str) -> None:
        super().__init__(message)
        self.uri = uri


class UnknownPrompt(SupervisorError, LookupError):
    """No server offers a prompt of that (merged) ``name``; the message names close matches."""

    def __init__(self, message: str, *, name: str) -> None:
        super().__init__(message)
        self.name = name


# -- MCP servers --------------------------------------------------------------------


class ServerError(SupervisorError):
    """Something went wrong with one MCP server; ``server`` names it."""

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


class ServerUnavailable(ServerError):
    """The server gave up restarting (``failed``) or was stopped: calls fail fast.

    ``cli_message`` is what the command line says instead of the message where that
    names a Python call (``handle.restart``): the same facts, the command line's remedy.
    """

    def __init__(self, message: str, *, server: str, cli_message: str | None = None) -> None:
        super().__init__(message, server=server)
        self.cli_message = message if cli_message is None else cli_message


class AuthRequired(ServerUnavailable):
    """The remote server needs an OAuth login before it can be used: its status is
    ``needs_auth`` and calls fail fast with this until a login (``handle.login(name)``,
    ``mcp-supervisor auth login NAME``) gets it a token.

    For a call made for a team gateway's caller to a ``perUser`` server, the login is
    that caller's own: ``user`` is their subject, and ``login_url`` the gateway's page
    that starts it (``None`` when no team gateway serves its logins). Nothing was sent.
    """

    def __init__(
        self,
        message: str,
        *,
        server: str,
        cli_message: str | None = None,
        user: str | None = None,
        login_url: str | None = None,
    ) -> None:
        super().__init__(message, server=server, cli_message=cli_message)
        self.user = user
        self.login_url = login_url
        #: the token broker's problem this error reports, when it is one
        self.problem: AuthProblem | None = None


class AuthorizationFailed(ServerUnavailable):
    """The remote server's authorization server refused (or the login failed): its
    status is ``auth_failed``. ``oauth_error`` is the server's error code when it gave
    one (``invalid_client``, ``access_denied`` …). Nothing is retried until a new login."""

    def __init__(
        self,
        message: str,
        *,
        server: str,
        cli_message: str | None = None,
        oauth_error: str | None = None,
    ) -> None:
        super().__init__(message, server=server, cli_message=cli_message)
        self.oauth_error = oauth_error
        #: the token broker's problem this error reports, when it is one
        self.problem: AuthProblem | None = None


class ConnectTimeout(ServerError, TimeoutError):
    """The MCP handshake did not complete within ``initTimeout``."""


class StaleConnection(ServerError):
    """A ping went unanswered: the connection is restarted."""


class CatalogTooLarge(ServerError):
    """The server lists more tools, or a bigger catalog, than the limits allow
    (``maxToolsPerServer``, ``maxCatalogBytes``). Not retryable: the same server lists
    the same catalog again; the limits are raised in the config."""

    retryable = False


class PaginationError(ServerError):
    """A listing (``tools/list``, ``resources/list`` …) was stopped: the server sent a
    cursor it had sent before (it would loop forever), or the listing needed more requests
    than ``maxListPages``. ``what`` is the listing, ``pages`` the requests made, ``cursor``
    the repeated cursor (``None`` for too many pages). Not retryable: the same server
    paginates the same way again."""

    retryable = False

    def __init__(
        self, message: str, *, server: str, what: str, pages: int, cursor: str | None = None
    ) -> None:
        super().__init__(message, server=server)
        self.what = what
        self.pages = pages
        self.cursor = cursor


class ResultTooLarge(ServerError):
    """The server's answer to one call was larger than ``maxMessageBytes`` (or, over
    legacy SSE, than one event may hold: 1 MiB): it was read past and dropped, the
    connection stays up and nothing counts as a crash. ``tool``, ``size`` (bytes) and
    ``limit`` say which and how big; the call itself did run."""

    def __init__(self, message: str, *, server: str, tool: str, size: int, limit: int) -> None:
        super().__init__(message, server=server)
        self.tool = tool
        self.size = size
        self.limit = limit


class ResultInvalid(ServerError):
    """The server answered with a result that does not fit the MCP protocol it speaks —
    a 2026-07-28 tool result without ``resultType``, ``content`` that is not a list: the
    server's fault, not the caller's. The request reached it (a tool did run) and was not
    sent again; the connection is kept.

    ``request`` says what was asked (``tool 'add'``, ``resource 'notes://index'``),
    ``protocol`` the protocol version of the connection; ``errors`` lists ``(path,
    message)`` pairs, ``path`` the JSON path inside the result (``resultType``,
    ``content``, ``(root)``). The message names the server, then one error per line, what
    the server sent made printable (never obeyed by a terminal)::

        MCP server 'calc' answered tool 'add' with an invalid result (2026-07-28): 2 problems
          resultType: Field required
          content: Input should be a valid list
    """

    def __init__(
        self,
        *,
        server: str,
        request: str,
        protocol: str | None,
        errors: Iterable[tuple[str, str]],
    ) -> None:
        self.request = request
        self.protocol = protocol
        self.errors = [(printable(path), printable(problem)) for path, problem in errors]
        version = "" if protocol is None else f" ({protocol})"
        head = f"MCP server {server!r} answered {request} with an invalid result{version}"
        if len(self.errors) == 1:
            message = f"{head}: {self.errors[0][0]}: {self.errors[0][1]}"
        else:
            lines = [f"  {path}: {problem}" for path, problem in self.errors]
            message = "\n".join([f"{head}: {len(lines)} problems", *lines])
        super().__init__(message, server=server)


class CallMayHaveTakenEffect(ServerError):
    """The connection died while the call was in flight: it may have run, and was not
    retried. ``tool`` names the tool. :meth:`during` builds it with the one message."""

    def __init__(self, message: str, *, server: str, tool: str) -> None:
        super().__init__(message, server=server)
        self.tool = tool

    @classmethod
    def during(cls, server: str, tool: str) -> CallMayHaveTakenEffect:
        """The error for a call of ``tool`` on MCP server ``server`` whose connection died
        while it was running; its message reads *the connection to MCP server 'shop' died
        while tool 'add' was running: it may have taken effect and was not retried*."""
        return cls(
            f"the connection to MCP server {server!r} died while tool {tool!r} was running: "
            "it may have taken effect and was not retried",
            server=server,
            tool=tool,
        )


class TaskFailed(CallMayHaveTakenEffect):
    """The server made a task of the call (the tasks extension) and the task did not
    complete: it failed (``code``: the MCP error it failed with), the server cancelled
    it, or it could not be followed to its end (the connection died, the server no longer
    knows it). Its work may have been done, in part; it was not made again. ``task_id``
    is the task's id at the server."""

    def __init__(
        self, message: str, *, server: str, tool: str, task_id: str, code: int | None = None
    ) -> None:
        super().__init__(message, server=server, tool=tool)
        self.task_id = task_id
        self.code = code


class ToolCallTimeout(ServerError, TimeoutError):
    """The call did not complete within its timeout (it may still run on the server)."""

    def __init__(self, message: str, *, server: str, tool: str, timeout: float | None) -> None:
        super().__init__(message, server=server)
        self.tool = tool
        self.timeout = timeout


class CallQueueTimeout(ServerError, TimeoutError):
    """The call's deadline passed while it waited for one of the server's
    ``maxConcurrentCalls`` slots: it was never sent (not executed), so it is safe to make
    again. ``tool`` names the tool, ``timeout`` the call's, ``limit`` the server's bound."""

    def __init__(self, message: str, *, server: str, tool: str, timeout: float, limit: int) -> None:
        super().__init__(message, server=server)
        self.tool = tool
        self.timeout = timeout
        self.limit = limit


class RequestTimeout(ServerError, TimeoutError):
    """A resource read or a prompt request did not complete within its ``timeout``;
    ``request`` says which (``resource 'notes://index'``, ``prompt 'summarize'``)."""

    def __init__(self, message: str, *, server: str, request: str, timeout: float) -> None:
        super().__init__(message, server=server)
        self.request = request
        self.timeout = timeout


class ServerRequestError(ServerError):
    """The server answered a request with an MCP error (``code``, ``message``, and its
    ``data`` as the server gave it, if any)."""

    def __init__(self, message: str, *, server: str, code: int, data: object = None) -> None:
        super().__init__(message, server=server)
        self.code = code
        self.data = data


# -- transports -----------------------------------------------------------------------


#: HTTP statuses at an MCP endpoint that retrying soon will not change: a login is
#: needed or refused, or nothing (no MCP endpoint) is at that URL.
_PERMANENT_HTTP_STATUSES = frozenset({401, 403, 404, 405, 410})


class TransportError(SupervisorError):
    """The connection to an MCP server failed or ended.

    ``retryable`` is false when trying again soon cannot help — the executable is
    missing or not executable, the endpoint answered 401, 403 or 404: the supervisor
    then marks the server failed at once instead of spending its restarts (restarting
    it explicitly tries again).
    """

    retryable: bool = True


class ServerExited(TransportError):
    """The server process exited. ``exit_code`` is its status (negative: a signal;
    ``None`` when it could not be started at all)."""

    def __init__(self, message: str, *, exit_code: int | None, retryable: bool = True) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.retryable = retryable


class BoundExceeded(ServerExited):
    """A local server's process family went over a bound of its ``resources`` config and
    was killed (it is restarted under its restart policy). ``resource`` is ``"memory"``
    (``used`` and ``limit`` in bytes of resident memory) or ``"processes"`` (counts)."""

    def __init__(
        self, message: str, *, resource: str, used: int, limit: int, exit_code: int | None
    ) -> None:
        super().__init__(message, exit_code=exit_code)
        self.resource = resource
        self.used = used
        self.limit = limit


class ProtocolViolation(TransportError):
    """The server wrote something that is not an MCP message (the connection is dropped)."""


class HTTPError(TransportError):
    """An HTTP request of a remote transport (Streamable HTTP or legacy SSE) failed.

    ``url`` is the server's endpoint, with any user-info and query string removed; the
    message names it, never a request header. ``__cause__`` is the ``httpx2`` error. A
    failure that fits none of the subclasses (a redirect loop, an undecodable body, …) is
    raised as this class itself.
    """

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url


class HTTPConnectError(HTTPError):
    """No connection could be opened: refused, DNS, TLS, proxy, or the connect timeout."""


class HTTPStatusError(HTTPError):
    """The server answered with an HTTP error status, ``status_code`` (say 401, or 503)."""

    def __init__(self, message: str, *, url: str, status_code: int) -> None:
        super().__init__(message, url=url)
        self.status_code = status_code
        self.retryable = status_code not in _PERMANENT_HTTP_STATUSES


class HTTPConnectionLost(HTTPError):
    """An open connection broke mid-request (reset, or the server hung up without an
    answer) or went silent past the read timeout; the request may have been processed."""


class WebSocketError(TransportError):
    """The WebSocket transport failed (see :mod:`supervisor.transports._ws`).

    ``url`` is the endpoint, with any user-info and query string removed.
    """

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url


class WebSocketConnectError(WebSocketError):
    """The WebSocket connection could not be opened: refused, DNS, TLS, timeout, or the
    HTTP upgrade was rejected.

    ``status_code`` is the HTTP status when the server rejected the upgrade, else ``None``.
    """

    def __init__(self, message: str, *, url: str, status_code: int | None = None) -> None:
        super().__init__(message, url=url)
        self.status_code = status_code
        self.retryable = status_code not in _PERMANENT_HTTP_STATUSES


class WebSocketSubprotocolError(WebSocketConnectError):
    """The server accepted the upgrade but did not select subprotocol ``mcp``.

    ``subprotocol`` is what it selected (``None`` for none).
    """

    def __init__(self, message: str, *, url: str, subprotocol: str | None) -> None:
        super().__init__(message, url=url)
        self.subprotocol = subprotocol
        self.retryable = False  # not an MCP WebSocket endpoint


class WebSocketFrameError(WebSocketError):
    """A frame was not one JSON-RPC message (a binary frame, invalid JSON, not JSON-RPC);
    the connection stays open.

    Delivered on the read stream, never raised. ``__cause__`` holds the parse error,
    when there is one.
    """


class WebSocketClosed(WebSocketError):
    """The peer closed the connection abnormally (any code but 1000 or 1001).

    Delivered on the read stream just before it ends. ``code`` is the close code (1006
    when the TCP connection dropped without a close frame, 1009 when a message exceeded
    ``max_message_size``); ``reason`` is the peer's reason text, if any.
    """

    def __init__(self, message: str, *, url: str, code: int, reason: str | None) -> None:
        super().__init__(message, url=url)
        self.code = code
        self.reason = reason


def status_phrase(status: int) -> str:
    """`` Not Found`` for 404 (with its leading space): the standard phrase of an HTTP
    status, for a message; ``""`` for a status the standard does not name."""
    try:
        return f" {http.HTTPStatus(status).phrase}"
    except ValueError:
        return ""


def os_reason(exc: BaseException) -> str:
    """The most specific reason a connection failed, found in ``exc``, its exception
    groups and its ``__cause__``/``__context__`` chain: ``connection refused``, else the
    first operating-system error's text (a DNS error, …), else ``exc``'s type name."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    found: list[OSError] = []
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError):
            found.append(current)
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    for error in found:
        if isinstance(error, ConnectionRefusedError):
            return "connection refused"
    for error in found:
        if error.strerror:
            return error.strerror[0].lower() + error.strerror[1:]
    for error in found:
        if str(error):
            return str(error)
    return type(exc).__name__


# -- tools ------------------------------------------------------------------------------


class ToolSchemaInvalid(SupervisorError):
    """A tool's ``inputSchema`` (or ``outputSchema``) is not a valid JSON Schema; ``tool``
    names the tool. The registry skips such tools and counts them as unsupported."""

    def __init__(self, message: str, *, tool: str) -> None:
        super().__init__(message)
        self.tool = tool


class ToolArgumentsInvalid(SupervisorError, ValueError):
    """The arguments of a call do not match the tool's ``inputSchema``; the call was not sent.

    ``errors`` lists ``(path, message)`` pairs in path order, ``path`` being a JSON path
    such as ``labels[0].name`` or ``(root)``; ``server`` names the tool's server (``None``
    when the tool is no server's, such as the gateway's own meta-tools). The message names
    the tool, then one error per line::

        tool 'github_create_issue': title: 42 is not of type 'string'
    """

    def __init__(
        self, tool: str, errors: Iterable[tuple[str, str]], *, server: str | None = None
    ) -> None:
        self.tool = tool
        self.server = server
        self.errors: list[tuple[str, str]] = list(errors)
        super().__init__(_tool_errors_message(tool, self.errors, "invalid arguments"))


class ToolOutputInvalid(SupervisorError):
    """A result's ``structuredContent`` does not match the tool's ``outputSchema``.

    ``tool``, ``errors`` and ``server`` are as for :class:`ToolArgumentsInvalid`. The
    tool did run.
    """

    def __init__(
        self, tool: str, errors: Iterable[tuple[str, str]], *, server: str | None = None
    ) -> None:
        self.tool = tool
        self.server = server
        self.errors: list[tuple[str, str]] = list(errors)
        super().__init__(_tool_errors_message(tool, self.errors, "invalid structured output"))


class PromptArgumentsInvalid(SupervisorError, ValueError):
    """The arguments for a prompt do not fit what it declares; the request was not sent.

    ``prompt`` is the merged name; ``errors`` lists ``(argument, message)`` pairs — a
    required argument missing, or a value that is not a string (MCP prompt arguments are
    strings). The message names the prompt, then one error per line.
    """

    def __init__(self, prompt: str, errors: Iterable[tuple[str, str]]) -> None:
        self.prompt = prompt
        self.errors: list[tuple[str, str]] = list(errors)
        lines = [f"  {name}: {message}" for name, message in self.errors]
        super().__init__("\n".join([f"prompt {prompt!r}: invalid arguments", *lines]))


class RequestUnencodable(SupervisorError, ValueError):
    """A request holds what JSON text cannot carry, so it was not sent (the connection
    is untouched): a lone surrogate (``"\\ud800"``, half of a UTF-16 pair, which no UTF-8
    holds) in a resource URI, a prompt's arguments, a completion's value, an answer
    relayed with a call… A surrogate in a tool's arguments is refused before, as
    :class:`ToolArgumentsInvalid`.

    ``method`` is the request's; ``errors`` lists ``(path, message)`` pairs, ``path``
    the JSON path of the value inside the request's params (``uri``,
    ``arguments.title``), or ``(root)`` when no one value can be named; ``server``
    names the server it was for. The message names the request, then one error per
    line::

        'resources/read' to MCP server 'notes' was not sent: uri: holds a lone surrogate …
    """

    def __init__(
        self, method: str, errors: Iterable[tuple[str, str]], *, server: str | None = None
    ) -> None:
        self.method = method
        self.server = server
        self.errors: list[tuple[str, str]] = list(errors)
        to = "" if server is None else f" to MCP server {server!r}"
        head = f"{method!r}{to} was not sent"
        if len(self.errors) == 1:
            super().__init__(f"{head}: {self.errors[0][0]}: {self.errors[0][1]}")
            return
        lines = [f"  {path}: {message}" for path, message in self.errors]
        super().__init__("\n".join([f"{head}: it cannot be written as JSON", *lines]))


class ElicitationAnswerInvalid(SupervisorError, ValueError):
    """The embedder's elicitation handler accepted with an answer that does not fit the
    schema the server requested (after the schema's defaults were filled in); it was not
    sent. Its message goes, as a JSON-RPC error (-32602), to the server — or, on a
    2026-07-28 connection, ends the call locally — so the call that asked raises
    :class:`ServerRequestError` with it (docs/servers.md).

    ``server`` is the server that asked; ``errors`` lists ``(field, message)`` pairs in
    field order (``(root)`` for the answer as a whole). Messages never quote the answer's
    values, only what the schema wants::

        MCP server 'shop': elicitation answer refused: quantity: must be of type 'integer'
    """

    def __init__(self, server: str, errors: Iterable[tuple[str, str]]) -> None:
        self.server = server
        self.errors: list[tuple[str, str]] = list(errors)
        head = f"MCP server {server!r}: elicitation answer refused"
        if len(self.errors) == 1:
            message = f"{head}: {self.errors[0][0]}: {self.errors[0][1]}"
        else:
            lines = [f"  {field}: {problem}" for field, problem in self.errors]
            message = "\n".join([f"{head}: {len(lines)} problems", *lines])
        super().__init__(message)


class ToolError(SupervisorError):
    """The tool ran and reported failure (``isError``): ``text`` is what it said, ``tool``
    the name it was called by, ``server`` its server, and ``result`` the whole normalised
    result (a :class:`supervisor.tools.ToolResult`, when there is one) — an agent usually
    hands ``text`` back to the model rather than stopping."""

    def __init__(
        self,
        message: str,
        *,
        tool: str,
        text: str,
        server: str | None = None,
        result: object | None = None,  # a supervisor.tools.ToolResult (errors imports none)
    ) -> None:
        super().__init__(message)
        self.tool = tool
        self.text = text
        self.server = server
        self.result = result


class ApprovalDenied(SupervisorError, PermissionError):
    """The call needed approval and the approval callback refused it; it was not sent.

    ``server`` and ``tool`` (the merged name) say which call; ``reason`` why it needed
    approval (see :func:`~supervisor.tools._approval.approval_reason`).
    """

    def __init__(self, message: str, *, server: str, tool: str, reason: str) -> None:
        super().__init__(message)
        self.server = server
        self.tool = tool
        self.reason = reason


class ApprovalRequired(ApprovalDenied):
    """The call needed approval and there is no approval callback (headless): it fails
    closed, and the message says how to grant approval; ``cli_message`` says it in the
    command line's terms (no terminal to ask on; ``--yes``), without Python's.

    ``allow`` is the change to the server's config that would let the call go ahead
    without asking, when one would (``"add 'delete' to the server's autoApprove in the
    config"``); ``None`` when only an approval can (the tool is listed in the server's
    ``approve``) — the front ends say how to give one in their own terms."""

    def __init__(
        self,
        message: str,
        *,
        server: str,
        tool: str,
        reason: str,
        cli_message: str | None = None,
        allow: str | None = None,
    ) -> None:
        super().__init__(message, server=server, tool=tool, reason=reason)
        self.cli_message = message if cli_message is None else cli_message
        self.allow = allow


class ApprovalAsked(SupervisorError):
    """The call needs approval and its approval is being asked of the caller in another
    round trip (a gateway's 2026-07-28 client, through an ``input_required`` result):
    it was not sent, and is made when the caller asks again with the answer.
    ``request`` is the :class:`~supervisor.tools.ApprovalRequest` asked about."""

    def __init__(self, message: str, *, request: object) -> None:  # an ApprovalRequest
        super().__init__(message)
        self.request = request


class RateLimited(SupervisorError):
    """The call was over a rate limit and was refused before anything was sent (not
    executed): ``retry_after`` is the seconds until it would fit, ``limit`` the rate
    (``"60/min"``), ``by`` whose limit — ``"server"`` (the server's ``rateLimit``) or
    ``"caller"`` (a team gateway's policy, per caller); ``server`` and ``tool`` (the
    merged name) say which call."""

    def __init__(
        self, message: str, *, server: str, tool: str, retry_after: float, limit: str, by: str
    ) -> None:
        super().__init__(message)
        self.server = server
        self.tool = tool
        self.retry_after = retry_after
        self.limit = limit
        self.by = by


class AuditLogError(SupervisorError):
    """The audit log (``supervisor.audit``) cannot be opened or written: ``path`` names
    the file. A supervisor whose audit log cannot be opened does not start; once a line
    could not be written, tool calls are refused (before they are sent) until it can be
    again. The ``__cause__`` is the operating system's error."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


def _tool_errors_message(tool: str, errors: list[tuple[str, str]], what: str) -> str:
    if len(errors) == 1:
        return f"tool {tool!r}: {errors[0][0]}: {errors[0][1]}"
    lines = [f"  {path}: {message}" for path, message in errors]
    return "\n".join([f"tool {tool!r}: {len(lines) or 'no'} {what}", *lines])


class ToolNameConflict(SupervisorError, ValueError):
    """Two tools (or a tool and a built-in) want the merged ``name`` and the clash policy
    is ``error``; ``servers`` lists who wants it, in config order (``"<built-in>"`` for an
    embedder's built-in tool)."""

    def __init__(self, message: str, *, name: str, servers: list[str]) -> None:
        super().__init__(message)
        self.name = name
        self.servers = servers


class AuthProblem(SupervisorError):
    """Why no token can be had now: a login is needed (``needs_login``) or the
    authorization server refused (``oauth_error`` holds its error code when it gave one)."""

    def __init__(self, message: str, *, needs_login: bool, oauth_error: str | None = None) -> None:
        super().__init__(message)
        self.needs_login = needs_login
        self.oauth_error = oauth_error


class LoginCancelled(SupervisorError):
    """The browser came back with an error (``access_denied`` …) instead of a code."""

    def __init__(self, error: str, description: str | None) -> None:
        text = error if not description else f"{error}: {description}"
        super().__init__(f"the authorization server answered {text}")
        self.error = error
        self.description = description


class ProxyEnded(SupervisorError):
    """The chaos proxy's COMMAND could not be started (``exit_code`` 127: not found, 126:
    not runnable)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code
