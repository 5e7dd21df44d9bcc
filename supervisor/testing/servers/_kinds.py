"""The fixture servers that are real ``MCPServer`` instances: echo, crash, changing, slow, rich."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from types import CoroutineType
from typing import Any, TypeVar

import anyio
from mcp.server.lowlevel import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Prompt
from mcp_types import ToolAnnotations

from ..._sdk import lowlevel_server
from ._advertise import advertise
from ._counting import ExecutionRecorder, call_id_of
from ._names import MCP_SERVER_KINDS, MCPServerKind

_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True)

_T = TypeVar("_T")


def make_server(
    kind: MCPServerKind,
    *,
    crash_after: int | None = None,
    count_file: str | os.PathLike[str] | None = None,
    exit_code: int = 1,
    hold_lists: str | os.PathLike[str] | None = None,
) -> MCPServer:
    """Build the fixture ``MCPServer`` of `kind`.

    Every kind has the tools ``echo(text) -> text`` (annotated read-only and idempotent),
    ``add(a, b) -> a + b`` (integers; no annotations, so treat it as side-effecting) and
    ``count() -> int``, the number of tool executions this server did (``count`` itself is
    an observer: never counted, never recorded, never crashes). Besides:

    - ``crash``: ends its process with ``os._exit(exit_code)`` right after executing (and
      recording) its ``crash_after``-th tool call (default 1), without answering it. In a
      test process this ends the test run: run it as a subprocess.
    - ``changing``: ``add_tool(name)`` registers a tool `name` (no arguments, returns its
      name) and ``remove_tool(name)`` removes one (``add_prompt(name)`` registers a
      prompt, its tools unchanged); each then announces the change both ways
      the SDK knows: ``notifications/tools/list_changed`` on the connection's standalone
      channel (reaches handshake-era clients' message handlers; dropped on 2026-07-28
      connections) and a ``ToolsListChanged`` event on the subscription bus (reaches
      2026-07-28 clients inside ``Client.listen(tools_list_changed=True)``). Its
      capabilities say ``tools.listChanged: true`` in both eras (the SDK's default
      handshake says false).
    - ``slow``: ``sleep(seconds, steps=0)`` sleeps (in ``steps`` steps, each reported as
      MCP progress), then answers ``"slept <seconds>"``; ``hold(seconds)`` records its
      execution first, then sleeps, then answers ``"held <seconds>"``; ``busy(seconds)``
      records its execution, then is in flight for ``seconds``, then answers the most
      ``busy`` calls that were in flight at once so far, which ``peak()`` (an observer,
      never recorded) answers too.
    - ``rich``: every kind of content, structured output, resources and prompts (see the
      package docstring and ``_rich.add_rich_features``). With `hold_lists`, its
      ``resources/list``, ``resources/templates/list`` and ``prompts/list`` are answered
      only once no file is at that path (looked for every 20 ms): a listing held for as
      long as a test wants.

    `crash_after` applies to any kind, so an ``echo`` server can crash too. With
    `count_file`, every execution appends its tool name as one line *before* answering
    (read it with ``count_executions``), followed by a tab and the call id when the
    request's ``_meta`` carries one (``executions_by_call``); the file survives the crash.
    """
    if kind not in MCP_SERVER_KINDS:
        raise ValueError(f"{kind!r} is not an MCPServer kind; choose from {MCP_SERVER_KINDS}")
    if kind == "crash" and crash_after is None:
        crash_after = 1
    recorder = ExecutionRecorder(
        count_file=count_file, crash_after=crash_after, exit_code=exit_code
    )
    server: MCPServer = MCPServer(f"fixture-{kind}", log_level="WARNING")

    @server.tool(annotations=_READ_ONLY)
    async def echo(text: str, ctx: Context) -> str:
        """Return `text` unchanged."""
        recorder.record("echo", call_id_of(ctx))
        return text

    @server.tool()
    async def add(a: int, b: int, ctx: Context) -> int:
        """Return a + b."""
        recorder.record("add", call_id_of(ctx))
        return a + b

    @server.tool(annotations=_READ_ONLY)
    async def count() -> int:
        """Return how many tool executions this server process did (not counting `count`)."""
        return recorder.executions

    if kind == "slow":

        @server.tool(annotations=_READ_ONLY)
        async def sleep(seconds: float, ctx: Context, steps: int = 0) -> str:
            """Sleep `seconds`, then answer; with `steps`, in that many steps, each
            reported as MCP progress (k of steps, "step k")."""
            for k in range(1, steps + 1):
                await anyio.sleep(seconds / steps)
                await ctx.report_progress(k, steps, f"step {k}")
            if not steps:
                await anyio.sleep(seconds)
            recorder.record("sleep", call_id_of(ctx))
            return f"slept {seconds}"

        @server.tool()
        async def hold(seconds: float, ctx: Context) -> str:
            """Record this execution at once, then sleep `seconds` before answering: a
            call that has taken effect long before its answer comes."""
            recorder.record("hold", call_id_of(ctx))
            await anyio.sleep(seconds)
            return f"held {seconds}"

        in_flight = [0, 0]  # busy calls running now, and the most at once so far

        @server.tool()
        async def busy(seconds: float, ctx: Context) -> int:
            """Be in flight for `seconds`, then answer the most `busy` calls that were
            in flight at once so far."""
            recorder.record("busy", call_id_of(ctx))
            in_flight[0] += 1
            in_flight[1] = max(in_flight)
            try:
                await anyio.sleep(seconds)
            finally:
                in_flight[0] -= 1
            return in_flight[1]

        @server.tool(annotations=_READ_ONLY)
        async def peak() -> int:
            """The most `busy` calls this server had in flight at once so far."""
            return in_flight[1]

    if kind == "changing":
        _add_changing_tools(server, recorder)
    if kind == "rich":
        from ._rich import add_rich_features

        add_rich_features(server, recorder)
        if hold_lists is not None:
            _hold_lists(server, os.fspath(hold_lists))
    return server


def _hold_lists(server: MCPServer, path: str) -> None:
    """Answer the server's resource, template and prompt listings only once ``path`` is gone."""

    hold = anyio.Path(path)

    def held(listing: Callable[[], Awaitable[_T]]) -> Callable[[], CoroutineType[Any, Any, _T]]:
        async def wait_then_list() -> _T:
            while await hold.exists():  # noqa: ASYNC110 - a file is what a test can hold
                await anyio.sleep(0.02)
            return await listing()

        return wait_then_list

    # Its list handlers call these public methods on each request.
    server.list_resources = held(server.list_resources)
    server.list_resource_templates = held(server.list_resource_templates)
    server.list_prompts = held(server.list_prompts)


