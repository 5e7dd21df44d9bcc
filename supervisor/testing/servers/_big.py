"""The ``big`` fixture: a low-level ``Server`` with many tools, invalid ones on demand,
and tool-list changes in bursts or in the middle of a call.

Built on ``mcp.server.lowlevel.Server`` rather than ``MCPServer`` so that it can list what
``MCPServer`` would refuse to: duplicate and empty names, input schemas that are not
objects or not valid JSON Schema. Announcing a change works as ``changing`` does, both
ways the SDK knows: ``notifications/tools/list_changed`` for handshake-era clients and a
``ToolsListChanged`` event on the ``subscriptions/listen`` bus for 2026-07-28 clients.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged

from ._advertise import advertise
from ._counting import ExecutionRecorder, call_id_of

DEFAULT_TOOLS = 1000
"""How many ``tool_NNNN`` tools ``big`` lists unless told (``--tools``)."""

DEFAULT_PAGE_SIZE = 100
"""Tools per ``tools/list`` page unless told (``--page-size``)."""

LIST_RECORD = "tools/list"
"""The count-file line written for each ``tools/list`` fetch (a request without cursor)."""

CONTROL_TOOLS = ("burst", "change_during", "list_count")
"""The tools ``big`` always lists besides its numbered and extra ones."""

_NUMBERED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"x": {"type": "integer", "description": "any integer"}},
}
_TEXT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "any text"}},
}
_NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


class BigServer:
    """The state and handlers of one ``big`` server (see the package docstring).

    ``tools`` numbered tools ``tool_0000`` … (``x: integer``; answer ``tool_0007 x=3``),
    each ``extra_tools`` name as a tool taking ``text`` (answer ``<name>: <text>``), the
    control tools, a ``generation_<g>`` marker tool (answer ``g``), the tools added by
    ``change_during``, then ``invalid`` bad definitions cycling through: ``bad_type_<i>``
    (a property of ``"type": "nonsense"``), ``bad_bound_<i>`` (a property of
    ``"minLength": -1``) — input schemas that are not valid JSON Schema — the first
    numbered tool's name again, and an empty name. (A root schema other than
    ``"type": "object"`` cannot be sent: the SDK's wire types refuse the whole result, on
    the server's side and on the client's.) ``tools/list`` serves ``page_size`` tools a
    page; changes are appended after the numbered tools, so a fetch running across a change
    sees it on its later pages.
    """

    def __init__(
        self,
        *,
        tools: int = DEFAULT_TOOLS,
        page_size: int = DEFAULT_PAGE_SIZE,
        invalid: int = 0,
        extra_tools: Sequence[str] = (),
        recorder: ExecutionRecorder | None = None,
    ) -> None:
        if tools < 0 or invalid < 0 or page_size < 1:
            raise ValueError("tools and invalid must be >= 0 and page_size >= 1")
        self.recorder = recorder or ExecutionRecorder()
        self.page_size = page_size
        width = max(4, len(str(max(tools - 1, 0))))
        self._numbered = [
            types.Tool(
                name=f"tool_{i:0{width}d}",
                description=f"Numbered tool {i} of a big catalog: answers its name and x.",
                input_schema=_NUMBERED_SCHEMA,
            )
            for i in range(tools)
        ]
        self._extra = [
            types.Tool(
                name=name, description=f"Extra tool {name}: echoes text.", input_schema=_TEXT_SCHEMA
            )
            for name in extra_tools
        ]
        self._controls = [
            types.Tool(
                name="burst",
                description="Change the tool list n times, announcing each change, then answer.",
                input_schema={
                    "type": "object",
                    "properties": {"n": {"type": "integer", "minimum": 0}},
                    "required": ["n"],
                },
            ),
            types.Tool(
                name="change_during",
                description="Add a tool called `name` and announce it; answer once a "
                "tools/list fetch has served the new list (or after `timeout` s).",
                input_schema={
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "timeout": {"type": "number", "minimum": 0},
                    },
                    "required": ["name"],
                },
            ),
            types.Tool(
                name="list_count",
                description="The tools/list fetches (requests without cursor) and pages "
                "served so far, as JSON.",
                input_schema=_NO_ARGS,
            ),
        ]
        self._invalid = [self._bad(i) for i in range(invalid)]
        self._added: list[types.Tool] = []
        self.generation = 0
        self.version = 0  # bumped by every change of the list
        self.fetches = 0
        self.pages = 0
        self._served = 0  # the version the last complete fetch served
        self._served_event = anyio.Event()
        self._changing = anyio.Lock()  # held by a change being announced; listing waits
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus)
        self.server: Server[Any] = Server(
            "fixture-big",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self.listen,
        )
        # tools.listChanged on the handshake too (2026-07-28 derives it from the served
        # subscriptions/listen): transports call this without arguments.
        advertise(self.server, NotificationOptions(tools_changed=True))

    def _bad(self, i: int) -> types.Tool:
        # Only what the SDK lets through on both ends: its wire types refuse a whole
        # tools/list result whose tool has a root schema other than "type": "object" (or
        # "properties" that is not an object, "required" that is not a list of strings).
        kind = i % 4
        if kind == 0:
            return types.Tool(
                name=f"bad_type_{i}",
                description="A property schema whose type is not a JSON Schema type.",
                input_schema={"type": "object", "properties": {"x": {"type": "nonsense"}}},
            )
        if kind == 1:
            return types.Tool(
                name=f"bad_bound_{i}",
                description="A property schema with a negative minLength.",
                input_schema={
                    "type": "object",
                    "properties": {"x": {"type": "string", "minLength": -1}},
                },
            )
        if kind == 2:
            first = self._numbered[0].name if self._numbered else "list_count"
            return types.Tool(name=first, description="A duplicate name.", input_schema=_NO_ARGS)
        return types.Tool(name="", description="An empty name.", input_schema=_NO_ARGS)

    def listed(self) -> list[types.Tool]:
        """The whole tool list as of now, in listing order."""
        marker = types.Tool(
            name=f"generation_{self.generation}",
            description="Marks the tool list's generation; answers it.",
            input_schema=_NO_ARGS,
        )
        return [
            *self._numbered,
            *self._extra,
            *self._controls,
            marker,
            *self._added,
            *self._invalid,
        ]

    # -- handlers -----------------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        async with self._changing:  # a change being announced is announced first
            pass
        cursor = params.cursor if params is not None else None
        if cursor is None:
            self.fetches += 1
            self._record_listing()
        self.pages += 1
        tools = self.listed()
        try:
            start = int(cursor) if cursor is not None else 0
        except ValueError:
            start = len(tools)
        end = start + self.page_size
        if end >= len(tools):
            self._served = self.version
            self._served_event.set()
            self._served_event = anyio.Event()
            return types.ListToolsResult(tools=tools[start:])
        return types.ListToolsResult(tools=tools[start:end], next_cursor=str(end))

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        name = params.name
        args = params.arguments or {}
        if name == "list_count":  # an observer: never recorded
            counts = {"fetches": self.fetches, "pages": self.pages}
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=json.dumps(counts))],
                structured_content=counts,
            )
        known = {t.name for t in self.listed()}
        if name not in known:
            return _text(f"unknown tool {name!r}", error=True)
        self.recorder.record(name, call_id_of(ctx))
        if name == "burst":
            n = int(args.get("n", 0))
            async with self._changing:
                for _ in range(n):
                    self.generation += 1
                    self.version += 1
                    await self._announce(ctx)
                await self._delivered()
            return _text(f"sent {n} list_changed; generation {self.generation}")
        if name == "change_during":
            added = str(args["name"])
            async with self._changing:
                self._added.append(
                    types.Tool(
                        name=added,
                        description=f"Added by change_during({added!r}).",
                        input_schema=_NO_ARGS,
                    )
                )
                self.version += 1
                await self._announce(ctx)
            listed = await self._served_at_least(self.version, float(args.get("timeout", 10)))
            seen = "fetched" if listed else "not fetched"
            return _text(f"added {added}; the new list was {seen}")
        if name.startswith("generation_"):
            return _text(str(self.generation))
        if name.startswith("tool_"):
            return _text(f"{name} x={args.get('x')}")
        if name in {t.name for t in self._extra}:
            return _text(f"{name}: {args.get('text', '')}")
        return _text(name)

    # -- announcing ---------------------------------------------------------------------

    async def _announce(self, ctx: ServerRequestContext[Any]) -> None:
        # Handshake era: the standalone notification (dropped on 2026-07-28 connections,
        # where change notices only travel on subscriptions/listen streams: the bus).
        await ctx.session.send_tool_list_changed()
        await self.bus.publish(ToolsListChanged())

    async def _delivered(self) -> None:
        """Wait until every listen stream has taken its buffered events (each stream's
        task writes them in order, ahead of any answer sent after this returns)."""
        streams = self.listen._streams
        while any(s.statistics().current_buffer_used for s in list(streams)):
            await anyio.lowlevel.checkpoint()

    async def _served_at_least(self, version: int, timeout: float) -> bool:
        """Wait until a complete ``tools/list`` fetch served ``version`` (or later)."""
        with anyio.move_on_after(timeout):
            while self._served < version:
                await self._served_event.wait()
        return self._served >= version

    def _record_listing(self) -> None:
        path = self.recorder.count_file
        if path is not None:
            with path.open("a", encoding="utf-8") as f:
                f.write(LIST_RECORD + "\n")


def make_big(
    *,
    tools: int = DEFAULT_TOOLS,
    page_size: int = DEFAULT_PAGE_SIZE,
    invalid: int = 0,
    extra_tools: Sequence[str] = (),
    count_file: str | os.PathLike[str] | None = None,
    crash_after: int | None = None,
    exit_code: int = 1,
) -> BigServer:
    """Build a ``big`` server; serve ``.server`` (a low-level ``Server``)."""
    recorder = ExecutionRecorder(
        count_file=count_file, crash_after=crash_after, exit_code=exit_code
    )
    return BigServer(
        tools=tools,
        page_size=page_size,
        invalid=invalid,
        extra_tools=extra_tools,
        recorder=recorder,
    )


async def serve_big_stdio(big: BigServer) -> None:
    """Serve ``big`` over this process's stdin/stdout until stdin closes."""
    from mcp.server.stdio import stdio_server

    server = big.server
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
