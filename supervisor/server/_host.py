"""What a server actor needs of the server it serves: a narrow interface.

:class:`~supervisor.server.ManagedServer` provides it; the actor (and its listings) depend
on this protocol only, so the server can make actors without the two modules importing
each other.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import mcp_types as types

from ..actors import Address, Backoff, GiveUp, Restart
from ..config._limits import Limits as Limits
from ..events import _catalog as events
from ..transports._remote import TransportLike
from ._health import Health
from ._startup import StartSlots


class ServerSettings(Protocol):
    """What a server actor reads from its configuration (``supervisor.config.ServerConfig``)."""

    name: str
    type: str
    command: str | None
    args: Sequence[str]
    env: Mapping[str, str]
    cwd: str | os.PathLike[str] | None
    inherit_env: bool
    url: str | None
    headers: Mapping[str, str]
    lazy: bool
    timeout: float
    init_timeout: float
    #: seconds between pings; 0 disables them
    ping_interval: float
    #: calls in a row that time out before the server is degraded and probed
    degraded_after: int
    #: restarts tried in a row before the server is failed (0: fail at the first error)
    max_attempts: int
    backoff: Backoff
    #: OTP restart type of the server's actor
    restart: Restart
    #: what running out of ``max_attempts`` does
    give_up: GiveUp
    #: seconds a stopping server gets before it is stopped by force
    shutdown_timeout: float


class ServerHost(Protocol):
    """The server an actor incarnation serves: its config, mailbox, health, listings and
    the events it publishes; it outlives every incarnation."""

    name: str
    config: ServerSettings
    health: Health
    limits: Limits
    client_options: Mapping[str, object]
    ping_timeout: float
    retry_idempotent: bool
    stderr_tail: collections.deque[str]
    #: incarnations started so far
    incarnations: int
    #: the live incarnation, whose connection calls may use directly (a ServerActor)
    current: Any
    #: the consecutive restart the tree last decided on
    attempt: int
    #: a ``type: remote`` server that turned out to speak only legacy SSE
    use_sse: bool
    #: the start slots its connections queue for (shared by a supervisor's servers);
    #: ``None``: it connects at once
    start_slots: StartSlots | None
    tools: list[types.Tool]
    resources: list[types.Resource]
    resource_templates: list[types.ResourceTemplate]
    prompts: list[types.Prompt]
    listed: bool

    @property
    def address(self) -> Address: ...

    def tool(self, name: str) -> types.Tool | None: ...

    def transport(self) -> TransportLike: ...

    def emit(self, event: events.Event) -> None: ...

    def changed(self) -> None: ...
