"""The ``tools --json`` document: a catalog, its servers and what a call of each tool would
need — built once, here, for the command that made its own supervisor and for the
gateway that serves it at ``/tools``, so that both print the same."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

import attrs
import msgspec

from ..server._status import ServerStatus
from ..tools import parameters
from ._catalog import Catalog, Entry

__all__ = ["tools_document"]


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
