"""A server's status is said in one place: the words are :class:`ServerStatus`'s, the
package compares with its members, and the records carry them to JSON unchanged."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import msgspec
import pytest

import supervisor
from supervisor.server import HealthRecord, ServerStatus
from supervisor.server._health import Health

PACKAGE = Path(supervisor.__file__).parent
WORDS = frozenset(s.value for s in ServerStatus)

#: Modules with a vocabulary of their own that shares some words: a fault report's
#: states (a server seen from its events: ``down``, not ``disconnected``) and their
#: colours in the timeline.
OWN_WORDS = {"faults/_report.py", "timeline/_draw.py"}


def _word(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in WORDS


def _words_in(node: ast.AST) -> list[ast.AST]:
    """The status words ``node`` is, or holds as a literal tuple, list or set of words
    that are all statuses (``("inheritEnv", "disabled")`` names config keys)."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return list(node.elts) if node.elts and all(_word(e) for e in node.elts) else []
    return [node] if _word(node) else []


def status_literals(source: str) -> list[tuple[int, str]]:
    """Where ``source`` writes a status word as a status: compared with (``==``, ``in``
    …), as a key of a mapping of several, or in a literal collection of only such words."""
    found: list[ast.AST] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                found += _words_in(side)
        elif isinstance(node, ast.Dict):
            keys = [k for k in node.keys if k is not None and _word(k)]
            found += keys if len(keys) > 1 else []
        elif isinstance(node, ast.Tuple | ast.List | ast.Set) and node.elts:
            if all(_word(e) for e in node.elts):
                found += node.elts
    return sorted({(n.lineno, n.value) for n in found if isinstance(n, ast.Constant)})


def test_the_scan_finds_status_literals() -> None:
    """The scan sees a comparison, a membership test, a mapping and a set of words, and
    not the same words meaning something else."""
    source = (
        'a = r.status == "connected"\n'
        'b = r.status in ("failed", "stopped")\n'
        'c = {"idle": 1, "degraded": 2}\n'
        'd = frozenset({"needs_auth"})\n'
        'log.info("connected"); e = {"disabled": x.disabled}; f = ("failed", n)\n'
        'g = key in ("lazy", "disabled")\n'
    )
    assert status_literals(source) == [
        (1, "connected"),
        (2, "failed"),
        (2, "stopped"),
        (3, "degraded"),
        (3, "idle"),
        (4, "needs_auth"),
    ]


def test_no_status_literal_outside_the_enum() -> None:
    """No module but ``ServerStatus``'s own compares with, maps or lists a status word."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name in OWN_WORDS or name == "_status.py":
            continue
        if hits := status_literals(path.read_text(encoding="utf-8")):
            found[name] = hits
    assert not found


@pytest.mark.parametrize("status", list(ServerStatus), ids=str)
def test_a_status_is_its_word_on_the_wire(status: ServerStatus) -> None:
    """A record's status encodes as its word, as ``json`` writes it too, and decodes back
    to the member."""
    record = msgspec.convert(
        {**_record_fields(), "status": status.value}, HealthRecord, from_attributes=False
    )
    assert record.status is status and record.status == status.value
    assert f'"status":"{status.value}"'.encode() in msgspec.json.encode(record)
    document = msgspec.to_builtins(record)
    assert type(document["status"]) is str and document["status"] == status.value
    assert json.dumps({"status": status}) == json.dumps({"status": status.value})


def test_health_metrics_carry_the_member() -> None:
    """The running health record hands its status on as the member, not a copy."""
    metrics = Health().metrics("s", ServerStatus.DEGRADED, 0.0)
    assert metrics.status is ServerStatus.DEGRADED
    assert msgspec.to_builtins(metrics)["status"] == "degraded"


def _record_fields() -> dict[str, object]:
    return {
        "server": "s",
        "type": "stdio",
        "connected_since": None,
        "last_ok": None,
        "last_error": None,
        "error_count": 0,
        "consecutive_failures": 0,
        "restarts": 0,
        "tool_count": None,
        "unsupported_tools": None,
        "connect_time": None,
        "next_retry_at": None,
        "retry_attempt": 0,
        "calls_ok": 0,
        "calls_failed": 0,
        "latency_p50_ms": None,
        "latency_p99_ms": None,
        "pid": None,
    }
