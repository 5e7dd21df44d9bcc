from __future__ import annotations

import ast
import json
import time
from pathlib import Path

import msgspec
import pytest

from supervisor.events import _catalog as events
from supervisor.events._catalog import (
    EVENT_TYPES,
    BusDropped,
    Connected,
    Event,
    LocalCrashed,
    ServerErrored,
    ServerEvent,
    decode,
    encode,
    make_event,
    to_builtins,
)

# One representative field set per kind; the coverage test keeps it in step with the catalog.
SAMPLES: dict[str, dict[str, object]] = {
    "mcp.connecting": {"server": "gh", "attempt": 2, "max_attempts": 10},
    "mcp.connected": {"server": "gh", "tool_count": 12, "connect_time": 0.41},
    "mcp.disconnected": {"server": "gh", "reason": "EOF", "was_clean": False},
    "mcp.error": {"server": "gh", "error": "refused", "retry_in": 2.0, "attempt": 3},
    "mcp.health.stale": {"server": "gh", "last_ok": 1767225600.5},
    "mcp.health.recovered": {"server": "gh", "downtime": 12.5},
    "mcp.health.down": {
        "server": "gh",
        "reason": "127.0.0.1:8080 refused a new connection: nothing listens on the port",
        "found_by": "watch",
        "last_ok": 1767225600.5,
    },
    "mcp.health.probe_changed": {
        "server": "gh",
        "method": "tools/list",
        "reason": "it answered ping with 'method not found'",
    },
    "mcp.local.spawned": {"server": "fs", "pid": 4242},
    "mcp.local.crashed": {"server": "fs", "exit_code": 1, "stderr_tail": ["boom", "bye"]},
    "mcp.local.shutdown": {"server": "fs"},
    "mcp.local.memory_exceeded": {"server": "fs", "rss": 641728512, "limit": 536870912},
    "mcp.auth.started": {"server": "gh", "grant": "authorization_code"},
    "mcp.auth.completed": {
        "server": "gh",
        "issuer": "https://github.com/login/oauth",
        "scopes": ["repo"],
        "expires_at": 1767229200.0,
    },
    "mcp.auth.failed": {"server": "gh", "error": "invalid_grant"},
    "mcp.auth.refreshed": {"server": "gh", "expires_at": 1767232800.0},
    "mcp.resource.updated": {"server": "notes", "uri": "notes://index"},
    "tools.registered": {"server": "gh", "names": ["gh_search", "gh_issue"]},
    "tools.deregistered": {"server": "gh", "names": ["gh_search"]},
    "tools.updated": {"server": "gh", "names": ["gh_issue"]},
    "tools.conflict": {"name": "search", "servers": ["gh", "web"]},
    "supervisor.child.restarted": {
        "supervisor": "root",
        "child": "gh",
        "strategy": "one_for_one",
        "restarts": 1,
        "reason": "Crashed(OSError)",
    },
    "supervisor.child.gave_up": {
        "supervisor": "root",
        "child": "gh",
        "restarts": 5,
        "reason": "Crashed(OSError)",
    },
    "supervisor.escalated": {
        "supervisor": "root",
        "child": "gh",
        "restarts": 5,
        "reason": "Crashed(OSError)",
    },
    "supervisor.config.reloaded": {
        "added": ["tasks"],
        "removed": [],
        "replaced": ["gh"],
        "changed": ["web"],
        "needs_restart": ["auth_dir"],
    },
    "supervisor.config.rejected": {"errors": ["mcpServers.gh.command: must be a string"]},
    "bus.dropped": {"count": 7},
}

DOCUMENTED_KINDS = [
    "mcp.connecting",
    "mcp.connected",
    "mcp.disconnected",
    "mcp.error",
    "mcp.health.stale",
    "mcp.health.recovered",
    "mcp.health.down",
    "mcp.health.probe_changed",
    "mcp.local.spawned",
    "mcp.local.crashed",
    "mcp.local.shutdown",
    "mcp.local.memory_exceeded",
    "mcp.auth.started",
    "mcp.auth.completed",
    "mcp.auth.failed",
    "mcp.auth.refreshed",
    "mcp.resource.updated",
    "tools.registered",
    "tools.deregistered",
    "tools.updated",
    "tools.conflict",
    "supervisor.child.restarted",
    "supervisor.child.gave_up",
    "supervisor.escalated",
    "supervisor.config.reloaded",
    "supervisor.config.rejected",
    "bus.dropped",
]


def test_catalog_has_exactly_the_design_kinds() -> None:
    """The catalog holds exactly the documented kinds (docs/servers.md), in that order."""
    assert list(EVENT_TYPES) == DOCUMENTED_KINDS
    assert sorted(SAMPLES) == sorted(DOCUMENTED_KINDS)


def test_catalog_is_read_only() -> None:
    """EVENT_TYPES cannot be modified by callers."""
    with pytest.raises(TypeError):
        EVENT_TYPES["x"] = Event  # type: ignore[index]


def test_every_class_is_exported() -> None:
    """Every event class is listed in the module's __all__."""
    for cls in EVENT_TYPES.values():
        assert cls.__name__ in events.__all__


