"""Every error the package raises, importable from one place.

::

    SupervisorError                 root: catch this to catch everything we raise
    ├── ActorError                  a request to an actor did not produce a reply
    │   ├── CallTimeout             the caller's deadline passed first
    │   ├── MailboxFull             a cast found the mailbox full
    │   ├── ActorUnavailable        the child gave up restarting; calls fail fast
    │   ├── ActorStopped            the child was terminated (or never started)
    │   └── RequestAborted          the incarnation died while handling the request
    ├── SupervisorGaveUp            restart intensity exceeded; the supervisor stopped
    ├── StartFailed                 a child raised before it was ready
    ├── NoSuchChild                 no child of that id in this supervisor
    ├── SupervisorNotRunning        a request to a supervisor that is not running
    ├── ConfigError                 a config file or mapping is unusable; .errors lists why
    ├── UnknownTool                 no server offers a tool of that (merged) name
    ├── UnknownResource             no server lists that resource URI nor a matching template
    ├── UnknownPrompt               no server offers a prompt of that (merged) name
    ├── UnknownServer               no configured server of that name
    ├── ServerError                 something went wrong with one MCP server (.server)
    │   ├── ServerUnavailable       failed after its attempts, or stopped: fails fast
    │   ├── ConnectTimeout          the handshake took longer than initTimeout
    │   ├── StaleConnection         a ping went unanswered
    │   ├── CatalogTooLarge         more tools (or bytes) than the limits allow
    │   ├── CallMayHaveTakenEffect  the connection died during the call; not retried
    │   ├── ToolCallTimeout         the call took longer than its timeout
    │   ├── RequestTimeout          a resource read or prompt request took longer than that
    │   └── ServerRequestError      the server answered with an MCP error (.code)
    ├── TransportError              a connection failed or ended
    │   ├── ServerExited            the server process exited (.exit_code)
    │   └── ProtocolViolation       the server wrote something that is not MCP
    ├── WebSocketError              a WebSocket connection failed (.url)
    ├── ToolSchemaInvalid           a tool's own input or output schema is not valid (.tool)
    ├── ToolArgumentsInvalid        arguments do not match the tool's schema (.tool, .errors)
    ├── ToolOutputInvalid           structuredContent does not match the outputSchema
    ├── PromptArgumentsInvalid      prompt arguments missing or not strings (.prompt, .errors)
    ├── ToolError                   the tool ran and reported an error (isError; .text)
    ├── ApprovalDenied              the approval callback refused the call
    │   └── ApprovalRequired        approval is needed and nobody can give it (headless)
    └── ToolNameConflict            two tools want one name and the clash policy is error

The actor runtime's errors are defined in :mod:`supervisor.actors` (which knows nothing of
MCP) and re-exported here unchanged; the MCP layers add their own subclasses below
:class:`SupervisorError`.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from .actors import ActorError as ActorError
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
from .transports import ProtocolViolation as ProtocolViolation
from .transports import ServerExited as ServerExited
from .transports import TransportError as TransportError
from .ws import WebSocketError as WebSocketError

__all__ = [
    "ActorError",
    "ActorStopped",
    "ActorUnavailable",
    "ApprovalDenied",
    "ApprovalRequired",
    "CallMayHaveTakenEffect",
    "CallTimeout",
    "CatalogTooLarge",
    "ConfigError",
    "ConnectTimeout",
    "FieldError",
    "MailboxFull",
    "NoSuchChild",
    "PromptArgumentsInvalid",
    "ProtocolViolation",
    "RequestAborted",
    "RequestTimeout",
    "ServerError",
    "ServerExited",
    "ServerRequestError",
    "ServerUnavailable",
    "StaleConnection",
    "StartFailed",
    "SupervisorError",
    "SupervisorGaveUp",
    "SupervisorNotRunning",
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
    "WebSocketError",
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

        mcpServers.github.heders: unknown field
        mcpServers.jira: needs either "command" (a local server) or "url" (a remote server)

    ``path`` is the config file, or ``None`` for a config given as a mapping.
    """

    def __init__(self, errors: Iterable[FieldError], *, path: str | None = None) -> None:
        self.errors: list[FieldError] = list(errors)
        self.path = path
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
    """The server gave up restarting (``failed``) or was stopped: calls fail fast."""


class ConnectTimeout(ServerError, TimeoutError):
    """The MCP handshake did not complete within ``initTimeout``."""


class StaleConnection(ServerError):
    """A ping went unanswered: the connection is restarted."""


class CatalogTooLarge(ServerError):
    """The server lists more tools, or a bigger catalog, than the limits allow."""


class CallMayHaveTakenEffect(ServerError):
    """The connection died while the call was in flight: it may have run, and was not
    retried. ``tool`` names the tool."""

    def __init__(self, message: str, *, server: str, tool: str) -> None:
        super().__init__(message, server=server)
        self.tool = tool


class ToolCallTimeout(ServerError, TimeoutError):
    """The call did not complete within its timeout (it may still run on the server)."""

    def __init__(self, message: str, *, server: str, tool: str, timeout: float | None) -> None:
        super().__init__(message, server=server)
        self.tool = tool
        self.timeout = timeout


class RequestTimeout(ServerError, TimeoutError):
    """A resource read or a prompt request did not complete within its ``timeout``;
    ``request`` says which (``resource 'notes://index'``, ``prompt 'summarize'``)."""

    def __init__(self, message: str, *, server: str, request: str, timeout: float) -> None:
        super().__init__(message, server=server)
        self.request = request
        self.timeout = timeout


class ServerRequestError(ServerError):
    """The server answered a request with an MCP error (``code``, ``message``)."""

    def __init__(self, message: str, *, server: str, code: int) -> None:
        super().__init__(message, server=server)
        self.code = code


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
    such as ``labels[0].name`` or ``(root)``. The message names the tool, then one error per
    line::

        tool 'github_create_issue': title: 42 is not of type 'string'
    """

    def __init__(self, tool: str, errors: Iterable[tuple[str, str]]) -> None:
        self.tool = tool
        self.errors: list[tuple[str, str]] = list(errors)
        super().__init__(_tool_errors_message(tool, self.errors, "invalid arguments"))


class ToolOutputInvalid(SupervisorError):
    """A result's ``structuredContent`` does not match the tool's ``outputSchema``.

    ``tool`` and ``errors`` are as for :class:`ToolArgumentsInvalid`. The tool did run.
    """

    def __init__(self, tool: str, errors: Iterable[tuple[str, str]]) -> None:
        self.tool = tool
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
        result: object | None = None,
    ) -> None:
        super().__init__(message)
        self.tool = tool
        self.text = text
        self.server = server
        self.result = result


class ApprovalDenied(SupervisorError, PermissionError):
    """The call needed approval and the approval callback refused it; it was not sent.

    ``server`` and ``tool`` (the merged name) say which call; ``reason`` why it needed
    approval (see :func:`supervisor.tools.approval_reason`).
    """

    def __init__(self, message: str, *, server: str, tool: str, reason: str) -> None:
        super().__init__(message)
        self.server = server
        self.tool = tool
        self.reason = reason


class ApprovalRequired(ApprovalDenied):
    """The call needed approval and there is no approval callback (headless): it fails
    closed, and the message says how to grant approval."""


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
