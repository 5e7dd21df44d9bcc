"""The messages a server actor serves (through its mailbox, or straight onto its
connection), and the signal that a call must go through the mailbox after all."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

# the request ``_meta`` key a recorded call's id travels under (see supervisor.faults)
from ..tools._outcome import CALL_ID_META as CALL_ID_META

# what a call's progress callback is, and a relayed call's rounds: the call's own
from ..tools._request import InputRound as InputRound
from ..tools._request import Progress as Progress

if TYPE_CHECKING:
    import mcp_types as types

    from ..tools._request import ToolCall


@attrs.frozen
class CallTool:
    """The tool call ``call`` (:class:`~supervisor.tools._request.ToolCall`: its name,
    options and callbacks) as its server is sent it: the server's tool ``tool`` (its own
    name) with ``arguments`` (as checked: what is sent); ``call_id``, if given, goes to
    the server in the request's ``_meta`` (:data:`CALL_ID_META`); the request is sent in
    the caller's trace ``context``, so the trace continues past the mailbox."""

    call: ToolCall
    tool: str
    arguments: Mapping[str, object]
    call_id: str | None = None
    #: the caller's trace context (:func:`supervisor.tracing.current`), for the request
    context: object | None = None
    #: the log level asked of the server (the call's, else the supervisor's), for a
    #: 2026-07-28 server's per-request opt-in
    log_level: str | None = None
    #: the capabilities of the client the call is made for (a gateway's caller), for a
    #: 2026-07-28 server (see :data:`~supervisor.transports._encoding.caller_capabilities`)
    capabilities: Mapping[str, Any] | None = None
    #: hears the server's progress notifications for this call (the call's callback)
    progress: Progress | None = None

    @property
    def rounds(self) -> InputRound | None:
        """The call's relayed rounds (``None``: input requests are answered here)."""
        return self.call.rounds

    @property
    def called(self) -> str:
        """The merged name the tool was called by (what the call's errors name)."""
        return self.call.name


@attrs.frozen
class ListTools:
    """Answer with the server's tools, once connected."""


@attrs.define(eq=False)
class ReadResource:
    """Read ``uri``. Read-only: if the connection dies with it in flight, it is sent once
    more on the next connection (``sends`` counts how often it went out). ``rounds``
    relays a multi-round-trip read, as :class:`CallTool`'s does a call."""

    uri: str
    rounds: InputRound | None = None
    sends: int = 0
    #: the capabilities of the client it is made for, as :attr:`CallTool.capabilities`
    capabilities: Mapping[str, Any] | None = None


@attrs.define(eq=False)
class GetPrompt:
    """Get the prompt ``name`` with ``arguments``; re-sent once, like :class:`ReadResource`;
    ``rounds`` relays a multi-round-trip one, as :class:`CallTool`'s does a call."""

    name: str
    arguments: Mapping[str, str] | None
    rounds: InputRound | None = None
    sends: int = 0
    #: the capabilities of the client it is made for, as :attr:`CallTool.capabilities`
    capabilities: Mapping[str, Any] | None = None


@attrs.define(eq=False)
class Complete:
    """Ask for completions of ``argument`` (``{"name", "value"}``) of the prompt or resource
    template ``ref`` (the server's own names), ``context`` holding the arguments already
    given; re-sent once, like :class:`ReadResource`."""

    ref: types.PromptReference | types.ResourceTemplateReference
    argument: Mapping[str, str]
    context: Mapping[str, str] | None = None
    sends: int = 0


@attrs.define(eq=False)
class TaskRequest:
    """Send ``tasks/get``, ``tasks/update`` or ``tasks/cancel`` (``method``) with
    ``params`` (the task's id as the server named it) — for a client following a task
    the server made (see :mod:`._tasks`). Re-sent once if the connection dies with it in
    flight, like :class:`ReadResource`: reading a task is read-only, and the extension
    has a server ignore answers it already has and cancel a task once."""

    method: str
    params: Mapping[str, object]
    sends: int = 0


class _NotSent(Exception):
    """The call did not reach the server (or may be sent again): send it once more."""
