"""Monitoring: the status table, metrics, the Prometheus exposition, the session summary.

* :func:`status_table` — health records as the ``mcp-supervisor status`` table (a pure
  function of the records and a clock); :func:`progress_line` while servers connect;
* ``status_document`` — the ``status --json`` document, records and metrics; the
  ``tools``, ``resources`` and ``prompts`` documents (``_document``), which the command
  line prints with ``--json`` and a gateway serves at ``/tools``, ``/resources`` and
  ``/prompts``;
* :class:`~supervisor.server.ServerMetrics` — one server's uptime, downtime, reconnects,
  calls and latency (``SupervisorHandle.metrics()``), estimated by a
  :class:`~supervisor.server._health.LatencyHistogram`;
* :func:`prometheus_text` — those metrics in the Prometheus text format (``/metrics``);
* ``readiness`` — ``/readyz``: 503 while a ``required`` server is down;
* :class:`SessionSummary` — what a session did (``SupervisorHandle.summary()``), and
  :func:`summary_text` to print it;
* :class:`CallWindow` — each server's recent calls, with their latency and outcome
  (``SupervisorHandle.recent_calls()``), which the dashboard's strips draw with the
  fault report's timeline drawing (:mod:`supervisor.timeline`).

See docs/monitoring.md for the table's columns and every metric.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from ..server import ServerMetrics as ServerMetrics
    from ._calls import CallWindow as CallWindow
    from ._metrics import SessionSummary as SessionSummary
    from ._metrics import prometheus_text as prometheus_text
    from ._metrics import summary_text as summary_text
    from ._table import progress_line as progress_line
    from ._table import status_table as status_table

__getattr__, __dir__ = attach(__name__)
