"""Fault injection: a call history, a checker of what a run did, and its reports.

- :class:`CallHistory` records every tool call through the supervisor
  (``open_supervisor(..., history=CallHistory())``): ``invoke`` then one outcome, ``ok``,
  ``fail`` (definitely not executed) or ``info`` (it may have executed), with its id
  sent to the server in the request's ``_meta`` (:data:`CALL_ID_META`);
- :func:`check` turns a history, the servers' executions per call and the events into a
  :class:`Verdict`: lost and duplicated calls, calls past their deadline, restarts beyond
  the intensity, a catalog out of step, processes left behind, resources growing
  (:class:`ResourceSampler`, :func:`leftover_processes`);
- :func:`write_json` and :func:`write_html` write the run's report: its data, and a
  self-contained page with one timeline per server.
"""

from __future__ import annotations

from ._checker import DEFAULT_DEADLINE_SLACK as DEFAULT_DEADLINE_SLACK
from ._checker import ResourceSample as ResourceSample
from ._checker import ResourceSampler as ResourceSampler
from ._checker import ServerVerdict as ServerVerdict
from ._checker import Verdict as Verdict
from ._checker import check as check
from ._checker import fault_fields as fault_fields
from ._checker import leftover_processes as leftover_processes
from ._checker import open_fds as open_fds
from ._checker import rss_kb as rss_kb
from ._checker import spawned_pids as spawned_pids
from ._checker import timed_events as timed_events
from ._history import CALL_ID_META as CALL_ID_META
from ._history import CallHistory as CallHistory
from ._history import CallRecord as CallRecord
from ._history import Outcome as Outcome
from ._history import classify as classify
from ._report import render_html as render_html
from ._report import server_states as server_states
from ._report import write_html as write_html
from ._report import write_json as write_json

__all__ = [
    "CALL_ID_META",
    "DEFAULT_DEADLINE_SLACK",
    "CallHistory",
    "CallRecord",
    "Outcome",
    "ResourceSample",
    "ResourceSampler",
    "ServerVerdict",
    "Verdict",
    "check",
    "classify",
    "fault_fields",
    "leftover_processes",
    "open_fds",
    "render_html",
    "rss_kb",
    "server_states",
    "spawned_pids",
    "timed_events",
    "write_html",
    "write_json",
]
