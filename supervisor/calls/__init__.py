"""What a tool call is and how it ends: the outcome labels every part of the supervisor
shares (:func:`classify`: ``ok``, ``fail``, ``info``), the ``_meta`` key a call's id
travels under (:data:`CALL_ID_META`), and the one interface through which the call
history, the audit log, tracing and the dashboard see the gate's calls
(:class:`CallObserver`, :class:`CallWatch`, :class:`Call`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from ._observer import Call as Call
    from ._observer import CallObserver as CallObserver
    from ._observer import CallWatch as CallWatch
    from ._observer import History as History
    from ._outcome import CALL_ID_META as CALL_ID_META
    from ._outcome import FAIL as FAIL
    from ._outcome import INFO as INFO
    from ._outcome import OK as OK
    from ._outcome import Outcome as Outcome
    from ._outcome import classify as classify
    from ._outcome import describe_error as describe_error


__getattr__, __dir__ = attach(__name__)
