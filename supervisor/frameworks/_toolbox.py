"""What the framework adapters share: the tools on offer now, from the live catalog, and
a call through the supervisor's gate whose failure is an answer for the model saying
whether the call may have run.

Nothing here imports a framework: each adapter module does, and only it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

import attrs

from ..asyncio import AsyncSupervisor
from ..errors import (
    SupervisorError,
    ToolArgumentsInvalid,
    ToolError,
    UnknownTool,
)
from ..registry import Entry
from ..tools import ToolResult
from ..tools._outcome import FAIL, INFO, classify

Effect = Literal["ran", "not executed", "may have taken effect"]

#: What the model is told after the supervisor's message, by what became of the call.
_NOT_MADE = "The call was not made."
_FIX_ARGUMENTS = "The call was not made: correct the arguments and call it again."
_MAY_HAVE_RUN = "The call may have taken effect and was not repeated."
_CHECK = "Check its effect before calling it again."


@attrs.frozen
class Answer:
    """What became of one call, for a framework to hand to its model.

    ``text`` is what the model reads: the tool's text when it ran (its own error text when
    it reported one), else the supervisor's error followed by what became of the call.
    ``effect`` says that as data: ``"ran"``, ``"not executed"`` or ``"may have taken
    effect"``. ``result`` is the :class:`~supervisor.tools.ToolResult` when the tool
    answered; ``error`` the :class:`~supervisor.errors.SupervisorError` when it failed.
    """

    text: str
    effect: Effect
    result: ToolResult | None = None
    error: SupervisorError | None = None

    @property
    def is_error(self) -> bool:
        """Whether the call failed: the tool reported an error, or it was not made, or
        its fate is unknown."""
        return self.error is not None


def answer_of(exc: SupervisorError) -> Answer:
    """The answer for a call that raised ``exc`` (after it was handed to the gate)."""
    if isinstance(exc, ToolError):
        result = exc.result if isinstance(exc.result, ToolResult) else None
        return Answer(text=exc.text or str(exc), effect="ran", result=result, error=exc)
    outcome, _ = classify(exc, sent=True)
    said = str(exc)
    if outcome == FAIL:
        after = _FIX_ARGUMENTS if isinstance(exc, ToolArgumentsInvalid) else _NOT_MADE
        return Answer(text=f"{said}\n{after}", effect="not executed", error=exc)
    if outcome == INFO:
        after = _CHECK if "may have taken effect" in said else f"{_MAY_HAVE_RUN} {_CHECK}"
        return Answer(text=f"{said}\n{after}", effect="may have taken effect", error=exc)
    return Answer(text=said, effect="ran", error=exc)  # answered, not usably (too large…)


class Toolbox:
    """An asyncio supervisor's tools as a framework sees them: those on offer now (the
    connected servers', optionally of some ``servers`` only), read from the live catalog
    each time, and calls of them through the gate."""

    def __init__(
        self,
        sup: AsyncSupervisor,
        *,
        servers: Iterable[str] | None = None,
        call_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(sup, AsyncSupervisor):
            raise TypeError(
                "agent frameworks run on asyncio: give their tools the handle of "
                "supervisor.asyncio.open_supervisor, not a trio supervisor's "
                f"(got {type(sup).__name__})"
            )
        self.sup = sup
        self.servers = None if servers is None else frozenset(servers)
        self.call_options = dict(call_options or {})
        self._settled = False

    async def settle(self) -> None:
        """The first time: connect every server not connected yet (a lazy one has no
        tools in the catalog until then) and wait for the catalog to take in what they
        offer. Later, nothing: a server that fails after is followed, not waited for."""
        if not self._settled:
            await self.sup.tools()
            self._settled = True

    def entries(self) -> list[Entry]:
        """The tools on offer now, in catalog order: a server that failed or stopped has
        none (its tools come back when it does), and so has one not connected yet
        (:meth:`settle` first)."""
        current = self.sup.trio_handle.catalog
        if self.servers is None:
            return list(current.values())
        return [entry for entry in current.values() if entry.server in self.servers]

    def offers(self, name: str) -> bool:
        """Whether ``name`` is one of this toolbox's tools (its server's up or not)."""
        entry = self.sup.trio_handle.snapshot.named.get(name)
        return entry is not None and (self.servers is None or entry.server in self.servers)

    async def call(self, name: str, arguments: Mapping[str, object] | None) -> Answer:
        """Call ``name`` through the supervisor's gate (validation, approval, history,
        audit, tracing as every call): the tool's answer, or what became of the call.
        Errors that are not the supervisor's (a bug, a cancellation) are raised."""
        if not self.offers(name):
            exc = UnknownTool(f"tool {name!r} is not one of this agent's tools")
            return answer_of(exc)
        try:
            result = await self.sup.call(name, arguments, **self.call_options)
        except SupervisorError as exc:
            return answer_of(exc)
        text = result.text or result.structured_preview or ""
        return Answer(text=text, effect="ran", result=result)
