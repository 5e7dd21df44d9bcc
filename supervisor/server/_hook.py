"""The supervision tree's decisions, taken in by the servers they are about.

The tree decides every start, restart and give-up of a server's actor; its notify hook
(:func:`tree_hook`) is the one place where those decisions reach a server: they are
applied to its :class:`~supervisor.server._state.ServerState` (attempt, restarts, next retry,
failed or started over), then the ``mcp.error`` they call for is published.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from ..actors import Intensity, Tree, open_tree
from ..actors._decisions import Decision, Notify
from ..events import _catalog as events
from ._managed import ServerHandle


def tree_hook(
    servers: Mapping[str, ServerHandle],
    publish: Callable[[events.Event], None],
    *,
    supervisor: str | None = None,
) -> Notify:
    """The notify hook of a tree of servers: each decision reaches the server it is about
    (:meth:`ServerState.decided <supervisor.server._state.ServerState.decided>`, then the
    ``mcp.error`` it calls for) — a decision of the supervisor named ``supervisor``, when
    given — then publishes its ``supervisor.*`` event."""

    def decided(decision: Decision) -> None:
        if supervisor is not None and decision.supervisor != supervisor:
            server = None  # another part of the tree: the bus, the registry
        else:
            server = servers.get(decision.child)
        if server is not None:
            announce = server.state.decided(decision)
            if announce is not None:  # its mcp.error first: the cause, then the outcome
                server.announce(*announce)
        event = events.tree_event(decision)
        if event is not None:
            publish(event)

    return decided


@contextlib.asynccontextmanager
async def open_servers(servers: Sequence[ServerHandle], **tree_options: Any) -> AsyncIterator[Tree]:
    """Supervise ``servers`` (in order) for the duration of the block, in a root tree whose
    decisions reach them; ``tree_options`` go to :func:`~supervisor.actors.open_tree`.
    As in ``open_supervisor``, the tree's intensity is unlimited unless given: each
    server's own attempt budget decides when it is given up."""
    tree_options.setdefault("intensity", Intensity.unlimited())
    by_name = {s.name: s for s in servers}
    publish = servers[0].publish if servers else (lambda event: None)
    async with open_tree(
        [s.spec for s in servers], notify=tree_hook(by_name, publish), **tree_options
    ) as tree:
        yield tree
