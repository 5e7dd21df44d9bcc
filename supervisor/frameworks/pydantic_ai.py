"""The supervisor's tools as a PydanticAI toolset
(``pip install 'mcp-supervisor[pydantic-ai]'``).

::

    from pydantic_ai import Agent
    from supervisor.asyncio import open_supervisor
    from supervisor.frameworks.pydantic_ai import SupervisorToolset

    async with open_supervisor("mcp.json") as sup:
        agent = Agent(model, toolsets=[SupervisorToolset(sup)])
        result = await agent.run("…")

PydanticAI asks a toolset for its tools at each step of a run: :class:`SupervisorToolset`
answers with the live merged catalog (a failed or stopped server's tools are gone until
it is back) and calls them through the supervisor's gate, which validates the arguments
against each tool's ``inputSchema`` (PydanticAI passes them through as a JSON object).
Arguments the gate refuses are a ``ModelRetry`` naming each wrong field (the model is
asked to correct them, within the tool's retries); any other failure is a ``ToolFailed``
whose text says what failed and whether the call may have run (the model adapts; it is
not asked to repeat it). Entering or leaving the toolset does nothing: the servers live
as long as the ``open_supervisor`` block.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

import pydantic_core
from pydantic_ai import BinaryContent, RunContext
from pydantic_ai.exceptions import ModelRetry, ToolFailed
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool

from ..asyncio import AsyncSupervisor
from ..errors import ToolArgumentsInvalid
from ._toolbox import Toolbox

__all__ = ["SupervisorToolset"]

#: Arguments pass as any JSON object: the gate checks them against the tool's schema.
_ANY_OBJECT = pydantic_core.SchemaValidator(
    pydantic_core.core_schema.dict_schema(
        pydantic_core.core_schema.str_schema(), pydantic_core.core_schema.any_schema()
    )
)


class SupervisorToolset(AbstractToolset[Any]):
    """A PydanticAI toolset of an asyncio supervisor's tools (those of ``servers`` only,
    if given); ``call_options`` go to each ``call``; ``max_retries`` is each tool's
    budget of corrected arguments (the run's own when ``None``)."""

    def __init__(
        self,
        sup: AsyncSupervisor,
        *,
        id: str | None = None,
        servers: Iterable[str] | None = None,
        call_options: Mapping[str, Any] | None = None,
        max_retries: int | None = None,
    ) -> None:
        self._id = id
        self._toolbox = Toolbox(sup, servers=servers, call_options=call_options)
        self.max_retries = max_retries

    @property
    def id(self) -> str | None:
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """The tools on offer now (the first time, once every server was connected and
        listed its tools)."""
        await self._toolbox.settle()
        retries = self.max_retries if self.max_retries is not None else ctx.max_retries
        return {
            entry.name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=entry.name,
                    description=entry.description,
                    parameters_json_schema=entry.input_schema,
                    metadata={"server": entry.server, "original_name": entry.original_name},
                ),
                max_retries=retries,
                args_validator=_ANY_OBJECT,
            )
            for entry in self._toolbox.entries()
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        answer = await self._toolbox.call(name, tool_args)
        if isinstance(answer.error, ToolArgumentsInvalid):
            raise ModelRetry(answer.text)
        if answer.is_error:
            raise ToolFailed(answer.text)
        result = answer.result
        assert result is not None
        if not result.text and isinstance(result.structured, dict):
            return result.structured
        if not result.images:
            return answer.text
        images = [BinaryContent(data=_bytes(i.data), media_type=i.mime_type) for i in result.images]
        return [answer.text, *images]


def _bytes(data: str) -> bytes:
    return base64.b64decode(data)
