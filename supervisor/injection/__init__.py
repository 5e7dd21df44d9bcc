"""Fault injection into a supervised server's connection: what a server's config
``faults`` field needs (docs/config.md, "Fault injection"; the plan language in
docs/faults.md). The toolkit above the core (:mod:`supervisor.faults`: the call history,
the checker, its reports and the ``chaos`` proxies) re-exports these names.

- :func:`load_plan` reads a plan (JSON file, text, mapping or list of rules) into a
  :class:`Plan`; :class:`PlanError` names each wrong field's path.
- :class:`FaultEngine` decides, message by message, which rules fire; every injected
  fault is an :class:`Injected` in its ``log`` (:func:`faults_json` writes it).
- :class:`Link` carries a message stream through an engine (supervised stdio servers,
  the stdio proxy); :class:`FaultyTransport` wraps the message-level transports
  (in-memory, WebSocket); :class:`FaultyHTTPTransport` carries Streamable HTTP exchanges
  through an engine (an ``httpx2`` transport).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from ._engine import FaultEngine as FaultEngine
    from ._engine import Injected as Injected
    from ._engine import Message as Message
    from ._engine import faults_json as faults_json
    from ._engine import read_faults as read_faults
    from ._http import FaultyHTTPTransport as FaultyHTTPTransport
    from ._link import CallRecorder as CallRecorder
    from ._link import Link as Link
    from ._link import Target as Target
    from ._plan import ACTIONS as ACTIONS
    from ._plan import TO_CLIENT as TO_CLIENT
    from ._plan import TO_SERVER as TO_SERVER
    from ._plan import Action as Action
    from ._plan import Plan as Plan
    from ._plan import PlanError as PlanError
    from ._plan import Rule as Rule
    from ._plan import When as When
    from ._plan import load_plan as load_plan
    from ._session import FaultyTransport as FaultyTransport


__getattr__, __dir__ = attach(__name__)
