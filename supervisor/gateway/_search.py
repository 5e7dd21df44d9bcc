"""Tool search (``serve --tool-search``): a large catalog behind four meta-tools.

Clients and models cap the tools they take (often at about a hundred), and every listed
definition costs the model context. With tool search the gateway lists four tools in
place of its catalog, and the model looks up what it needs:

* ``list`` — the servers served here, each with its status and how many tools it serves;
  with ``server``, that server's tool names and one-line descriptions, a page at a time;
* ``search`` — the best matches for a query (the registry's own ranking:
  :meth:`~supervisor.registry.Catalog.search`), each with its input schema;
* ``load`` — full definitions by merged name, as ``tools/list`` would give them; a name
  that is not served is reported with the reason and close matches, in the result;
* ``call`` — a tool by merged name, through the one gate, exactly as a ``tools/call`` of
  that name would be (approvals, argument checks, failures as tool errors).

Everything is answered from what the gateway serves (:meth:`SearchHost.catalog`): its
``tools``/``servers`` narrowing applies, and a withdrawn server (failed, stopped, waiting
for a login) shows its status and last error but no tools. The four tools never change,
so nothing about them is announced; a client that loaded a tool may also call it by name
with ``tools/call``.

The meta-tools' answers are ``structuredContent`` described by an ``outputSchema``, with
the same JSON as text for clients that read text only; ``call`` answers with the called
tool's own result.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import mcp_types as types
import msgspec

from ..errors import UnknownServer
from ..server._status import ServerStatus
from ..tools._validate import prepare_arguments
from ._apps import tool_served

if TYPE_CHECKING:
    from ..registry import Catalog, Entry
    from ..runtime import SupervisorHandle
    from ..tools._request import ToolCall

__all__ = ["META_TOOLS", "SearchHost", "ToolSearch", "listed", "meta_tools"]

#: The meta-tools' names, in the order they are listed.
META_TOOLS = ("list", "search", "load", "call")
#: Tools ``search`` returns unless asked for another number, and the most it returns.
SEARCH_LIMIT, SEARCH_MAX = 10, 50
#: Tool names ``list`` returns per page unless asked, and the most per page.
PAGE, PAGE_MAX = 100, 500
#: The most names one ``load`` takes.
LOAD_MAX = 50
#: Close matches named for a name that is not served (and how close they must be).
CLOSE_MATCHES, CLOSE_CUTOFF = 3, 0.6

INSTRUCTIONS = (
    "The tools of several MCP servers, supervised and merged by mcp-supervisor, are "
    "behind four tools: `search` finds tools by what they do (or `list` shows the servers "
    "and their tools), `load` gives their full definitions, and `call` runs one by name "
    "with its arguments. A tool whose server is down answers with an error saying so."
)


class SearchHost(Protocol):
    """What :class:`ToolSearch` needs of the gateway that holds it."""

    @property
    def sup(self) -> SupervisorHandle:
        """The supervisor whose servers are served."""
        ...

    def serves(self, server: str, name: str | None = None) -> bool:
        """Whether ``server`` (and its tool ``name``) is served at all (the narrowing)."""
        ...

    def catalog(self) -> Catalog:
        """The tools served now: the narrowing applied, withdrawn servers left out."""
        ...

    async def first_listing(self) -> None:
        """Return once the servers made their first connection (or a while passed)."""
        ...

    async def call(self, call: ToolCall) -> types.CallToolResult | types.InputRequiredResult:
        """Make ``call`` through the gate, its failures as tool errors: the gateway's own
        call (:meth:`Gateway.call <supervisor.gateway._core.Gateway.call>`)."""
        ...


def listed(entry: Entry) -> types.Tool:
    """The tool as the backing server listed it, under its merged name (and with the
    default description where it had none): what ``tools/list`` and ``load`` give."""
    tool = entry.tool.model_copy(update={"name": entry.name, "description": entry.description})
    return tool_served(tool, entry.server)  # its UI under the gateway's URI (MCP Apps)


class ToolSearch:
    """The four meta-tools over ``host``'s served catalog: :attr:`tools` to list,
    :meth:`call` to answer a ``tools/call`` of one of them."""

    def __init__(self, host: SearchHost) -> None:
        self._host = host
        #: the meta-tools, as ``tools/list`` gives them
        self.tools: tuple[types.Tool, ...] = meta_tools()
        self._by_name = {tool.name: tool for tool in self.tools}

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def seen_by(self, host: SearchHost) -> ToolSearch:
        """The same meta-tools over ``host`` (the gateway as one caller sees it)."""
        view = copy.copy(self)
        view._host = host
        return view

    def schema(self, name: str) -> dict[str, Any]:
        """The input schema of the meta-tool ``name``."""
        return self._by_name[name].input_schema

    async def call(self, call: ToolCall) -> types.CallToolResult | types.InputRequiredResult:
        """Answer ``call``, of one of the meta-tools: the tool the meta-tool ``call``
        calls is called with ``call``'s options (its progress, its ``approve`` deciding
        the approval, its ``rounds`` relayed).

        Arguments that do not fit its input schema raise
        :class:`~supervisor.errors.ToolArgumentsInvalid`; ``list`` of a server not served
        raises :class:`~supervisor.errors.UnknownServer`, and ``call`` of a tool not
        served :class:`~supervisor.errors.UnknownTool` (naming close matches): nothing
        was run, and the gateway answers each with a tool error.
        """
        # (a null for an optional argument is as if left out, as for any tool)
        name = call.name
        args: Mapping[str, Any] = prepare_arguments(self._by_name[name], call.arguments)
        if name == "call":
            called = attrs.evolve(call, name=args["name"], arguments=args.get("arguments") or {})
            return await self._host.call(called)
        await self._host.first_listing()
        if name == "list":
            answer = self.list_servers(
                args.get("server"), offset=args.get("offset", 0), limit=args.get("limit", PAGE)
            )
        elif name == "search":
            answer = self.search(args["query"], args.get("limit", SEARCH_LIMIT))
        else:
            answer = self.load(args["names"])
        failed = name == "load" and not answer["tools"]  # nothing of what was asked for
        return _structured(answer, is_error=failed)

    # -- the answers, as JSON data -------------------------------------------------------

    def list_servers(
        self, server: str | None = None, *, offset: int = 0, limit: int = PAGE
    ) -> dict[str, Any]:
        """The served servers (``servers``: name, status, tool count, description and
        last error where there are some); with ``server``, also ``tools`` (name and
        one-line description) from ``offset``, at most ``limit``, and their ``total``
        (``nextOffset`` when there are more)."""
        catalog = self._host.catalog()
        config = self._host.sup.config.servers
        servers: list[dict[str, Any]] = []
        for name, record in self._host.sup.status().items():
            if not self._host.serves(name):
                continue
            row: dict[str, Any] = {
                "name": name,
                "status": record.status,
                "tools": len(catalog.by_server.get(name, ())),
            }
            described = config[name].description if name in config else None
            if described:
                row["description"] = described
            if record.last_error and record.status != ServerStatus.CONNECTED:
                row["lastError"] = record.last_error
            servers.append(row)
        if server is None:
            return {"servers": servers}
        known = [row["name"] for row in servers]
        if server not in known:
            close = difflib.get_close_matches(server, known, n=CLOSE_MATCHES, cutoff=CLOSE_CUTOFF)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UnknownServer(
                f"no server named {server!r} is served here (servers: "
                f"{', '.join(known) or 'none'}){hint}"
            )
        total = len(catalog.by_server.get(server, ()))
        tools = catalog.list(server, limit, offset) if total else []
        answer: dict[str, Any] = {
            "servers": [row for row in servers if row["name"] == server],
            "tools": [{"name": t.name, "description": t.description} for t in tools],
            "total": total,
        }
        if offset + limit < total:
            answer["nextOffset"] = offset + limit
        return answer

    def search(self, query: str, limit: int = SEARCH_LIMIT) -> dict[str, Any]:
        """The ``limit`` best matches for ``query`` among the tools served now, best
        first (``tools``: name, server, one-line description, input schema)."""
        catalog = self._host.catalog()
        return {
            "tools": [
                {
                    "name": found.name,
                    "server": found.server,
                    "description": found.description,
                    "inputSchema": catalog[found.name].input_schema,
                }
                for found in catalog.search(query, limit)
            ]
        }

    def load(self, names: list[str]) -> dict[str, Any]:
        """The definitions of ``names`` served now (``tools``, in the order asked), and
        for each other name why not (``unknown``: ``name``, ``reason``, ``didYouMean``):
        a tool whose server is withdrawn says so; any other names close matches."""
        catalog = self._host.catalog()
        named = self._host.sup.snapshot.named
        tools: list[dict[str, Any]] = []
        unknown: list[dict[str, Any]] = []
        for name in dict.fromkeys(names):
            entry = catalog.get(name)
            if entry is not None:
                tools.append(
                    listed(entry).model_dump(mode="json", by_alias=True, exclude_none=True)
                )
                continue
            close = difflib.get_close_matches(name, catalog, n=CLOSE_MATCHES, cutoff=CLOSE_CUTOFF)
            known = named.get(name)
            if known is not None and self._host.serves(known.server, name):
                reason = self._down(known.server)
            else:
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                reason = f"no tool named {name!r} is served here{hint}"
            unknown.append({"name": name, "reason": reason, "didYouMean": close})
        return {"tools": tools, "unknown": unknown}

    def _down(self, server: str) -> str:
        record = self._host.sup.status().get(server)
        status = record.status if record is not None else "unknown"
        said = f"its server {server!r} is {status}"
        if record is not None and record.last_error:
            said += f" (last error: {record.last_error})"
        return said + "; its tools are withdrawn until it is back"


def _structured(answer: dict[str, Any], *, is_error: bool = False) -> types.CallToolResult:
    """``answer`` as ``structuredContent``, and as JSON text for clients that read text."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=msgspec.json.encode(answer).decode())],
        structured_content=answer,
        is_error=is_error,
    )


