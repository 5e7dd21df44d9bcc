"""mcp-supervisor: keep many MCP servers available, the way an OTP supervision tree does.

This is the public façade; everything here is re-exported from a focused module, and
imported from it when first used (so ``import supervisor`` itself loads almost nothing):

- :func:`open_supervisor` / :func:`load_config` — run configured MCP servers
  (:func:`run_call`: one call from synchronous code; :class:`Supervisor`: a blocking
  context for it)
  (:mod:`supervisor.runtime`, :mod:`supervisor.config`, :mod:`supervisor.server`);
- :mod:`supervisor.errors` — every error, under :class:`SupervisorError`;
- :mod:`supervisor.registry`, :mod:`supervisor.tools` — the merged catalog, results and
  the approval policy;
- :mod:`supervisor.actors` — the generic actor runtime and OTP supervision tree;
- :mod:`supervisor.events` — the event catalog and the event bus;
- :mod:`supervisor.monitor` — the status table, metrics (:class:`ServerMetrics`), the
  Prometheus text and the session summary (:class:`SessionSummary`);
- :mod:`supervisor.log` — structlog configuration and secret redaction.

supervisord also imports as ``supervisor``: installed in the same environment, the two
overwrite each other's files, and importing this package says so on standard error
(:mod:`supervisor._clash`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import attach

if TYPE_CHECKING:
    from ._version import __version__ as __version__
    from .actors import ActorStopped as ActorStopped
    from .actors import ActorUnavailable as ActorUnavailable
    from .actors import CallTimeout as CallTimeout
    from .actors import RequestAborted as RequestAborted
    from .actors import SupervisorError as SupervisorError
    from .actors import SupervisorGaveUp as SupervisorGaveUp
    from .asyncio._blocking import Supervisor as Supervisor
    from .config import Config as Config
    from .config import ServerConfig as ServerConfig
    from .config import load_config as load_config
    from .errors import ApprovalDenied as ApprovalDenied
    from .errors import ApprovalRequired as ApprovalRequired
    from .errors import CallMayHaveTakenEffect as CallMayHaveTakenEffect
    from .errors import ConfigError as ConfigError
    from .errors import PromptArgumentsInvalid as PromptArgumentsInvalid
    from .errors import ServerError as ServerError
    from .errors import ServerRequestError as ServerRequestError
    from .errors import ServerUnavailable as ServerUnavailable
    from .errors import ToolArgumentsInvalid as ToolArgumentsInvalid
    from .errors import ToolCallTimeout as ToolCallTimeout
    from .errors import ToolError as ToolError
    from .errors import ToolOutputInvalid as ToolOutputInvalid
    from .errors import UnknownPrompt as UnknownPrompt
    from .errors import UnknownResource as UnknownResource
    from .errors import UnknownServer as UnknownServer
    from .errors import UnknownTool as UnknownTool
    from .events._bus import Bus as Bus
    from .log import configure_logging as configure_logging
    from .monitor import SessionSummary as SessionSummary
    from .registry import Catalog as Catalog
    from .registry import Entry as Entry
    from .runtime import SupervisorHandle as SupervisorHandle
    from .runtime import open_supervisor as open_supervisor
    from .runtime import run_call as run_call
    from .server import HealthRecord as HealthRecord
    from .server import ServerMetrics as ServerMetrics
    from .tools import ApprovalRequest as ApprovalRequest
    from .tools import ToolResult as ToolResult


__getattr__, __dir__ = attach(__name__)


def _beside_supervisord() -> None:
    """Say so if supervisord's package shares this folder (one ``stat``)."""
    from os.path import dirname, exists, join  # loaded with the interpreter

    supervisord = join(dirname(__file__), "supervisord.py")
    if exists(supervisord):
        from ._clash import say_supervisord

        say_supervisord(supervisord)


_beside_supervisord()
