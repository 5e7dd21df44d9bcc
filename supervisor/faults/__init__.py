"""Fault injection: seeded fault plans, the engine that applies them, and the places
they are injected (docs/faults.md).

- :func:`load_plan` reads a plan (JSON file, text, mapping or list of rules) into a
  :class:`Plan`; :class:`PlanError` names each wrong field's path.
- :class:`FaultEngine` decides, message by message, which rules fire; every injected
  fault is an :class:`Injected` in its ``log`` (:func:`faults_json` writes it).
- :class:`Link` carries a message stream through an engine (stdio proxy, supervised
  stdio and in-memory servers); :func:`run_stdio_proxy` is ``mcp-supervisor chaos``.
- A supervised server's ``faults`` plan (docs/config.md) is injected by its transport:
  :class:`~supervisor.transports.StdioTransport` carries its lines through a link, and
  :class:`FaultyTransport` wraps the message-level ones (in-memory, WebSocket).
"""

from ._engine import FaultEngine, Injected, Message, faults_json, read_faults
from ._link import Link, Target
from ._plan import ACTIONS, TO_CLIENT, TO_SERVER, Action, Plan, PlanError, Rule, When, load_plan
from ._session import FaultyTransport
from ._stdio import ProxyEnded, run_stdio_proxy

__all__ = [
    "ACTIONS",
    "TO_CLIENT",
    "TO_SERVER",
    "Action",
    "FaultEngine",
    "FaultyTransport",
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
    "run_stdio_proxy",
]
