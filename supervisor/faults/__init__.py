"""Fault injection: seeded fault plans, the engine that applies them, the places they are
injected, and the checker that judges what a run did (docs/faults.md).

This is the toolkit above the supervisor's core. The core knows a server's ``faults``
plan (its language, :mod:`supervisor.config._plan`, is part of the config format) and
the interface a fault injector offers its transports
(:mod:`supervisor.transports._faults`); the injector itself — the engine, the link, the
faulty transports (:mod:`supervisor.faults._inject`) — lives here and is given to the
core from above: ``open_supervisor(config, injector=Injector())``, as the command line
and :mod:`supervisor.testing` do. The call history, the checker, its reports and the
``chaos`` proxies live here too; the call outcomes are the core's
(:mod:`supervisor.tools._outcome`). This façade exports :class:`Injector`, :func:`load_plan`,
:func:`faults_json`, :class:`CallHistory`, :func:`check`, :class:`ResourceSampler`,
:func:`write_json` and :func:`write_html`; the other names below are imported from their
modules.

- :class:`Injector` makes each supervised server's fault engine from its plan (what
  ``open_supervisor(injector=...)`` takes; a plan without one is a
  :class:`~supervisor.errors.ConfigError` that says to pass it).
- :func:`load_plan` reads a plan (JSON file, text, mapping or list of rules) into a
  :class:`~supervisor.config._plan.Plan`; :class:`~supervisor.config._plan.PlanError`
  names each wrong field's path.
- :class:`~supervisor.faults._inject._engine.FaultEngine` decides, message by message,
  which rules fire; every injected fault is an
  :class:`~supervisor.transports._faults.Injected` in its ``log`` (:func:`faults_json`
  writes it).
- :class:`~supervisor.faults._inject._link.Link` carries a message stream through an engine
  (stdio proxy, supervised stdio and in-memory servers);
  :func:`~supervisor.faults._stdio.run_stdio_proxy` is ``mcp-supervisor chaos``.
- A supervised server's ``faults`` plan (docs/config.md) is injected by its transport,
  through what the engine offers it: :class:`~supervisor.transports._stdio.StdioTransport`
  carries its lines through a link, and
  :class:`~supervisor.faults._inject._session.FaultyTransport` wraps the message-level ones
  (in-memory, WebSocket).
- :class:`CallHistory` records every tool call through the supervisor, as one of the
  gate's call observers (``open_supervisor(..., history=CallHistory())``): ``invoke``
  then one outcome, ``ok``, ``fail`` (definitely not executed) or ``info`` (it may have
  executed), with its id sent to the server in the request's ``_meta``
  (:data:`~supervisor.tools._call_id.CALL_ID_META`).
- :func:`check` turns a history, the servers' executions per call and the events into a
  :class:`~supervisor.faults._checker.Verdict`: lost and duplicated calls, calls past their
  deadline, restarts beyond the intensity, a catalog out of step, processes left behind,
  resources growing (:class:`ResourceSampler`,
  :func:`~supervisor.faults._checker.leftover_processes`).
- :func:`write_json` and :func:`write_html` write the run's report: its data, and a
  self-contained page with one timeline per server.
- :class:`~supervisor.faults._inject._http.FaultyHTTPTransport` carries Streamable HTTP
  exchanges through an engine (an ``httpx2`` transport: supervised remote servers,
  ``http_transport(faults=...)``); :func:`~supervisor.faults._http_proxy.run_http_proxy`
  is ``mcp-supervisor chaos --listen HOST:PORT --upstream URL``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from ..config._plan import load_plan as load_plan
    from ._checker import ResourceSampler as ResourceSampler
    from ._checker import check as check
    from ._history import CallHistory as CallHistory
    from ._inject._engine import faults_json as faults_json
    from ._injector import Injector as Injector
    from ._report import write_html as write_html
    from ._report import write_json as write_json


__getattr__, __dir__ = attach(__name__)
