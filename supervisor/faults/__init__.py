"""Fault injection: seeded fault plans, the engine that applies them, the places they are
injected, and the checker that judges what a run did (docs/faults.md).

This is the toolkit above the supervisor's core: the call history, the checker, its
reports and the ``chaos`` proxies live here; what a supervised server's ``faults`` plan
needs (the plan, the engine, :class:`Link`, the faulty transports) is the core's own
(:mod:`supervisor.injection`), and so are the call outcomes (:mod:`supervisor.calls`):
both are re-exported here under the names below.

- :func:`load_plan` reads a plan (JSON file, text, mapping or list of rules) into a
  :class:`Plan`; :class:`PlanError` names each wrong field's path.
- :class:`FaultEngine` decides, message by message, which rules fire; every injected
  fault is an :class:`Injected` in its ``log`` (:func:`faults_json` writes it).
- :class:`Link` carries a message stream through an engine (stdio proxy, supervised
  stdio and in-memory servers); :func:`run_stdio_proxy` is ``mcp-supervisor chaos``.
- A supervised server's ``faults`` plan (docs/config.md) is injected by its transport:
  :class:`~supervisor.transports._stdio.StdioTransport` carries its lines through a link, and
  :class:`FaultyTransport` wraps the message-level ones (in-memory, WebSocket).
- :class:`CallHistory` records every tool call through the supervisor, as one of the
  gate's call observers (``open_supervisor(..., history=CallHistory())``): ``invoke``
  then one outcome, ``ok``, ``fail`` (definitely not executed) or ``info`` (it may have
  executed), with its id sent to the server in the request's ``_meta``
  (:data:`CALL_ID_META`).
- :func:`check` turns a history, the servers' executions per call and the events into a
  :class:`Verdict`: lost and duplicated calls, calls past their deadline, restarts beyond
  the intensity, a catalog out of step, processes left behind, resources growing
  (:class:`ResourceSampler`, :func:`leftover_processes`).
- :func:`write_json` and :func:`write_html` write the run's report: its data, and a
  self-contained page with one timeline per server.
- :class:`FaultyHTTPTransport` carries Streamable HTTP exchanges through an engine (an
  ``httpx2`` transport: supervised remote servers, ``http_transport(faults=...)``);
  :func:`run_http_proxy` is ``mcp-supervisor chaos --listen HOST:PORT --upstream URL``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from ..injection._engine import faults_json as faults_json
    from ..injection._plan import load_plan as load_plan
    from ._checker import ResourceSampler as ResourceSampler
    from ._checker import check as check
    from ._history import CallHistory as CallHistory
    from ._report import write_html as write_html
    from ._report import write_json as write_json


__getattr__, __dir__ = attach(__name__)
