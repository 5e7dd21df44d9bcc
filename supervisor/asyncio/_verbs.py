"""The handle's verbs, in one place: which public names of the trio handle
(:class:`~supervisor.runtime.SupervisorHandle`) the asyncio handle
(:class:`~supervisor.asyncio.AsyncSupervisor`) and the blocking one
(:class:`supervisor.Supervisor`) offer, how each crosses from the trio run, and which they
do not offer, with why.

Each handle spells its verbs out, typed, for readers and type checkers: the trio
handle's names, parameters (names, kinds, defaults, annotations) and overloads; a
verb's result is the trio one's, awaited on the asyncio handle and returned by the
blocking one. tests/test_handles.py holds the three handles to this table: a public
name of the trio handle that is neither in :data:`VERBS` nor in :data:`NOT_OFFERED`
fails it, as does a verb whose parameters differ from the trio one's.

:data:`RENAMED` are the asyncio and blocking handles' old names of verbs, kept working
(each warns once).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["NOT_OFFERED", "RENAMED", "VERBS", "Crossing"]


class Crossing(enum.Enum):
    """How a verb of the trio handle crosses to the asyncio and blocking handles."""

    #: an ``async`` method: run in a trio task of the supervisor's run, awaited (asyncio)
    #: or waited for (blocking)
    AWAITED = "awaited"
    #: a plain method that reads the running supervisor (trio's clock, its actors'
    #: state): run in a trio task all the same, as an ``async`` method on asyncio
    RUN = "run"
    #: a property whose value is plain data, read as it is (the same thread): a
    #: property on each handle
    READ = "read"
    #: a block of events (``subscribe``): an ``async with`` yielding an async iterator
    #: (asyncio), a ``with`` yielding an iterator (blocking)
    EVENTS = "events"


#: Every verb the asyncio and blocking handles offer, by its name (the trio handle's).
VERBS: Mapping[str, Crossing] = MappingProxyType(
    {
        # tools
        "call": Crossing.AWAITED,
        "tools": Crossing.AWAITED,
        "catalog": Crossing.READ,
        "snapshot": Crossing.READ,
        "snapshot_after": Crossing.AWAITED,
        "search": Crossing.RUN,
        "resolve": Crossing.RUN,
        "approval_reason": Crossing.RUN,
        # resources and prompts
        "resources": Crossing.AWAITED,
        "resource_templates": Crossing.AWAITED,
        "read_resource": Crossing.AWAITED,
        "subscribe_resource": Crossing.AWAITED,
        "unsubscribe_resource": Crossing.AWAITED,
        "prompts": Crossing.AWAITED,
        "get_prompt": Crossing.AWAITED,
        "complete": Crossing.AWAITED,
        # servers
        "connect_all": Crossing.AWAITED,
        "restart": Crossing.AWAITED,
        "stop": Crossing.AWAITED,
        "set_log_level": Crossing.AWAITED,
        "reconfigure": Crossing.AWAITED,
        "departed": Crossing.RUN,
        # OAuth
        "login": Crossing.AWAITED,
        "logout": Crossing.AWAITED,
        "auth_status": Crossing.RUN,
        # health
        "status": Crossing.RUN,
        "metrics": Crossing.RUN,
        "summary": Crossing.RUN,
        "statistics": Crossing.RUN,
        "registry_statistics": Crossing.RUN,
        "faults": Crossing.RUN,
        # events
        "subscribe": Crossing.EVENTS,
    }
)

#: The trio handle's public names the asyncio and blocking handles do not offer, and why.
NOT_OFFERED: Mapping[str, str] = MappingProxyType(
    {
        "servers": "server views, whose methods are trio's (from trio code: `trio_handle.servers`)",
        "server": "a server view, whose methods are trio's (from trio code: "
        "`trio_handle.server(name)`)",
        "recent_calls": "a window kept while a trio `with` block runs, read on trio's "
        "clock (from trio code: `trio_handle.recent_calls()`)",
    }
)

#: The asyncio and blocking handles' old names of verbs: old name → the verb's name.
RENAMED: Mapping[str, str] = MappingProxyType({"read": "read_resource", "prompt": "get_prompt"})
