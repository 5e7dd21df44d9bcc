"""Fault injection: seeded fault plans, the engine that applies them, and the places
they are injected (docs/faults.md).

- :func:`load_plan` reads a plan (JSON file, text, mapping or list of rules) into a
  :class:`Plan`; :class:`PlanError` names each wrong field's path.
- :class:`FaultEngine` decides, message by message, which rules fire; every injected
  fault is an :class:`Injected` in its ``log`` (:func:`faults_json` writes it).
- :class:`Link` carries a message stream through an engine (stdio proxy, supervised
  stdio and in-memory servers); :func:`run_stdio_proxy` is ``mcp-supervisor chaos``.
- :class:`FaultyHTTPTransport` carries Streamable HTTP exchanges through an engine (an
  ``httpx2`` transport: supervised remote servers, ``http_transport(faults=...)``);
  :func:`run_http_proxy` is ``mcp-supervisor chaos --listen HOST:PORT --upstream URL``.
"""

from ._engine import FaultEngine, Injected, Message, faults_json, read_faults
from ._http import FaultyHTTPTransport
from ._http_proxy import run_http_proxy
from ._link import Link, Target
from ._plan import ACTIONS, TO_CLIENT, TO_SERVER, Action, Plan, PlanError, Rule, When, load_plan
from ._stdio import ProxyEnded, run_stdio_proxy

__all__ = [
    "ACTIONS",
    "TO_CLIENT",
    "TO_SERVER",
    "Action",
    "FaultEngine",
    "FaultyHTTPTransport",
    "Injected",
    "Link",
    "Message",
    "Plan",
    "PlanError",
    "ProxyEnded",
    "Rule",
    "Target",
    "When",
    "faults_json",
    "load_plan",
    "read_faults",
    "run_http_proxy",
    "run_stdio_proxy",
]
