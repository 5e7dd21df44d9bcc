"""Test helpers shipped with mcp-supervisor for users' own tests.

- :mod:`supervisor.testing.servers` — fixture MCP servers (echo, crash, exit-on-start,
  hang-init, garbage, changing, slow), runnable over stdio, Streamable HTTP and SSE, in a
  subprocess or in-process under trio, plus helpers to spawn them and count executions.
- :func:`capture_events` — a supervisor's events captured during a block, with
  ``await events.wait_for("mcp.connected", server="x", timeout=5)``.
- :class:`AsyncStateMachine` with :func:`rule`, :func:`invariant` and
  :func:`precondition` — rule-based state-machine tests whose rules are async and run
  under trio; a failure shrinks to its fewest steps.
"""

from ._events import CapturedEvents, EventTimeout, capture_events
from ._machine import AsyncStateMachine, Step, invariant, precondition, rule

__all__ = [
    "AsyncStateMachine",
    "CapturedEvents",
    "EventTimeout",
    "Step",
    "capture_events",
    "invariant",
    "precondition",
    "rule",
]