# -- the four tools ------------------------------------------------------------------------

_READ_ONLY = types.ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
_SUMMARY = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "description": {"type": "string"}},
    "required": ["name", "description"],
}
_SCHEMA = {"type": "object", "description": "a JSON Schema (2020-12 unless it says otherwise)"}


def meta_tools() -> tuple[types.Tool, ...]:
    """The four meta-tools: input schemas in JSON Schema 2020-12 (the protocol's default
    dialect, so none says ``$schema``), and output schemas for the three that answer
    with data of their own."""
    return (
        types.Tool(
            name="list",
            title="List servers and their tools",
            description=(
                "List the MCP servers behind this gateway: each one's name, status "
                "(connected, connecting, failed, stopped, ...) and how many tools it "
                "serves. With `server`, also that server's tools: names and one-line "
                f"descriptions, `limit` at a time (default {PAGE}) from `offset`. A server "
                "that is down shows its status and last error, and no tools. Then `load` "
                "the tools you need and `call` them; `search` finds tools by what they do."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "server": {
                        "type": "string",
                        "description": "a server's name, to list its tools",
                    },
                    "offset": {
                        "type": "integer",
                        "minimum": 0,
                        "default": 0,
                        "description": "skip this many of the server's tools",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": PAGE_MAX,
                        "default": PAGE,
                        "description": "list at most this many of the server's tools",
                    },
                },
                "additionalProperties": False,
            },
            output_schema={
                "type": "object",
                "properties": {
                    "servers": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "status": {"type": "string"},
                                "tools": {"type": "integer", "minimum": 0},
                                "description": {"type": "string"},
                                "lastError": {"type": "string"},
                            },
                            "required": ["name", "status", "tools"],
                        },
                    },
                    "tools": {"type": "array", "items": _SUMMARY},
                    "total": {"type": "integer", "minimum": 0},
                    "nextOffset": {"type": "integer", "minimum": 0},
                },
                "required": ["servers"],
            },
            annotations=_READ_ONLY,
        ),
        types.Tool(
            name="search",
            title="Search tools",
            description=(
                "Find tools by what they do: the best matches for a few keywords among "
                "every tool of every server behind this gateway, best first, each with "
                "its name, server, one-line description and input schema (the arguments "
                "`call` takes). Words of a tool's name count most, then prefixes, then "
                "words of its description. `load` gives a tool's full definition."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "minLength": 1,
                        "description": "keywords, such as 'create issue' or 'weather'",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": SEARCH_MAX,
                        "default": SEARCH_LIMIT,
                        "description": "return at most this many tools",
                    },
                },
                "required": ["query"],
                "additionalProperties": False,
            },
            output_schema={
                "type": "object",
                "properties": {
                    "tools": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "server": {"type": "string"},
                                "description": {"type": "string"},
                                "inputSchema": _SCHEMA,
                            },
                            "required": ["name", "server", "description", "inputSchema"],
                        },
                    }
                },
                "required": ["tools"],
            },
            annotations=_READ_ONLY,
        ),
        types.Tool(
            name="load",
            title="Load tool definitions",
            description=(
                "Get the full definitions of tools by name, as their servers list them: "
                "description, inputSchema (the arguments), outputSchema and annotations "
                "(read-only, destructive, ...). A name that is not served is reported in "
                "`unknown`, with the reason and the closest names. Then run a tool with "
                "`call`."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "names": {
                        "type": "array",
                        "items": {"type": "string"},
                        "minItems": 1,
                        "maxItems": LOAD_MAX,
                        "description": "tool names, as `search` or `list` gave them",
                    }
                },
                "required": ["names"],
                "additionalProperties": False,
            },
            output_schema={
                "type": "object",
                "properties": {
                    "tools": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "description": {"type": "string"},
                                "inputSchema": _SCHEMA,
                                "outputSchema": _SCHEMA,
                                "annotations": {"type": "object"},
                            },
                            "required": ["name", "inputSchema"],
                        },
                    },
                    "unknown": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "reason": {"type": "string"},
                                "didYouMean": {"type": "array", "items": {"type": "string"}},
                            },
                            "required": ["name", "reason", "didYouMean"],
                        },
                    },
                },
                "required": ["tools", "unknown"],
            },
            annotations=_READ_ONLY,
        ),
        types.Tool(
            name="call",
            title="Call a tool",
            description=(
                "Run a tool by name with its arguments (an object matching the tool's "
                "inputSchema, from `search` or `load`) and answer with the tool's own "
                "result. Arguments that do not match, a call that needs approval, or a "
                "server that is down give an error result saying so; the result's "
                "_meta['mcp-supervisor/error'].effect says whether it may have run."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "name": {
                        "type": "string",
                        "minLength": 1,
                        "description": "the tool's name, as `search`, `list` or `load` gave it",
                    },
                    "arguments": {
                        "type": "object",
                        "default": {},
                        "description": "the tool's arguments",
                    },
                },
                "required": ["name"],
                "additionalProperties": False,
            },
        ),
    )
