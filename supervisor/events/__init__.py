"""Events: the catalog of everything the supervisor publishes (:mod:`._catalog`: each
event's class, kind and fields) and the bus that fans them out to subscribers
(:mod:`._bus`: glob subscriptions, a publisher that never blocks, drop-oldest with a
:class:`BusDropped` notice for a slow reader). docs/supervision.md describes both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from ._bus import Bus as Bus
    from ._bus import Subscription as Subscription
    from ._bus import open_bus as open_bus
    from ._catalog import BusDropped as BusDropped
    from ._catalog import ChildRestarted as ChildRestarted
    from ._catalog import Event as Event
    from ._catalog import to_builtins as to_builtins
    from ._catalog import tree_event as tree_event

__getattr__, __dir__ = attach(__name__)
