"""The supervisor's tools as LangChain tools (``pip install 'mcp-supervisor[langchain]'``:
``langchain-core`` only, not LangChain's MCP adapters).

::

    from supervisor.asyncio import open_supervisor
    from supervisor.frameworks.langchain import SupervisorToolkit

    async with open_supervisor("mcp.json") as sup:
        toolkit = SupervisorToolkit(sup)
        model = chat_model.bind_tools(await toolkit.aget_tools())

Each tool is a ``StructuredTool`` with the catalog entry's merged name, description and
``inputSchema`` (as its ``args_schema``), called through the supervisor's gate. It
answers ``(text, ToolResult)`` (``response_format="content_and_artifact"``: the
``ToolMessage``'s artifact is the :class:`~supervisor.tools.ToolResult`). A call that
fails is a ``ToolMessage`` with ``status="error"`` whose text says what failed and
whether the call may have run (``handle_tool_error``) — never an exception out of the
agent's loop.

:meth:`SupervisorToolkit.aget_tools` connects the servers not connected yet, the first
time; it and :meth:`~SupervisorToolkit.get_tools` read the live catalog: the tools of a server that
failed or was stopped are gone from it until the server is back; a model that still
calls one is told its server is unavailable and the call was not made.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.tools import BaseTool, BaseToolkit, StructuredTool, ToolException
from pydantic import ConfigDict, PrivateAttr

from ..asyncio import AsyncSupervisor
from ..registry import Entry
from ._toolbox import Answer, Toolbox

__all__ = ["SupervisorToolkit"]


class SupervisorToolkit(BaseToolkit):
    """A LangChain toolkit of an asyncio supervisor's tools (those of ``servers`` only,
    if given); ``call_options`` go to each ``call`` (``timeout=``, say)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    _toolbox: Toolbox = PrivateAttr()
    _made: dict[tuple[str, str], StructuredTool] = PrivateAttr(default_factory=dict)

    def __init__(
        self,
        sup: AsyncSupervisor,
        *,
        servers: Iterable[str] | None = None,
        call_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self._toolbox = Toolbox(sup, servers=servers, call_options=call_options)

    async def aget_tools(self) -> list[BaseTool]:
        """:meth:`get_tools`, the first time once every server was connected and listed
        its tools (servers start lazily: until then, a server has none on offer)."""
        await self._toolbox.settle()
        return self.get_tools()

    def get_tools(self) -> list[BaseTool]:
        """The tools on offer now, as ``StructuredTool``s (the same object for a tool
        whose definition did not change): none of a server not connected yet —
        :meth:`aget_tools` connects them first."""
        tools: list[BaseTool] = []
        made: dict[tuple[str, str], StructuredTool] = {}
        for entry in self._toolbox.entries():
            key = (entry.name, entry.fingerprint)
            made[key] = self._made.get(key) or self._tool(entry)
            tools.append(made[key])
        self._made = made
        return tools

    def _tool(self, entry: Entry) -> StructuredTool:
        toolbox = self._toolbox
        name = entry.name

        async def call(**arguments: Any) -> tuple[Any, Any]:
            answer = await toolbox.call(name, arguments)
            if answer.is_error:
                raise ToolException(answer.text)
            return _content(answer), answer.result

        return StructuredTool(
            name=name,
            description=entry.description,
            args_schema=entry.input_schema,
            coroutine=call,
            response_format="content_and_artifact",
            handle_tool_error=True,
            metadata={"server": entry.server, "original_name": entry.original_name},
        )


def _content(answer: Answer) -> str | list[str | dict[str, Any]]:
    """The text, and the images kept inline as LangChain's standard image blocks."""
    images = answer.result.images if answer.result is not None else ()
    if not images:
        return answer.text
    blocks: list[str | dict[str, Any]] = [{"type": "text", "text": answer.text}]
    blocks += [{"type": "image", "base64": i.data, "mime_type": i.mime_type} for i in images]
    return blocks
