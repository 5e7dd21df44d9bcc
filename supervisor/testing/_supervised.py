"""A ready state machine over a supervisor: calls and faults in any order, then the checks.

:class:`SupervisorMachine` runs fixture servers (stdio, each counting its executions per
call) under one supervisor; its rules are ``call``, ``kill``, ``hang``, ``resume``,
``list_changed`` and ``restart``, in whatever order hypothesis draws them. After every
step no call may be left without an outcome; after the last one the faults stop and the
servers must all come back and answer, the catalog must be the union of their tools, and
the call checker must find nothing lost, duplicated or late, and no process left behind.
A failure shrinks to the fewest steps (``steps=[hang(0), call(0, 'a')]``).

Subclass it to change the servers (``servers``: name → fixture kind offering ``echo``),
the supervisor's settings, or to add your own rules (an agent's step, say)::

    class MyMachine(SupervisorMachine):
        servers = {"calc": "echo", "notes": "echo"}

    test_my_machine = MyMachine.as_test(max_examples=10, max_steps=8)
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import trio
from hypothesis import strategies as st

from ._machine import AsyncStateMachine, invariant, rule

if TYPE_CHECKING:
    from .servers._names import ServerKind

__all__ = ["SupervisorMachine"]

#: server indexes the rules draw; taken modulo the number of servers
_INDEX = st.integers(0, 7)


class SupervisorMachine(AsyncStateMachine):
    """See the module."""

    #: the servers: name → fixture kind (it must offer ``echo(text)``)
    servers: ClassVar[dict[str, ServerKind]] = {"a": "echo", "b": "echo"}
    #: the config's ``supervisor`` section
    settings: ClassVar[dict[str, object]] = {
        "backoff": {"local": {"initial": 0.05, "max": 0.2, "maxAttempts": 50}},
        "intensity": {"maxRestarts": 1000, "withinSeconds": 1},
    }
    #: each call's timeout, in seconds
    call_timeout: ClassVar[float] = 3.0
    #: how long, after the last step, every server has to be back and answering
    recovery_timeout: ClassVar[float] = 120.0

    def __init__(self) -> None:
        self.sup: Any = None
        self.history: Any = None
        self.names = list(self.servers)
        self.directory: Path | None = None
        self.hung: set[str] = set()
        self.outcomes: list[tuple[str, str]] = []

    def server(self, index: int) -> str:
        return self.names[index % len(self.names)]

    def config(self, directory: Path) -> dict[str, object]:
        """The supervisor's config: each fixture server with an (empty) fault plan, so that
        faults can be injected into it, and a count file in ``directory``."""
        from .servers import stdio_params

        entries = {}
        for name, kind in self.servers.items():
            command, args = stdio_params(kind, count_file=directory / f"{name}.executions")
            entries[name] = {
                "command": command,
                "args": args,
                "approve": False,
                "initTimeout": 120,
                "faults": [],
            }
        return {"mcpServers": entries, "supervisor": self.settings}

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        from ..faults import CallHistory, Injector
        from ..faults._checker import leftover_processes, spawned_pids
        from ..runtime import open_supervisor

        with tempfile.TemporaryDirectory(prefix="mcp-machine-") as directory:
            self.directory = Path(directory)
            self.history = CallHistory()
            async with open_supervisor(
                self.config(self.directory), history=self.history, injector=Injector()
            ) as sup:
                self.sup = sup
                await sup.connect_all()
                yield
            left = leftover_processes(spawned_pids(self.history.events))
            assert not left, f"processes left behind: {left}"

    # -- the rules -----------------------------------------------------------------------

    @rule(index=_INDEX, text=st.text("abc", min_size=1, max_size=3))
    async def call(self, index: int, text: str) -> None:
        """Call ``echo`` on a server: it answers, or fails with a documented error."""
        from ..errors import CallMayHaveTakenEffect, ServerUnavailable, ToolCallTimeout

        name = self.server(index)
        try:
            result = await self.sup.server(name).call_tool(
                "echo", {"text": text}, timeout=self.call_timeout
            )
        except (CallMayHaveTakenEffect, ToolCallTimeout, ServerUnavailable) as exc:
            self.outcomes.append((name, type(exc).__name__))
            return
        assert result.text == text, f"{name} echoed {result.text!r} for {text!r}"
        self.outcomes.append((name, "ok"))

    async def _inject(self, index: int, action: str) -> str | None:
        from ..errors import ServerUnavailable

        name = self.server(index)
        try:
            await self.sup.server(name).inject(action)
        except ServerUnavailable:
            return None  # not connected now: nothing to inject into
        return name

    @rule(index=_INDEX)
    async def kill(self, index: int) -> None:
        """Kill a server's process group, as a crash."""
        name = await self._inject(index, "kill")
        if name is not None:
            self.hung.discard(name)

    @rule(index=_INDEX)
    async def hang(self, index: int) -> None:
        """Stop a server (SIGSTOP): it answers nothing until resumed or restarted."""
        name = await self._inject(index, "hang")
        if name is not None:
            self.hung.add(name)

    @rule(index=_INDEX)
    async def resume(self, index: int) -> None:
        """Resume a stopped server."""
        name = await self._inject(index, "resume")
        if name is not None:
            self.hung.discard(name)

    @rule(index=_INDEX)
    async def list_changed(self, index: int) -> None:
        """A spurious ``notifications/tools/list_changed`` from a server."""
        await self._inject(index, "list_changed")

    @rule(index=_INDEX)
    async def restart(self, index: int) -> None:
        """Restart a server through the supervisor."""
        name = self.server(index)
        await self.sup.restart(name)
        self.hung.discard(name)

    # -- the checks ----------------------------------------------------------------------

    @invariant()
    def every_call_ended(self) -> None:
        pending = self.history.pending()
        assert not pending, f"calls without an outcome: {pending}"

    async def finish(self) -> None:
        """The faults stop: every server comes back and answers, the catalog is the union
        of their tools, and the checker finds nothing lost, duplicated or late."""
        from ..faults import check
        from .servers import executions_by_call

        for name in list(self.hung):
            await self._inject(self.names.index(name), "resume")
        async with self.sup.subscribe("*") as events:
            with trio.fail_after(self.recovery_timeout):
                for name in self.names:
                    while True:
                        try:
                            result = await self.sup.server(name).call_tool(
                                "echo", {"text": "back"}, timeout=self.call_timeout
                            )
                        except Exception:  # noqa: BLE001 - still recovering: restarting, degraded
                            await events.receive()  # look again once something happened
                            continue
                        assert result.text == "back"
                        break
        tools = await self.sup.tools()
        listed = set(tools)  # the merged names
        offered = {
            f"{name}_{tool.name}" for name in self.names for tool in self.sup.server(name).tools
        }
        executions: dict[str, int] = {}
        assert self.directory is not None
        for name in self.names:
            executions.update(executions_by_call(self.directory / f"{name}.executions"))
        verdict = check(self.history, executions=executions, catalog=(listed, offered))
        assert verdict.ok, "\n".join(verdict.problems)
