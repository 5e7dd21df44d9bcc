"""The fault injector a supervisor is given: ``open_supervisor(config,
injector=supervisor.faults.Injector())`` injects the servers' ``faults`` plans
(docs/faults.md) through it.

It makes each server's :class:`~supervisor.faults._inject._points.ServerFaults`, a fault
engine which offers the transports what :mod:`supervisor.transports._faults` asks: a
link for a stdio connection, a wrapper for the HTTP client's transport and for a
message-level one. The engine and its injection points are imported when the first plan
is, so a supervisor without one (the command line's, say) loads none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config._plan import Plan
    from ..transports._faults import Injected
    from ._inject._points import ServerFaults

__all__ = ["Injector"]


class Injector:
    """Injects each server's fault plan (``open_supervisor(injector=Injector())``): a
    :class:`~supervisor.transports._faults.Injector`."""

    __slots__ = ()

    def faults(
        self,
        plan: Plan,
        *,
        server: str | None = None,
        on_inject: Callable[[Injected], None] | None = None,
    ) -> ServerFaults:
        """A fault engine applying ``plan`` to ``server``'s connections, across its restarts;
        ``on_inject`` hears of each fault as it is injected."""
        from ._inject._points import ServerFaults

        return ServerFaults(plan, server=server, on_inject=on_inject)

    def __repr__(self) -> str:
        return "Injector()"