def _add_changing_tools(server: MCPServer, recorder: ExecutionRecorder) -> None:
    # Advertise tools.listChanged on the handshake too (2026-07-28 derives it from the
    # served `subscriptions/listen`). The SDK only takes NotificationOptions as an argument
    # of the low-level `create_initialization_options()` (its TODO L53), which every
    # transport calls without arguments: bind the option on this server's instance.
    advertise(lowlevel_server(server), NotificationOptions(tools_changed=True))

    async def announce(ctx: Context) -> None:
        # Handshake era: a notification on the standalone channel (stdio: the pipe; HTTP:
        # the GET stream). The SDK drops it silently on 2026-07-28 connections, where
        # change notifications only travel on `subscriptions/listen` streams (the bus).
        await ctx.request_context.session.send_tool_list_changed()
        await ctx.notify_tools_changed()

    @server.tool()
    async def add_tool(name: str, ctx: Context) -> str:
        """Register a tool called `name` and announce that the tool list changed."""

        async def added(ctx: Context) -> str:
            recorder.record(name, call_id_of(ctx))
            return name

        server.add_tool(added, name=name, description=f"Added at run time by add_tool({name!r}).")
        recorder.record("add_tool", call_id_of(ctx))
        await announce(ctx)
        return f"added {name}"

    @server.tool()
    async def remove_tool(name: str, ctx: Context) -> str:
        """Remove the tool called `name` and announce that the tool list changed."""
        server.remove_tool(name)
        recorder.record("remove_tool", call_id_of(ctx))
        await announce(ctx)
        return f"removed {name}"

    @server.tool()
    async def add_prompt(name: str, ctx: Context) -> str:
        """Register a prompt called `name` and announce that the prompt list changed
        (its tools stay as they are)."""

        def prompt() -> str:
            return f"the prompt {name}"

        server.add_prompt(Prompt.from_function(prompt, name=name))
        recorder.record("add_prompt", call_id_of(ctx))
        await ctx.request_context.session.send_prompt_list_changed()
        await ctx.notify_prompts_changed()
        return f"added prompt {name}"
