"""mcp-supervisor: keep many MCP servers available, the way an OTP supervision tree does.

This is the public façade; everything here is re-exported from a focused module:

- :mod:`supervisor.actors` — the generic actor runtime and OTP supervision tree;
- :mod:`supervisor.events` — the event catalog; :mod:`supervisor.bus` — the event bus;
- :mod:`supervisor.log` — structlog configuration and secret redaction.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .actors import ActorError as ActorError
from .actors import ActorStopped as ActorStopped
from .actors import ActorUnavailable as ActorUnavailable
from .actors import CallTimeout as CallTimeout
from .actors import RequestAborted as RequestAborted
from .actors import SupervisorError as SupervisorError
from .actors import SupervisorGaveUp as SupervisorGaveUp
from .bus import Bus as Bus
from .bus import Subscription as Subscription
from .events import Event as Event
from .log import configure_logging as configure_logging
from .log import get_logger as get_logger
from .log import register_secret as register_secret

try:
    __version__ = version("mcp-supervisor")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0+unknown"

__all__ = [
    "ActorError",
    "ActorStopped",
    "ActorUnavailable",
    "Bus",
    "CallTimeout",
    "Event",
    "RequestAborted",
    "Subscription",
    "SupervisorError",
    "SupervisorGaveUp",
    "__version__",
    "configure_logging",
    "get_logger",
    "register_secret",
]
