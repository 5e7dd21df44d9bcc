"""The ``tools --json`` document: a catalog, its servers and what a call of each tool would
need — built once, here, for the command that made its own supervisor and for the
gateway that serves it at ``/tools``, so that both print the same; and likewise the
``resources`` and ``prompts`` documents (the gateway's ``/resources`` and ``/prompts``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

import attrs
import msgspec

from ..registry._catalog import Catalog, Entry
from ..server._status import ServerStatus
from ..tools import parameters

if TYPE_CHECKING:
    from ..registry._resources import MergedPrompt, MergedResource, MergedResourceTemplate

__all__ = ["prompts_document", "resources_document", "tools_document"]


class _Record(Protocol):
    """What the document reads of a server's health record."""

    @property
    def status(self) -> str: ...

    @property
    def last_error(self) -> str | None: ...


def tools_document(
    entries: Iterable[Entry],
    catalog: Catalog,
    records: Mapping[str, _Record],
    approvals: Mapping[str, str | None],
    *,
    query: str | None = None,
) -> dict[str, object]:
    """The document of ``entries`` (the whole ``catalog``, or a search's matches, best
    first), the servers of ``records`` (in config order) and ``approvals`` (why a call
    of each tool needs approval, ``None``: it goes ahead):

    * ``tools``: per tool its ``name``, ``server``, ``original_name``, ``description``,
      ``input_schema``, ``annotations`` (MCP's names, only those given), ``approval``,
      ``parameters`` and ``provenance``;
    * ``servers``: per server its ``name``, ``status``, ``tool_count``, ``unsupported``
      (tools skipped), ``skipped`` (why, one line each) and ``error`` (when it is not
      connected);
    * ``total``: the tools in the catalog (a search shows fewer);
    * ``search``: the query, for a search.
    """
    tools = [
        {
            "name": e.name,
            "server": e.server,
            "original_name": e.original_name,
            "description": e.description,
            "input_schema": e.input_schema,
            "annotations": _annotations(e),
            "approval": approvals.get(e.name),
            "parameters": [attrs.asdict(p) for p in parameters(e.input_schema)],
            "provenance": msgspec.to_builtins(e.provenance),
        }
        for e in entries
    ]
    servers = [
        {
            "name": name,
            "status": str(record.status),
            "tool_count": len(catalog.by_server.get(name, ())),
            "unsupported": catalog.unsupported.get(name, 0),
            "skipped": list(catalog.invalid.get(name, ())),
            "error": None if record.status == ServerStatus.CONNECTED else record.last_error,
        }
        for name, record in records.items()
    ]
    document: dict[str, object] = {"tools": tools, "servers": servers, "total": len(catalog)}
    if query is not None:
        document["search"] = query
    return document


def _annotations(entry: Entry) -> dict[str, object]:
    """The tool's annotations as the server sent them (MCP's names; only those given)."""
    hints = entry.tool.annotations
    return {} if hints is None else hints.model_dump(by_alias=True, exclude_none=True)


def resources_document(
    resources: Iterable[MergedResource],
    templates: Iterable[MergedResourceTemplate],
    records: Mapping[str, _Record],
) -> dict[str, object]:
    """What ``resources`` prints: ``resources`` (per resource its ``uri``, ``name``,
    ``server``, ``description``, ``mime_type`` and ``size``), ``templates`` (per template
    its ``uri_template``, ``name``, ``server``, ``description`` and ``mime_type``), and
    ``servers``, per server of ``records`` its ``name``, ``status`` and ``error`` (its last
    error when it is not connected: the command names those servers on stderr; its
    ``--json`` leaves ``servers`` out)."""
    return {
        "resources": [
            {
                "uri": r.uri,
                "name": r.name,
                "server": r.server,
                "description": r.description,
                "mime_type": r.mime_type,
                "size": r.size,
            }
            for r in resources
        ],
        "templates": [
            {
                "uri_template": t.uri_template,
                "name": t.name,
                "server": t.server,
                "description": t.description,
                "mime_type": t.mime_type,
            }
            for t in templates
        ],
        "servers": _servers(records),
    }


def prompts_document(
    prompts: Iterable[MergedPrompt], records: Mapping[str, _Record]
) -> dict[str, object]:
    """What ``prompts`` prints: ``prompts`` (per prompt its ``name``, ``server``,
    ``original_name``, ``description`` and ``arguments``: ``name``, ``required``,
    ``description`` each), and ``servers`` as in :func:`resources_document`."""
    return {
        "prompts": [
            {
                "name": p.name,
                "server": p.server,
                "original_name": p.original_name,
                "description": p.description,
                "arguments": [
                    {"name": a.name, "required": bool(a.required), "description": a.description}
                    for a in p.arguments
                ],
            }
            for p in prompts
        ],
        "servers": _servers(records),
    }


def _servers(records: Mapping[str, _Record]) -> list[dict[str, object]]:
    return [
        {
            "name": name,
            "status": str(record.status),
            "error": None if record.status == ServerStatus.CONNECTED else record.last_error,
        }
        for name, record in records.items()
    ]
