"""A server's state has one writer: its actor and the tree's decisions write it, callers
read it.

Read with :mod:`ast`: the server's handle (``server/_managed.py``) and its parts,
``runtime.py`` and the gate (``calls/_gate.py``) never assign to a
:class:`~supervisor.server.ServerState` or its health (``x.state.y = ``,
``x.health.y += ``, ``x.attempt = `` …), nor call a method of theirs that changes them
(``x.health.mark_stopped(…)``, ``x.state.connected(…)``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import supervisor
from supervisor.server._health import Health
from supervisor.server._state import ServerState

ROOT = Path(supervisor.__file__).parent

#: The modules that only read a server's state.
READERS = (
    "server/_managed.py",
    "server/_admission.py",
    "server/_calling.py",
    "server/_failing.py",
    "server/_injection.py",
    "server/_reading.py",
    "server/_reads.py",
    "server/_tasks_made.py",
    "runtime.py",
    "calls/_gate.py",
)

#: What a ServerState holds, by the name a reader would assign to.
STATE_FIELDS = frozenset(
    {
        "attempt",
        "auth_problem",
        "current",
        "incarnations",
        "listed",
        "listing",
        "prompts",
        "resource_templates",
        "resources",
        "tools",
        "use_sse",
    }
)

#: Methods that only read.
READ_ONLY = frozenset({"tool", "percentile", "metrics", "uptime", "downtime"})

#: Every method that changes a ServerState or its Health.
WRITES = frozenset(
    name
    for cls in (ServerState, Health)
    for name, value in vars(cls).items()
    if callable(value) and not name.startswith("__") and name not in READ_ONLY
)


def _chain(node: ast.expr) -> list[str]:
    """The attribute names of ``a.b.c`` (``["b", "c"]``), outermost last."""
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    return names[::-1]


def _targets(tree: ast.AST) -> list[ast.expr]:
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                found.extend(target.elts if isinstance(target, ast.Tuple | ast.List) else [target])
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            found.append(node.target)
        elif isinstance(node, ast.Delete):
            found.extend(node.targets)
    return found


def writes(source: str) -> list[str]:
    """Where ``source`` writes a server's state: ``line: what``."""
    tree = ast.parse(source)
    found = []
    for target in _targets(tree):
        chain = _chain(target)
        if not chain:
            continue
        *owners, name = chain
        if "state" in owners or "health" in owners or name in STATE_FIELDS:
            found.append(f"{target.lineno}: {ast.unparse(target)} =")
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            *owners, name = _chain(node.func)
            if owners and owners[-1] in ("state", "health") and name in WRITES:
                found.append(f"{node.lineno}: {ast.unparse(node.func)}(...)")
    return found


@pytest.mark.parametrize("module", READERS)
def test_callers_only_read_a_servers_state(module: str) -> None:
    assert writes((ROOT / module).read_text(encoding="utf-8")) == []


def test_the_reading_catches_each_kind_of_write() -> None:
    """The check itself: each way of writing is found, reading is not."""
    source = """
def f(server, s):
    server.state.attempt = 0
    server.health.consecutive_failures += 1
    s.attempt = 1
    server.use_sse, x = True, 2
    server.health.mark_stopped(0.0)
    server.state.decided(decision)
    server.health.status: object = None
    print(server.health.status, server.state.tool("x"), server.health.metrics("a", 1, 2))
    server.state = object()
"""
    assert sorted(line.split(": ", 1)[1] for line in writes(source)) == [
        "s.attempt =",
        "server.health.consecutive_failures =",
        "server.health.mark_stopped(...)",
        "server.health.status =",
        "server.state.attempt =",
        "server.state.decided(...)",
        "server.use_sse =",
    ]
