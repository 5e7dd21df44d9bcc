"""Test helpers shipped with mcp-supervisor for users' own tests.

- :mod:`supervisor.testing.servers` — fixture MCP servers (echo, crash, exit-on-start,
  hang-init, garbage, changing, slow), runnable over stdio, Streamable HTTP and SSE, in a
  subprocess or in-process under trio, plus helpers to spawn them and count executions.
- :func:`capture_events` — a supervisor's events captured during a block, with
  ``await events.wait_for("mcp.connected", server="x", timeout=5)``.
- :class:`AsyncStateMachine` with :func:`rule`, :func:`invariant` and
  :func:`precondition` — rule-based state-machine tests whose rules are async and run
  under trio; a failure shrinks to its fewest steps. :class:`SupervisorMachine` is one
  ready-made over fixture servers, with the rules ``call``, ``kill``, ``hang``,
  ``resume``, ``list_changed`` and ``restart`` (it needs hypothesis, loaded on first use).
- ``run_soak`` (``mcp-supervisor chaos soak``): many fixture servers of mixed
  transports under random seeded fault plans with continuous calls, judged by the checker.
- :func:`run_deterministic` and :func:`replay_log` — ``trio.run`` on the mock clock with
  trio's scheduler seeded, and a run's calls, events and injected faults as canonical
  JSON with every time on trio's clock: two runs with in-process servers and the same
  seeds compare byte for byte.
- The pytest plugin (:mod:`supervisor.testing.plugin`): the fixtures ``mcp_servers`` and
  ``mcp_checker``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from ._deterministic import replay_log as replay_log
    from ._deterministic import run_deterministic as run_deterministic
    from ._events import EventTimeout as EventTimeout
    from ._events import capture_events as capture_events
    from ._machine import AsyncStateMachine as AsyncStateMachine
    from ._machine import Step as Step
    from ._machine import invariant as invariant
    from ._machine import precondition as precondition
    from ._machine import rule as rule
    from ._supervised import SupervisorMachine as SupervisorMachine


__getattr__, __dir__ = attach(__name__)
