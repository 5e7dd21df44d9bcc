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
    ├── UnknownServer               no configured server of that name
    ├── ServerError                 something went wrong with one MCP server (.server)
    │   ├── ServerUnavailable       failed after its attempts, or stopped: fails fast
    │   ├── ConnectTimeout          the handshake took longer than initTimeout
    │   ├── StaleConnection         a ping went unanswered
    │   ├── CatalogTooLarge         more tools (or bytes) than the limits allow
    │   ├── CallMayHaveTakenEffect  the connection died during the call; not retried
    │   ├── ToolCallTimeout         the call took longer than its timeout
    │   └── ServerRequestError      the server answered with an MCP error (.code)
    ├── TransportError              a connection failed or ended
    │   ├── ServerExited            the server process exited (.exit_code)
    │   └── ProtocolViolation       the server wrote something that is not MCP
    └── WebSocketError              a WebSocket connection failed (.url)

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
from .server import CallMayHaveTakenEffect as CallMayHaveTakenEffect
from .server import CatalogTooLarge as CatalogTooLarge
from .server import ConnectTimeout as ConnectTimeout
from .server import ServerError as ServerError
from .server import ServerRequestError as ServerRequestError
from .server import ServerUnavailable as ServerUnavailable
from .server import StaleConnection as StaleConnection
from .server import ToolCallTimeout as ToolCallTimeout
from .transports import ProtocolViolation as ProtocolViolation
from .transports import ServerExited as ServerExited
from .transports import TransportError as TransportError
from .ws import WebSocketError as WebSocketError

__all__ = [
    "ActorError",
    "ActorStopped",
    "ActorUnavailable",
    "CallMayHaveTakenEffect",
    "CallTimeout",
    "CatalogTooLarge",
    "ConfigError",
    "ConnectTimeout",
    "FieldError",
    "MailboxFull",
    "NoSuchChild",
    "ProtocolViolation",
    "RequestAborted",
    "ServerError",
    "ServerExited",
    "ServerRequestError",
    "ServerUnavailable",
    "StaleConnection",
    "StartFailed",
    "SupervisorError",
    "SupervisorGaveUp",
    "SupervisorNotRunning",
    "ToolCallTimeout",
    "TransportError",
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
