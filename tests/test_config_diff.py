"""Comparing a running config with a new one: each server added, removed, replaced or
changed in place, with the fields that made it so, and the settings that change."""

from __future__ import annotations

import json
import pathlib

from supervisor.config import load_config
from supervisor.config._diff import (
    BOOKKEEPING,
    IN_PLACE,
    LIVE_SETTINGS,
    REPLACING,
    RESTART_SETTINGS,
    ConfigChange,
    compare,
)
from supervisor.config._model import ServerConfig, Settings


def test_every_field_is_classified_once() -> None:
    """Each field of a server and of the settings has exactly one class: a field added to
    the model without one fails here, rather than being compared as nothing."""
    server = set(ServerConfig.__struct_fields__)
    classes = (REPLACING, IN_PLACE, BOOKKEEPING)
    assert set().union(*classes) == server
    assert sum(len(c) for c in classes) == len(server)
    settings = set(Settings.__struct_fields__)
    assert LIVE_SETTINGS | RESTART_SETTINGS == settings
    assert not LIVE_SETTINGS & RESTART_SETTINGS


BASE = {
    "mcpServers": {
        "calc": {"command": "python", "args": ["calc.py"]},
        "notes": {"command": "python", "args": ["notes.py"], "env": {"MODE": "a"}},
        "web": {"url": "http://127.0.0.1:8931/mcp"},
        "old": {"command": "python", "args": ["old.py"]},
    }
}


def changed(**servers: object) -> dict[str, object]:
    """BASE with these servers' entries (``None``: removed), and the others as they are."""
    entries = {**BASE["mcpServers"], **servers}
    return {"mcpServers": {n: e for n, e in entries.items() if e is not None}}


def test_nothing_changed_is_nothing_to_do() -> None:
    change = compare(load_config(BASE), load_config(json.loads(json.dumps(BASE))))
    assert change == ConfigChange() and change.empty


def test_each_server_is_added_removed_replaced_or_changed_in_place() -> None:
    """What runs or how it is reached (command, args, env, url, headers, transport)
    replaces a server; a policy (autoApprove, prefix, timeout, disabled) changes it in
    place; a server named in neither is left alone."""
    new = changed(
        calc={"command": "python", "args": ["calc.py", "--precise"], "autoApprove": ["add"]},
        notes={
            "command": "python",
            "args": ["notes.py"],
            "env": {"MODE": "a"},
            "prefix": "n",
            "timeout": 5,
            "autoApprove": True,
        },
        web={"url": "http://127.0.0.1:8931/mcp", "headers": {"X-Team": "blue"}},
        old=None,
        tasks={"command": "npx", "args": ["-y", "tasks"]},
    )
    change = compare(load_config(BASE), load_config(new))
    assert change.added == ("tasks",)
    assert change.removed == ("old",)
    assert change.replaced == {"calc": ("args",), "web": ("headers",)}
    assert change.changed == {"notes": ("prefix", "timeout", "auto_approve")}
    assert (change.settings, change.needs_restart) == ((), ())
    assert not change.empty


def test_a_changed_transport_or_disabling_is_told_apart() -> None:
    """A server moved from stdio to a URL is replaced (type, command, url...); one
    disabled is changed in place (the reconfiguration stops it without a replacement)."""
    new = changed(
        calc={"url": "http://127.0.0.1:9000/mcp"},
        notes={"command": "python", "args": ["notes.py"], "env": {"MODE": "a"}, "disabled": True},
    )
    change = compare(load_config(BASE), load_config(new))
    assert set(change.replaced) == {"calc"}
    assert {"type", "command", "url"} <= set(change.replaced["calc"])
    assert change.changed == {"notes": ("disabled",)}


def test_an_env_file_whose_contents_changed_replaces_its_server(tmp_path: pathlib.Path) -> None:
    """The same config text, its envFile rewritten: the variable it sets changed, so the
    server is replaced; rewritten to the same variables, nothing is."""
    env = tmp_path / ".env"
    env.write_text("MODE=a\n")
    path = tmp_path / "mcp.json"
    entry = {"command": "python", "args": ["notes.py"], "envFile": ".env"}
    path.write_text(json.dumps({"mcpServers": {"notes": entry}}))
    running = load_config(path)
    env.write_text("# the same, said again\nMODE=a\n")
    assert compare(running, load_config(path)).empty
    env.write_text("MODE=b\n")
    assert compare(running, load_config(path)).replaced == {"notes": ("env",)}


def test_settings_applied_live_and_those_that_take_a_restart() -> None:
    """Limits and the strategy apply to what comes next; where credentials are kept
    (authDir, tokenStore) takes a restart. A default a server inherits (requestTimeout)
    reaches it as its own field: the server is changed in place."""
    new = {
        **BASE,
        "supervisor": {
            "strategy": "rest_for_one",
            "limits": {"maxToolsPerServer": 50},
            "authDir": "/tmp/elsewhere",
            "requestTimeout": 12,
        },
    }
    change = compare(load_config(BASE), load_config(new))
    assert change.settings == ("strategy", "limits", "request_timeout")
    assert change.needs_restart == ("auth_dir",)
    assert set(change.changed) == {"calc", "notes", "web", "old"}
    assert all(fields == ("timeout",) for fields in change.changed.values())


def test_a_changed_protocol_replaces_its_server() -> None:
    """A server pinned to the handshake era (or no longer) is reached another way: it is
    replaced. ``legacy`` and ``2025-11-25`` are one value: nothing to do between them."""
    pinned = changed(web={"url": "http://127.0.0.1:8931/mcp", "protocol": "2025-11-25"})
    change = compare(load_config(BASE), load_config(pinned))
    assert change.replaced == {"web": ("protocol",)} and change.changed == {}
    legacy = changed(web={"url": "http://127.0.0.1:8931/mcp", "protocol": "legacy"})
    assert compare(load_config(pinned), load_config(legacy)).empty
