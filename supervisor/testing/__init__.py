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
- :func:`run_soak` (``mcp-supervisor chaos soak``): many fixture servers of mixed
  transports under random seeded fault plans with continuous calls, judged by the checker.
- :func:`run_deterministic` and :func:`replay_log` — ``trio.run`` on the mock clock with
  trio's scheduler seeded, and a run's calls, events and injected faults as canonical
  JSON with every time on trio's clock: two runs with in-process servers and the same
  seeds compare byte for byte.
- The pytest plugin (:mod:`supervisor.testing.plugin`): the fixtures ``mcp_servers`` and
  ``mcp_checker``.
"""

from ._deterministic import replay_log, run_deterministic
from ._events import CapturedEvents, EventTimeout, capture_events
from ._machine import AsyncStateMachine, Step, invariant, precondition, rule
from ._soak import SoakOptions, SoakResult, random_plan, run_soak


def __getattr__(name: str) -> object:
    if name == "SupervisorMachine":  # imports hypothesis, a test-time dependency
        from ._supervised import SupervisorMachine

        return SupervisorMachine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AsyncStateMachine",
    "CapturedEvents",
    "EventTimeout",
    "SoakOptions",
    "SoakResult",
    "Step",
    "SupervisorMachine",
    "capture_events",
    "invariant",
    "precondition",
    "random_plan",
    "replay_log",
    "rule",
    "run_deterministic",
    "run_soak",
]
