"""The server actor: one MCP server's connection lifecycle and health.

Each configured server is a :class:`~._managed.ServerHandle` — its config, its mailbox
(:class:`~supervisor.actors.Address`) and its :class:`~._state.ServerState` (health, listings, auth
problem, transport choice) — which outlives the :class:`~._actor.ServerActor` incarnations that
hold one SDK ``Client`` each. Callers use the handle (calls, reads, prompts, records) and
only read the state; its writers are the actor and the tree's decisions. The supervision
tree restarts incarnations with the server's backoff and gives up on it (``failed``)
after its attempts; it never affects another server.

States::

    idle ──► connecting ──► connected ──► disconnected ──► connecting ──► …
                 │                                              │
                 └──────────────► failed (gave up) ◄────────────┘        stopped

An incarnation connects lazily — on the first call or tool listing — unless the server is
``lazy: false`` or the incarnation replaces one that died. Calls wait (in the mailbox, or
before being sent) while the server connects or restarts, each within its own deadline.
A call already sent when the connection dies fails with :class:`CallMayHaveTakenEffect`
and is never re-sent.

An embedder's ``elicitation_callback`` is wrapped per server
(:func:`~._elicitation.checked_elicitation`): an accepted answer gets the requested
schema's defaults and is checked against it (:func:`complete_elicitation`); one that
does not fit is refused, not sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from ..errors import CallMayHaveTakenEffect as CallMayHaveTakenEffect
    from ..errors import CatalogTooLarge as CatalogTooLarge
    from ..errors import ConnectTimeout as ConnectTimeout
    from ..errors import PaginationError as PaginationError
    from ..errors import ProtocolViolation as ProtocolViolation
    from ..errors import ServerError as ServerError
    from ..errors import ServerRequestError as ServerRequestError
    from ..errors import ServerUnavailable as ServerUnavailable
    from ..errors import StaleConnection as StaleConnection
    from ..errors import ToolCallTimeout as ToolCallTimeout
    from ._elicitation import complete_elicitation as complete_elicitation
    from ._health import HealthRecord as HealthRecord
    from ._health import ServerMetrics as ServerMetrics
    from ._health import ServerStatus as ServerStatus
    from ._options import per_server as per_server

__getattr__, __dir__ = attach(__name__)
