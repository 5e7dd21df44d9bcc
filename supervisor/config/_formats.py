"""The top level of a config file: which client wrote it, and where its servers are.

The server sections are told apart by their key — ``mcpServers`` (Claude Code, Cursor,
Claude Desktop), ``mcp`` (OpenCode; nested ``mcp.servers`` for OpenCode v2 and VS Code
``settings.json``) and ``servers`` (VS Code ``.vscode/mcp.json``) — beside our own
``supervisor`` section. All sections present are read, in file order; a server name
defined in two of them is an error naming both places.

A client's file is read as it is: its other top-level keys (Claude Desktop's
``preferences``, OpenCode's ``model`` or ``server``, …) belong to the client and are
ignored, with a debug log line naming them. Two kinds of unknown key are errors all the
same: one close to ``supervisor`` (our own section, checked strictly), and, in a file with
no server section, one close to a server section's key (``mcpServer``: the likely reason
no server was found).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping

from ..log import get_logger
from ._model import Settings
from ._server import _Draft
from ._settings import _parse_settings
from ._validate import _closest, _Errors, _fields, _join, _kind, _unknown_field

log = get_logger("supervisor.config")

_SERVER_SECTIONS = ("mcpServers", "mcp", "servers")
_TOP_LEVEL = (*_SERVER_SECTIONS, "supervisor")
_IGNORED_TOP_LEVEL = ("$schema", "inputs")


class _Document:
    """The top level: find the server sections and the ``supervisor`` section."""

    def __init__(
        self, errors: _Errors, label: str, base: str | os.PathLike[str] | None = None
    ) -> None:
        self.errors = errors
        self.label = label
        #: where the servers' relative paths start (the config file's directory)
        self.base = base
        #: each server entry found: its name -> the path where it is defined
        self.servers: dict[str, str] = {}

    def parse(self, document: object) -> tuple[Settings, list[_Draft]]:
        errors = self.errors
        if not isinstance(document, Mapping):
            errors.add(self.label, f"must be a JSON object, not {_kind(document)}")
            return Settings(), []
        settings = Settings()
        if "supervisor" in document:
            settings = _parse_settings(errors, document["supervisor"], "supervisor")
        has_servers = any(key in document for key in _SERVER_SECTIONS)
        ours = ("supervisor",) if has_servers else _TOP_LEVEL
        ignored: list[str] = []
        for key, _, p in _fields(errors, document, ""):
            if key in _TOP_LEVEL or key in _IGNORED_TOP_LEVEL:
                continue
            close = _closest(key, ours)
            if close:
                errors.add(p, f'unknown top-level key; did you mean "{close}"?')
            else:
                ignored.append(key)
        if ignored:
            log.debug("ignored the client's own top-level keys", config=self.label, keys=ignored)
        if not has_servers:
            errors.add(
                self.label,
                'no MCP servers: expected a top-level "mcpServers", "mcp" or "servers" object',
            )
        if "inputs" in document:
            _check_inputs(errors, document["inputs"], "inputs")

        drafts: list[_Draft] = []
        defined = self.servers
        for section in (k for k in document if k in _SERVER_SECTIONS):
            for name, raw, p, style in self._entries(document[section], section):
                if name in defined:
                    # json.dumps: a name may hold a quote or a line break
                    errors.add(p, f"server {json.dumps(name)} is also defined at {defined[name]}")
                    continue
                defined[name] = p
                draft = _Draft.parse(errors, settings, style, name, raw, p, self.base)
                if draft is not None:
                    drafts.append(draft)
        return settings, drafts

    def _entries(self, value: object, section: str) -> Iterator[tuple[str, object, str, str]]:
        errors = self.errors
        if not isinstance(value, Mapping):
            errors.add(
                section,
                f"must be an object mapping server names to their settings, not {_kind(value)}",
            )
            return
        path = section
        if section == "mcp" and _is_nested(value):
            # OpenCode v2 and VS Code settings.json: {"mcp": {"servers": {...}}}
            for key, item, p in _fields(errors, value, section):
                if key == "inputs":
                    _check_inputs(errors, item, p)
                elif key != "servers":
                    errors.add(p, _unknown_field(key, ("servers", "inputs")))
            value = value["servers"]
            path = _join(section, "servers")
            assert isinstance(value, Mapping)
        for name, raw, p in _fields(errors, value, path):
            yield name, raw, p, section


def _is_nested(value: Mapping[str, object]) -> bool:
    servers = value.get("servers")
    return isinstance(servers, Mapping) and not any(
        k in servers for k in ("type", "command", "url")
    )


def _check_inputs(errors: _Errors, value: object, path: str) -> None:
    """VS Code's ``inputs`` (prompted variables) are ignored, but must be an array."""
    if not isinstance(value, list | tuple):
        errors.add(path, f"must be an array, not {_kind(value)}")
