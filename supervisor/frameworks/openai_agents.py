"""The supervisor as one MCP server of the OpenAI Agents SDK
(``pip install 'mcp-supervisor[openai-agents]'``).

::

    from agents import Agent, Runner
    from supervisor.asyncio import open_supervisor
    from supervisor.frameworks.openai_agents import SupervisedMCPServer

    async with open_supervisor("mcp.json") as sup:
        agent = Agent(name="helper", mcp_servers=[SupervisedMCPServer(sup)])
        result = await Runner.run(agent, "…")

:class:`SupervisedMCPServer` is an ``agents.mcp.MCPServer``: the Agents SDK lists its
tools before each turn of the model — the live merged catalog, so the tools of a server
that failed or was stopped are gone until it is back (nothing to invalidate: the list
is read from memory) — and calls them through the supervisor's gate. A call that fails
comes back as an MCP error result (``isError``) whose text says what failed and whether
the call may have run, for the model to read; the Agents SDK's own error function (which
would ask the model to try again) is not involved. Prompts and resources are the
supervisor's merged ones. ``connect`` connects every server; ``cleanup`` does nothing:
the servers live as long as the ``open_supervisor`` block.

Keyword options of ``agents.mcp.MCPServer`` (``require_approval``,
``tool_input_guardrails``, …) are passed on to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import mcp_types as types
from agents.mcp import MCPServer

from ..asyncio import AsyncSupervisor
from ..registry import Entry
from ._toolbox import Answer, Toolbox

__all__ = ["SupervisedMCPServer"]


class SupervisedMCPServer(MCPServer):
    """An asyncio supervisor's merged catalog (of ``servers`` only, if given) as one
    MCP server of an Agents SDK agent; ``call_options`` go to each ``call``."""

    def __init__(
        self,
        sup: AsyncSupervisor,
        *,
        name: str = "mcp-supervisor",
        servers: Iterable[str] | None = None,
        call_options: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self._name = name
        self._toolbox = Toolbox(sup, servers=servers, call_options=call_options)
        self._made: dict[tuple[str, str], types.Tool] = {}
        self._listed: list[types.Tool] | None = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def sup(self) -> AsyncSupervisor:
        return self._toolbox.sup

    async def connect(self) -> None:
        """Connect every server now (they connect on first use otherwise)."""
        await self.sup.connect_all()

    async def cleanup(self) -> None:
        """Nothing: the servers stop when the ``open_supervisor`` block is left."""

    async def list_tools(self, run_context: Any = None, agent: Any = None) -> list[types.Tool]:
        """The tools on offer now, under their merged names (the first time, once every
        server was connected and listed its tools)."""
        await self._toolbox.settle()
        tools: list[types.Tool] = []
        made: dict[tuple[str, str], types.Tool] = {}
        for entry in self._toolbox.entries():
            key = (entry.name, entry.fingerprint)
            made[key] = self._made.get(key) or _tool(entry)
            tools.append(made[key])
        self._made, self._listed = made, tools
        return tools

    @property
    def cached_tools(self) -> list[types.Tool] | None:
        """The tools as last listed."""
        return self._listed

    async def call_tool(
        self, tool_name: str, arguments: dict[str, Any] | None, meta: dict[str, Any] | None = None
    ) -> types.CallToolResult:
        """Call ``tool_name`` through the gate: its result, or an ``isError`` result
        saying what became of the call. (``meta`` is not sent: the gate makes the
        request.)"""
        return _result(await self._toolbox.call(tool_name, arguments))

    async def list_prompts(self) -> types.ListPromptsResult:
        prompts = await self.sup.prompts()
        if self._toolbox.servers is not None:
            prompts = [p for p in prompts if p.server in self._toolbox.servers]
        listed = [p.prompt.model_copy(update={"name": p.name}) for p in prompts]
        return types.ListPromptsResult(prompts=listed)

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None
    ) -> types.GetPromptResult:
        return await self.sup.get_prompt(name, arguments)

    async def list_resources(self, cursor: str | None = None) -> types.ListResourcesResult:
        resources = await self.sup.resources()
        if self._toolbox.servers is not None:
            resources = [r for r in resources if r.server in self._toolbox.servers]
        return types.ListResourcesResult(resources=[r.resource for r in resources])

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        return await self.sup.read_resource(uri)


def _tool(entry: Entry) -> types.Tool:
    """The server's tool under its merged name, with its description (or the catalog's
    default one)."""
    update = {"name": entry.name, "description": entry.description}
    return entry.tool.model_copy(update=update)


def _result(answer: Answer) -> types.CallToolResult:
    """What the Agents SDK hands its model: the server's own result when the tool ran
    and answered (its text within the supervisor's preview limits), else the answer's
    text as an error result."""
    result = answer.result
    if answer.is_error or result is None:
        text = types.TextContent(type="text", text=answer.text)
        return types.CallToolResult(content=[text], is_error=True)
    content: list[Any] = [types.TextContent(type="text", text=result.text)]
    content += [
        types.ImageContent(type="image", data=i.data, mime_type=i.mime_type) for i in result.images
    ]
    return types.CallToolResult(content=content, structured_content=_structured(result.structured))


def _structured(value: object) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None