@pytest.mark.parametrize("kind", DOCUMENTED_KINDS)
def test_kind_property_is_the_tag(kind: str) -> None:
    """An event's kind is its class's tag, and make_event picks that class."""
    event = make_event(kind, **SAMPLES[kind])
    assert type(event) is EVENT_TYPES[kind]
    assert event.kind == kind


@pytest.mark.parametrize("kind", DOCUMENTED_KINDS)
def test_round_trip(kind: str) -> None:
    """Every kind survives encode then decode with its class, kind and fields."""
    event = make_event(kind, **SAMPLES[kind])
    back = decode(encode(event))
    assert type(back) is type(event)
    assert back.kind == kind
    assert back == event


@pytest.mark.parametrize("kind", DOCUMENTED_KINDS)
def test_json_has_kind_and_ts(kind: str) -> None:
    """The JSON form is one flat object carrying kind, ts and every field."""
    event = make_event(kind, **SAMPLES[kind])
    obj = json.loads(encode(event))
    assert obj["kind"] == kind
    assert obj["ts"] == event.ts
    for name, value in SAMPLES[kind].items():
        assert obj[name] == value


@pytest.mark.parametrize("kind", DOCUMENTED_KINDS)
def test_to_builtins_includes_kind(kind: str) -> None:
    """to_builtins gives the same dict as the JSON form, kind included."""
    event = make_event(kind, **SAMPLES[kind])
    assert to_builtins(event) == json.loads(encode(event))


def test_server_events_carry_server() -> None:
    """Events about one server subclass ServerEvent; the others do not have server."""
    for kind, fields in SAMPLES.items():
        cls = EVENT_TYPES[kind]
        assert issubclass(cls, ServerEvent) == ("server" in fields), kind


def test_ts_defaults_to_now() -> None:
    """ts defaults to the unix time at construction."""
    before = time.time()
    event = Connected(server="gh", tool_count=1, connect_time=0.1)
    assert before <= event.ts <= time.time()


def test_ts_can_be_given() -> None:
    """An explicit ts is kept, e.g. for replayed events."""
    assert BusDropped(count=1, ts=5.0).ts == 5.0


def test_events_are_frozen() -> None:
    """Events are immutable values."""
    event = BusDropped(count=1)
    with pytest.raises(AttributeError):
        event.count = 2  # type: ignore[misc]


def test_events_are_keyword_only() -> None:
    """Fields must be passed by name."""
    with pytest.raises(TypeError):
        BusDropped(3)  # type: ignore[misc]


def test_optional_fields_accept_none() -> None:
    """Unknown values (retry_in, last_ok, exit_code) round-trip as None."""
    for event in [
        ServerErrored(server="gh", error="x", retry_in=None, attempt=10),
        make_event("mcp.health.stale", server="gh", last_ok=None),
        LocalCrashed(server="fs", exit_code=None),
    ]:
        assert decode(encode(event)) == event


def test_stderr_tail_defaults_to_empty() -> None:
    """A crash with no captured stderr has an empty stderr_tail."""
    assert LocalCrashed(server="fs", exit_code=-9).stderr_tail == []


def test_make_event_unknown_kind() -> None:
    """make_event names an unknown kind in a ValueError (not a KeyError)."""
    with pytest.raises(ValueError, match="mcp.teleported"):
        make_event("mcp.teleported", server="gh")


def test_make_event_bad_fields() -> None:
    """make_event names the kind when a field is missing or unknown."""
    with pytest.raises(TypeError, match="mcp.connected"):
        make_event("mcp.connected", server="gh")
    with pytest.raises(TypeError, match="mcp.local.shutdown"):
        make_event("mcp.local.shutdown", server="fs", colour="red")


def test_decode_accepts_str() -> None:
    """decode takes text as well as bytes."""
    event = BusDropped(count=3, ts=1.0)
    assert decode(encode(event).decode()) == event


def test_decode_rejects_unknown_kind() -> None:
    """decode raises msgspec.ValidationError for a kind outside the catalog."""
    with pytest.raises(msgspec.ValidationError):
        decode(b'{"kind": "mcp.teleported", "ts": 1.0, "server": "gh"}')


def test_decode_validates_field_types() -> None:
    """decode rejects a field of the wrong type."""
    with pytest.raises(msgspec.ValidationError):
        decode(b'{"kind": "mcp.local.spawned", "ts": 1.0, "server": "fs", "pid": "x"}')


def test_kind_of_names_a_class_kind() -> None:
    """kind_of gives the kind every event of that class carries."""
    for kind, cls in EVENT_TYPES.items():
        assert events.kind_of(cls) == kind
    assert events.kind_of(events.Connected) == "mcp.connected"


@pytest.mark.parametrize("module", ["faults/_checker.py", "faults/_report.py"])
def test_event_readers_take_their_kinds_from_the_catalog(module: str) -> None:
    """The fault report and checker, which read events as mappings, write no kind out."""
    source = (Path(events.__file__).parents[1] / module).read_text(encoding="utf-8")
    written = [
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and node.value in EVENT_TYPES
    ]
    assert written == []
