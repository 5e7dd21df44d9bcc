"""Fault injection: seeded fault plans, the engine that applies them, the places they are
injected, and the checker that judges what a run did (docs/faults.md).

- :func:`load_plan` reads a plan (JSON file, text, mapping or list of rules) into a
  :class:`Plan`; :class:`PlanError` names each wrong field's path.
- :class:`FaultEngine` decides, message by message, which rules fire; every injected
  fault is an :class:`Injected` in its ``log`` (:func:`faults_json` writes it).
- :class:`Link` carries a message stream through an engine (stdio proxy, supervised
  stdio and in-memory servers); :func:`run_stdio_proxy` is ``mcp-supervisor chaos``.
- A supervised server's ``faults`` plan (docs/config.md) is injected by its transport:
  :class:`~supervisor.transports.StdioTransport` carries its lines through a link, and
  :class:`FaultyTransport` wraps the message-level ones (in-memory, WebSocket).
- :class:`CallHistory` records every tool call through the supervisor
  (``open_supervisor(..., history=CallHistory())``): ``invoke`` then one outcome, ``ok``,
  ``fail`` (definitely not executed) or ``info`` (it may have executed), with its id
  sent to the server in the request's ``_meta`` (:data:`CALL_ID_META`).
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

from ._checker import (
    DEFAULT_DEADLINE_SLACK,
    ResourceSample,
    ResourceSampler,
    ServerVerdict,
    Verdict,
    check,
    fault_fields,
    leftover_processes,
    open_fds,
    rss_kb,
    spawned_pids,
    timed_events,
)
from ._engine import FaultEngine, Injected, Message, faults_json, read_faults
from ._history import CALL_ID_META, CallHistory, CallRecord, Outcome, classify
from ._http import FaultyHTTPTransport
from ._http_proxy import run_http_proxy
from ._link import CallRecorder, Link, Target
from ._plan import ACTIONS, TO_CLIENT, TO_SERVER, Action, Plan, PlanError, Rule, When, load_plan
from ._report import render_html, server_states, write_html, write_json
from ._session import FaultyTransport
from ._stdio import ProxyEnded, run_stdio_proxy

__all__ = [
    "ACTIONS",
    "CALL_ID_META",
    "DEFAULT_DEADLINE_SLACK",
    "TO_CLIENT",
    "TO_SERVER",
    "Action",
    "CallHistory",
    "CallRecorder",
    "CallRecord",
    "FaultEngine",
    "FaultyTransport",
    "FaultyHTTPTransport",
    "Injected",
    "Link",
    "Message",
    "Outcome",
    "Plan",
    "PlanError",
    "ProxyEnded",
    "ResourceSample",
    "ResourceSampler",
    "Rule",
    "ServerVerdict",
    "Target",
    "Verdict",
    "When",
    "check",
    "classify",
    "fault_fields",
    "faults_json",
    "leftover_processes",
    "load_plan",
    "open_fds",
    "read_faults",
    "render_html",
    "rss_kb",
    "run_http_proxy",
    "run_stdio_proxy",
    "server_states",
    "spawned_pids",
    "timed_events",
    "write_html",
    "write_json",
]
